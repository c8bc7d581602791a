"""An OpenAI-compatible completions server on 127.0.0.1 answering from the local SmolLM2, the way
vLLM or llama.cpp's server answers: `echo` with `logprobs` returns every prompt token's
log-probability (the first has none), for one prompt or several, given as text or token ids.

    python -m tests.completions_server --port 8123 [--latency 0.25]

With `max_tokens` 1 or more, the greedy next token follows the prompt's, with its log-probability,
as a real server generates it. A server that needs no key: no Authorization header is required.

Model names that misbehave once per distinct request body (for retry tests): `smollm2-500-once`
answers HTTP 500 first, `smollm2-slow-once` first holds the request unanswered until it comes
again (a client's retry after its timeout), whatever the client's timeout.
`smollm2-echo-key` answers HTTP 401 quoting the Authorization header it was sent (secrets test).
Model names that answer wrongly, as engines seen in the wild do (for the server check):
`smollm2-generated-only` echoes nothing of the prompt, only the generated token (llama.cpp's server);
`smollm2-no-logprobs` returns no log-probabilities; `smollm2-off-by-one` gives each prompt token the
log-probability of that token given itself and everything before it (llama-cpp-python 0.3.36);
`smollm2-min-tokens-1` refuses `max_tokens` 0 with HTTP 400, as servers that validate it do.
With --memo, a prompt answered before is answered from memory, so a request costs the added
latency alone (a stand-in for a fast remote server, to measure the client's concurrency).
With --instant, no model is loaded: every prompt is answered at once, each token's log-probability
a function of its text and the token before it (a stand-in for an engine that costs nothing, to
measure the platform's own cost per document; prompts as text only, split at spaces).
GET /health answers 200; GET /calls returns the number of completions requests served and of
prompts answered. POST /hold holds every completions request from then on, unanswered, until one is
sent again byte for byte (the server check's, sent as text, excepted: every client sends the same one): two clients
asking for the same things in the same order then both send their first request before either gets
an answer (for a test of two runs at once that must not race each other).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import accumulate

from eval_platform.common.models.served import CHECK_PROMPT
from tests.http_json import send_json


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
INSTANT_NEXT = " ."  # the token an instant answer generates


INSTANT_CONTEXT_TOKENS = 3  # the last tokens whose log-probability depends on all the text before them


def instant_choice(index: int, prompt, max_tokens: int, model: str = "") -> dict:
    """An answer computed from the prompt's text alone, in the shape `choice` gives: each token's
    log-probability between -1.05 and -0.05, a function of the token and the one before it (of all
    the text before it and the model's name for the last tokens, so that a continuation's value
    depends on its context, and two models disagree)."""
    if not isinstance(prompt, str):
        raise ValueError("the instant server takes prompts as text, not token ids")
    first, *rest = prompt.split(" ")  # its "tokens": the text up to each space, from the space on
    tokens = [first, *(" " + part for part in rest), *([INSTANT_NEXT] if max_tokens >= 1 else [])]
    encoded = [token.encode() for token in tokens]
    offsets = list(accumulate(map(len, tokens), initial=0))[:-1]
    seeds = list(map(zlib.crc32, encoded[:-1]))
    for position in range(max(1, len(tokens) - INSTANT_CONTEXT_TOKENS), len(tokens)):
        seeds[position - 1] = zlib.crc32(prompt[: offsets[position]].encode(), zlib.crc32(model.encode()))
    values = [None, *(-(50 + crc % 1000) / 1000 for crc in map(zlib.crc32, encoded[1:], seeds))]
    logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": offsets, "top_logprobs": None}
    return {"index": index, "text": "".join(tokens), "finish_reason": "length", "logprobs": logprobs}


def completion(model: str, choices: list[dict], max_tokens: int) -> dict:
    """A completions response holding `choices`."""
    tokens = max_tokens * len(choices)
    return {
        "id": "cmpl-local",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens},
    }


def serve(port: int, latency_s: float, memo: bool, instant: bool = False) -> None:
    from eval_engine import DEFAULT_LOCAL_MODEL, load_local_model
    from eval_platform.environment import environment

    settings = environment()
    model = (
        None
        if instant
        else load_local_model(DEFAULT_LOCAL_MODEL, settings.model_cache, torch_threads=settings.torch_threads)
    )
    answered: dict[str, dict] = {}
    seen: set[str] = set()
    calls, prompts_answered = [0], [0]
    lock = threading.Lock()
    held: set[str] | None = None  # the bodies asked since POST /hold, while a hold is on
    retried: dict[str, threading.Event] = {}  # a slow-once body's: set when it comes again
    repeated = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # connections kept open between requests, as engines' servers keep them

        def log_message(self, *args):
            pass

        def _send(self, status: int, payload: dict) -> None:
            send_json(self, status, payload)

        def do_GET(self):
            counts = {"calls": calls[0], "prompts": prompts_answered[0]}
            self._send(200, counts if self.path.startswith("/calls") else {"status": "ok"})

        def do_POST(self):
            nonlocal held
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path.startswith("/hold"):
                held = set()
                repeated.clear()
                return self._send(200, {"status": "holding"})
            body = json.loads(raw)
            digest = hashlib.sha256(raw).hexdigest()
            with lock:
                calls[0] += 1
                first = digest not in seen
                seen.add(digest)
                if held is not None and body["prompt"] not in (CHECK_PROMPT, [CHECK_PROMPT]):
                    if digest in held:
                        repeated.set()
                    held.add(digest)
            if held is not None and body["prompt"] not in (CHECK_PROMPT, [CHECK_PROMPT]):
                repeated.wait()
            time.sleep(latency_s)
            if body["model"].endswith("-echo-key"):
                sent = self.headers.get("Authorization", "")
                return self._send(
                    401, {"error": {"message": f"Incorrect API key provided: {sent}", "type": "invalid_request_error"}}
                )
            if body["model"].endswith("-500-once") and first:
                return self._send(500, {"error": {"message": "internal error", "type": "server_error"}})
            if body["model"].endswith("-slow-once") and first:
                retried.setdefault(digest, threading.Event()).wait()
            elif body["model"].endswith("-slow-once"):
                retried.setdefault(digest, threading.Event()).set()
            behaviour = next((b for b in BEHAVIOURS if body["model"].endswith(f"-{b}")), "")
            max_tokens = int(body.get("max_tokens") or 0)
            if behaviour == "min-tokens-1" and max_tokens < 1:
                return self._send(
                    400, {"error": {"message": "max_tokens must be at least 1", "type": "invalid_request_error"}}
                )
            prompts = body["prompt"]
            if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
                prompts = [prompts]
            with lock:
                prompts_answered[0] += len(prompts)
            if model is None:
                try:
                    choices = [
                        instant_choice(index, prompt, max_tokens, body["model"]) for index, prompt in enumerate(prompts)
                    ]
                except ValueError as error:
                    return self._send(400, {"error": {"message": str(error), "type": "invalid_request_error"}})
                return self._send(200, completion(body["model"], choices, max_tokens))
            choices = []
            for index, prompt in enumerate(prompts):
                key = json.dumps([prompt, max_tokens, behaviour])
                if not (memo and key in answered):
                    with lock:  # one forward pass at a time on the shared model
                        answered[key] = choice(model, 0, prompt, max_tokens, behaviour)
                choices.append({**answered[key], "index": index})
            if not memo:
                answered.clear()
            self._send(200, completion(body["model"], choices, max_tokens))

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"serving on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0, help="Seconds added to every request.")
    parser.add_argument("--memo", action="store_true", help="Answer a prompt seen before from memory.")
    parser.add_argument("--instant", action="store_true", help="Load no model: answer from the text at once.")
    args = parser.parse_args()
    serve(args.port, args.latency, args.memo, args.instant)
