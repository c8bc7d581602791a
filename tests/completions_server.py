"""An OpenAI-compatible completions server on 127.0.0.1 answering from the local SmolLM2, the way
vLLM or llama.cpp's server answers: `echo` with `logprobs` returns every prompt token's
log-probability (the first has none), for one prompt or several, given as text or token ids.

    python -m tests.completions_server --port 8123 [--latency 0.25]

With `max_tokens` 1 or more, the greedy next token follows the prompt's, with its log-probability,
as a real server generates it. A server that needs no key: no Authorization header is required.

Model names that misbehave once per distinct request body (for retry tests): `smollm2-500-once`
answers HTTP 500 first, `smollm2-slow-once` first sleeps longer than any client waits.
`smollm2-echo-key` answers HTTP 401 quoting the Authorization header it was sent (secrets test).
Model names that answer wrongly, as engines seen in the wild do (for the server check):
`smollm2-generated-only` echoes nothing of the prompt, only the generated token (llama.cpp's server);
`smollm2-no-logprobs` returns no log-probabilities; `smollm2-off-by-one` gives each prompt token the
log-probability of that token given itself and everything before it (llama-cpp-python 0.3.36);
`smollm2-min-tokens-1` refuses `max_tokens` 0 with HTTP 400, as servers that validate it do.
With --memo, a prompt answered before is answered from memory, so a request costs the added
latency alone (a stand-in for a fast remote server, to measure the client's concurrency).
GET /health answers 200; GET /calls returns the number of completions requests served.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.http_json import send_json

SLOW_S = 30.0


def token_logprobs(model, ids: list[int], off_by_one: bool = False):
    """log P(token i | tokens before it) for every token of a prompt (None for the first), and the
    greedy next token with its log-probability; `off_by_one`: each token given itself and everything
    before it, as a broken engine answers."""
    import torch

    with torch.inference_mode():
        logits = model.network(input_ids=torch.tensor([ids])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    shift = 0 if off_by_one else 1
    prompt = [None] + [logprobs[i - shift, ids[i]].item() for i in range(1, len(ids))]
    following = int(logprobs[-1].argmax())
    return prompt, following, logprobs[-1, following].item()


def choice(model, index: int, prompt, max_tokens: int, behaviour: str) -> dict:
    ids = list(prompt) if isinstance(prompt, list) else model.encode(prompt)
    values, following, following_logprob = token_logprobs(model, ids, off_by_one=behaviour == "off-by-one")
    tokens = [model.tokenizer.decode([token]) for token in ids]
    if max_tokens >= 1:
        tokens, values = tokens + [model.tokenizer.decode([following])], values + [following_logprob]
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    if behaviour == "generated-only":
        tokens, values, offsets = tokens[len(ids) :], values[len(ids) :], offsets[len(ids) :]
    logprobs = (
        None
        if behaviour == "no-logprobs"
        else {"tokens": tokens, "token_logprobs": values, "text_offset": offsets, "top_logprobs": None}
    )
    return {"index": index, "text": "".join(tokens), "finish_reason": "length", "logprobs": logprobs}


BEHAVIOURS = ("generated-only", "no-logprobs", "off-by-one", "min-tokens-1")


def serve(port: int, latency_s: float, memo: bool) -> None:
    from eval_platform.common.models.local import load_local_model

    model = load_local_model()
    answered: dict[str, dict] = {}
    seen: set[str] = set()
    calls = [0]
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, payload: dict) -> None:
            send_json(self, status, payload)

        def do_GET(self):
            self._send(200, {"calls": calls[0]} if self.path.startswith("/calls") else {"status": "ok"})

        def do_POST(self):
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            digest = hashlib.sha256(raw).hexdigest()
            with lock:
                calls[0] += 1
                first = digest not in seen
                seen.add(digest)
            time.sleep(latency_s)
            if body["model"].endswith("-echo-key"):
                sent = self.headers.get("Authorization", "")
                return self._send(
                    401, {"error": {"message": f"Incorrect API key provided: {sent}", "type": "invalid_request_error"}}
                )
            if body["model"].endswith("-500-once") and first:
                return self._send(500, {"error": {"message": "internal error", "type": "server_error"}})
            if body["model"].endswith("-slow-once") and first:
                time.sleep(SLOW_S)
            behaviour = next((b for b in BEHAVIOURS if body["model"].endswith(f"-{b}")), "")
            max_tokens = int(body.get("max_tokens") or 0)
            if behaviour == "min-tokens-1" and max_tokens < 1:
                return self._send(
                    400, {"error": {"message": "max_tokens must be at least 1", "type": "invalid_request_error"}}
                )
            prompts = body["prompt"]
            if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
                prompts = [prompts]
            choices = []
            for index, prompt in enumerate(prompts):
                key = json.dumps([prompt, max_tokens, behaviour])
                if not (memo and key in answered):
                    with lock:  # one forward pass at a time on the shared model
                        answered[key] = choice(model, 0, prompt, max_tokens, behaviour)
                choices.append({**answered[key], "index": index})
            if not memo:
                answered.clear()
            self._send(
                200,
                {
                    "id": "cmpl-local",
                    "object": "text_completion",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": choices,
                    "usage": {
                        "prompt_tokens": 0,
                        "completion_tokens": max_tokens * len(choices),
                        "total_tokens": max_tokens * len(choices),
                    },
                },
            )

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"serving on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0, help="Seconds added to every request.")
    parser.add_argument("--memo", action="store_true", help="Answer a prompt seen before from memory.")
    args = parser.parse_args()
    serve(args.port, args.latency, args.memo)
