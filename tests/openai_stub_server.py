"""An OpenAI-compatible chat-completions server on 127.0.0.1 for tests and benchmarks.

Models (the `model` field, after litellm strips the `openai/` prefix):
- `compressor`: keeps a prompt-dependent share of the words of the text after "Original Text:".
- `judge-openai`: rubric JSON, but an invalid (unparseable) reply for about a third of the texts
  (decided by the text, so every run gets the same replies).
- `judge-claude`: the first request with a given text fails with HTTP 500 (counted in `errors`);
  later ones get rubric JSON inside a ```json fence with chatter around it.
- `judge-gemini`: never answers (until the server stops).
- `judge-fast`: rubric JSON, always (for the latency benchmark).
- `judge-harsh`, `judge-lenient`: rubric JSON two points of faithfulness lower, or one higher and
  full clarity and readability (for the judge analysis); `judge-noisy`: rubric JSON whose faithfulness
  is the `seed` it was sent modulo 6 (0 without one), so each sample of a sampled judge scores apart.
- `mutator`: "Rewritten: " + the last line of the request (the tag text to rewrite).
- `answerer`: "Answer to: " + the whole request (so tests can see what reached the model).
- `rater`: a blind-evaluation score: 5 if the answer cites an Article, else 2.
- `judge-pairwise`: an MT-Bench pairwise judgment preferring the longer answer ("[[A]]" or "[[B]]",
  "[[C]]" when both are as long; the user prompt's "[The Start of Assistant A's Answer]" sections).
- `judge-single`: an MT-Bench grade, "Rating: [[n]]" with n = 1 + the user prompt's length mod 10
  (`single_rating`), except for a prompt whose length is a multiple of 7: a judgment without one.
- `letter-logprobs`: answers "B" with first-token `top_logprobs` (B, A, " C").
- `letter-text`: answers "I think the answer is C." without log-probabilities.
- `echo`: replies with the last user message (for the latency benchmark), cut at `max_tokens` words
  (a word a token) with the `finish_reason` `length`, else `stop` as every other model's.
Hostile judges (the fault-injection suite): `judge-nan` (faithfulness NaN), `judge-out-of-range`
(faithfulness 7), `judge-negative` (clarity -1), `judge-mismatch` (a score that is not the sum of
its parts), `judge-truncated` (JSON cut off), `judge-huge` (5 MB of text), `judge-empty` (HTTP 200
with an empty body), `judge-500` (always HTTP 500), `judge-429` (HTTP 429 with `Retry-After: 1` on
the first request of each text, then rubric JSON; `attempt_times` records when each request came),
`judge-endless` (a response that never ends: headers, then a byte now and then, forever).
`echo-key` answers HTTP 401 quoting the Authorization header it was sent, as a careless proxy
might, and so does a request in another provider's API (Anthropic's or Gemini's, with its key in a
header or the URL), for the secrets test.
A fixed `latency_s` is added to every call. `calls` counts requests per model, `sent` keeps each
request's sampling parameters (temperature, top_p, top_k, min_p, seed) per model. `aliases` map other
model names to these (e.g. a name litellm knows the price of, to be answered as `judge-fast`).
"""

import hashlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.http_json import send_json
from tests.processes import WAIT_S

# What tests give a client against this server: ample for any answer on a loaded machine, so retry and
# call counts are exact. The judges that never answer get a short timeout of their own: they hang until
# the server stops, so their timeouts are certain however slow the machine is.
CLIENT_TIMEOUT_S = WAIT_S  # a client of the stub waits for an answer as long as a test waits for anything
HANGING_MODEL_TIMEOUTS_S = {"openai/judge-gemini": 1.0, "openai/judge-endless": 1.0}


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def compress(prompt: str) -> str:
    instructions, _, original = prompt.partition("Original Text:\n")
    words = original.split()
    share = 0.2 + 0.15 * (_digest(instructions) % 5)  # 20% .. 80% of the words
    return " ".join(words[: max(1, int(len(words) * share))])


def pairwise_judgment(prompt: str) -> str:
    """A length-loving MT-Bench judge: the longer answer wins, equal lengths tie."""

    def answer(side: str) -> str:
        start, end = f"[The Start of Assistant {side}'s Answer]\n", f"\n[The End of Assistant {side}'s"
        return prompt.split(start)[1].split(end)[0]

    a, b = len(answer("A")), len(answer("B"))
    verdict = "[[A]]" if a > b else "[[B]]" if b > a else "[[C]]"
    reason = f"Assistant A's answer has {a} characters and Assistant B's {b}; the longer is better."
    return f"{reason}\n\nFinal verdict: {verdict}"


def single_rating(prompt: str) -> int | None:
    """The grade `judge-single` gives a user prompt (None: it writes no rating)."""
    return None if len(prompt) % 7 == 0 else 1 + len(prompt) % 10


def rubric(prompt: str) -> dict:
    original = prompt.split("ORIGINAL TEXT:\n")[1].split("\n\nCOMPRESSED TEXT:")[0]
    compressed = prompt.split("COMPRESSED TEXT:\n")[1].split("\n\nSCORING RUBRIC:")[0]
    kept = len(compressed.split()) / max(1, len(original.split()))
    faithfulness = min(5, round(kept * 6))
    clarity, readability = (3 if kept > 0.4 else 2), (2 if kept > 0.5 else 1)
    return {
        "faithfulness": faithfulness,
        "clarity": clarity,
        "readability": readability,
        "score": faithfulness + clarity + readability,
        "comments": f"kept {kept:.0%} of the words",
    }


def _logprobs(body: dict, text: str) -> dict | None:
    if not body.get("logprobs") or body["model"] != "letter-logprobs":
        return None
    top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in (("B", -0.2), ("A", -2.0), (" C", -3.0))]
    return {"content": [{"token": text, "logprob": -0.2, "bytes": None, "top_logprobs": top}]}


def _with(verdict: dict, **changes) -> str:
    return json.dumps({**verdict, **changes}).replace('"NaN"', "NaN")


HOSTILE_REPLIES = {
    "judge-nan": lambda v: _with(v, faithfulness="NaN"),
    "judge-out-of-range": lambda v: _with(v, faithfulness=7, score=7 + v["clarity"] + v["readability"]),
    "judge-negative": lambda v: _with(v, clarity=-1, score=v["faithfulness"] - 1 + v["readability"]),
    "judge-mismatch": lambda v: _with(v, score=v["score"] + 3),
    "judge-truncated": lambda v: json.dumps(v)[:40],
    "judge-huge": lambda v: "x" * 5_000_000,
}


class StubServer:
    def __init__(self, latency_s: float = 0.0, aliases: dict[str, str] | None = None):
        self.latency_s = latency_s
        self.aliases = aliases or {}
        self.calls: Counter = Counter()
        self.sent: dict[str, list[dict]] = {}  # model -> each request's sampling parameters, in order
        self.refused_keys: list[str] = []  # keys sent in another provider's API, refused and quoted back
        self.errors: Counter = Counter()
        self._seen: Counter = Counter()
        self.attempt_times: dict[tuple[str, str], list[float]] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._allowance: int | None = None  # calls still answered before the rest are held (hold_after)
        self._released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def gateway_config(self, **changes) -> dict:
        """The `gateway` resource's launchpad config for a client of this server."""
        return {
            "config": {
                "api_base": self.api_base,
                "timeout_s": CLIENT_TIMEOUT_S,
                "model_timeouts_s": HANGING_MODEL_TIMEOUTS_S,
                "max_retries": 1,
                "backoff_s": 0.05,
                "max_concurrency": 16,
                **changes,
            }
        }

    def __enter__(self):
        self._thread.start()
        return self

    def hold_after(self, answers: int) -> None:
        """Answer `answers` more calls, then hold every further call unanswered until `release()`:
        a run stops at a known point however fast or loaded the machine (counted in `calls` still)."""
        with self._lock:
            self._allowance = answers
            self._released.clear()

    def release(self) -> None:
        """Answer the held calls (to clients that may have gone), and every call from now on."""
        with self._lock:
            self._allowance = None
        self._released.set()

    def __exit__(self, *exc):
        self._released.set()
        self._stopping.set()  # ends the endless responses
        self._server.shutdown()
        self._server.server_close()

    def reply(self, model: str, prompt: str) -> tuple[int, str]:
        model = self.aliases.get(model, model)
        with self._lock:
            self.calls[model] += 1
            self._seen[(model, prompt)] += 1
            attempt = self._seen[(model, prompt)]
            self.attempt_times.setdefault((model, prompt), []).append(time.monotonic())
            held = self._allowance == 0
            if self._allowance:
                self._allowance -= 1
        if held:
            self._released.wait()
        time.sleep(self.latency_s)
        if model == "compressor":
            return 200, compress(prompt)
        if model == "judge-openai":
            return 200, ("{faithfulness: 4, clarity: 3}" if _digest(prompt) % 3 == 0 else json.dumps(rubric(prompt)))
        if model == "judge-claude":
            if attempt == 1:
                with self._lock:
                    self.errors[model] += 1
                return 500, "internal error"
            return 200, f"Here is my evaluation:\n```json\n{json.dumps(rubric(prompt))}\n```\nThanks."
        if model == "mutator":
            return 200, "Rewritten: " + prompt.splitlines()[-1]
        if model == "answerer":
            return 200, "Answer to: " + prompt
        if model == "rater":
            answer = prompt.split("Answer to score:")[1]
            return 200, "5" if "Article" in answer else "2"
        if model == "judge-pairwise":
            return 200, pairwise_judgment(prompt)
        if model == "judge-single":
            rating = single_rating(prompt)
            return 200, "The answer is fine." if rating is None else f"The answer is fine.\n\nRating: [[{rating}]]"
        if model == "letter-logprobs":
            return 200, "B"
        if model == "letter-text":
            return 200, "I think the answer is C."
        if model == "judge-fast":
            return 200, json.dumps(rubric(prompt))
        if model in ("judge-harsh", "judge-lenient"):
            verdict = rubric(prompt)
            if model == "judge-harsh":
                verdict["faithfulness"] = max(0, verdict["faithfulness"] - 2)
            else:
                verdict.update(faithfulness=min(5, verdict["faithfulness"] + 1), clarity=3, readability=2)
            verdict["score"] = verdict["faithfulness"] + verdict["clarity"] + verdict["readability"]
            return 200, json.dumps(verdict)
        if model == "judge-gemini":
            self._stopping.wait()
            return 200, json.dumps(rubric(prompt))
        if model in HOSTILE_REPLIES:
            return 200, HOSTILE_REPLIES[model](rubric(prompt))
        if model == "judge-500":
            return 500, "internal error"
        if model == "judge-429":
            return (429, "rate limited") if attempt == 1 else (200, json.dumps(rubric(prompt)))
        return 200, prompt

    def endless(self, handler: BaseHTTPRequestHandler) -> None:
        """Headers announcing a body that never comes: a byte every 0.2 s until the client leaves."""
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(10**9))
            handler.end_headers()
            while not self._stopping.is_set():
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not self.path.endswith("/chat/completions"):  # Anthropic's or Gemini's API: refuse, quoting
                    sent = [
                        self.headers.get(name) for name in ("x-api-key", "x-goog-api-key") if self.headers.get(name)
                    ]
                    stub.refused_keys += sent
                    message = f"Incorrect API key provided: {' '.join(sent)} for {self.path}"
                    return send_json(self, 401, {"error": {"message": message, "type": "invalid_request_error"}})
                prompt = body["messages"][-1]["content"]
                model = stub.aliases.get(body["model"], body["model"])
                with stub._lock:
                    stub.sent.setdefault(model, []).append(
                        {
                            name: body[name]
                            for name in ("temperature", "top_p", "top_k", "min_p", "seed")
                            if name in body
                        }
                    )
                if model == "judge-endless":
                    stub.reply(model, prompt)
                    return stub.endless(self)
                if model == "echo-key":
                    stub.reply(model, prompt)
                    sent = self.headers.get("Authorization", "")
                    message = f"Incorrect API key provided: {sent.removeprefix('Bearer ')} (header {sent!r})"
                    return send_json(self, 401, {"error": {"message": message, "type": "invalid_request_error"}})
                if model == "judge-empty":
                    stub.reply(model, prompt)
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, text = stub.reply(body["model"], prompt)
                if model == "judge-noisy":  # a judge whose verdict changes with the sample it is asked for
                    verdict = {**rubric(prompt), "faithfulness": body.get("seed", 0) % 6}
                    text = json.dumps(
                        {**verdict, "score": sum(verdict[k] for k in ("faithfulness", "clarity", "readability"))}
                    )
                finish = "stop"
                if model == "echo" and len(text.split(" ")) > body.get("max_tokens", len(text)):
                    text, finish = " ".join(text.split(" ")[: body["max_tokens"]]), "length"
                if status != 200:
                    payload = {"error": {"message": text, "type": "server_error"}}
                else:
                    payload = {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": finish,
                                "logprobs": _logprobs(body, text),
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": len(prompt.split()),
                            "completion_tokens": len(text.split()),
                            "total_tokens": len(prompt.split()) + len(text.split()),
                        },
                    }
                send_json(self, status, payload, {"Retry-After": "1"} if status == 429 else None)

        return Handler
