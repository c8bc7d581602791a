"""Where one evaluation's log-likelihood model phase goes, for both tools on the same documents:
tokenization, pass planning, the host's other work, the forward passes (CUDA events on a GPU, wall
time on the CPU) and their number and tokens.

    python speed/loglikelihood_breakdown.py                               # MMLU-Pro, BBH, ARC-Challenge
    python speed/loglikelihood_breakdown.py --tasks mmlu_pro --docs 40

The same requests (the harness's own, built by its task objects from the shipped slices with their
declared shots: MMLU-Pro 5-shot, BBH 3-shot, ARC-Challenge 25-shot) go to
- lm-evaluation-harness's HF model (`HFLM.loglikelihood`): its `tok_encode` is tokenization, its
  `_model_call` the forward passes, the rest host work (sorting, padding, collating, log-softmax);
- this engine as it was ("before": each request's context and whole text encoded one at a time,
  padded rows with masks, each row's past copied) and as it is ("after": each distinct text
  encoded once in batches, packed passes): `encoded_pairs` is tokenization; building the trie, folding
  it and planning the passes is planning; the network's forward passes; the rest host work (each
  pass's indices, gathering the cached keys, scoring).

Printed per task and tool: the model phase's seconds and the share of each part, passes and
forward-pass tokens. `gpu_check.py` calls `breakdown` on the GPU at real shapes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import LocalCausalLM, load_local_model  # noqa: E402
from eval_platform.benchmarks.declarations import FEWSHOT_SEED, EvaluationSettings, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.harness import HarnessRun, build_tasks  # noqa: E402
from eval_platform.common.models import LoglikelihoodRequest  # noqa: E402
from eval_platform.environment import environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASKS = {  # name -> (declared benchmark or harness task, shots)
    "mmlu_pro": ("leaderboard_mmlu_pro", None),
    "bbh": ("leaderboard_bbh", None),
    "arc_challenge": ("arc_challenge", 25),
}
PARTS = ("tokenization", "planning", "forward", "host")


class Clock:
    """Seconds per part of a model phase; forward passes timed by CUDA events on a GPU."""

    def __init__(self, device: Any) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.passes = self.tokens = 0
        self.cuda = device.type == "cuda"
        self.events: list[tuple[Any, Any]] = []

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start

    def timed(self, name: str, function: Callable) -> Callable:
        def call(*args, **kwargs):
            with self.part(name):
                return function(*args, **kwargs)

        return call

    def watch(self, network: Any) -> Callable[[], None]:
        """Time the network's forward passes (and count them and their tokens); returns the unhooking."""
        import torch

        started: list[Any] = []

        def before(module, args, kwargs):
            ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
            self.passes += 1
            self.tokens += ids.numel()
            if self.cuda:
                event = torch.cuda.Event(enable_timing=True)
                event.record()
                started.append(event)
            started.append(time.perf_counter())

        def after(module, args, kwargs, output):
            wall = time.perf_counter() - started.pop()
            if self.cuda:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self.events.append((started.pop(), end))
            else:
                self.seconds["forward"] += wall
            self.seconds["forward launch"] += wall

        hooks = [
            network.register_forward_pre_hook(before, with_kwargs=True),
            network.register_forward_hook(after, with_kwargs=True),
        ]
        return lambda: [hook.remove() for hook in hooks]

    def report(self, total: float) -> dict[str, Any]:
        """The parts of `total` seconds: on a GPU, `forward` is the GPU's time in the passes and
        `host` the rest."""
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            self.seconds["forward"] = sum(start.elapsed_time(end) for start, end in self.events) / 1000
        known = self.seconds["tokenization"] + self.seconds["planning"]
        forward = self.seconds["forward"] if not self.cuda else self.seconds["forward launch"]
        parts = {name: self.seconds[name] for name in PARTS[:3]}
        parts["host"] = max(0.0, total - known - forward)
        return {"seconds": total, "parts": parts, "passes": self.passes, "tokens": self.tokens}


def task_run(name: str, documents: int) -> HarnessRun:
    """A task's run over its first `documents` (per BBH subtask) of the shipped slices, with its
    declared shots."""
    task, shots = TASKS[name]
    benchmark = declared_benchmarks(environment().benchmarks_dir)[task]
    if benchmark.is_dataset:  # the dataset's harness task over its shipped slice and few-shot file
        assert benchmark.dataset is not None and benchmark.fewshot is not None
        files = {task: {"test": benchmark.dataset.file, "train": benchmark.fewshot.file}}
        settings = EvaluationSettings(task=task, data_files=files, num_fewshot=shots)
    else:
        settings = benchmark.evaluation_settings()
    return HarnessRun((task,), settings.model_copy(update={"limit": documents}))


def run_requests(run: HarnessRun) -> list[LoglikelihoodRequest]:
    """The harness's log-likelihood requests for a run's documents, built by its own task objects
    (their shots and few-shot seed as `simple_evaluate` sets them), document by document."""
    from lm_eval.api.group import Group

    requests = []
    for built in build_tasks(run):
        for task in built.get_all_tasks() if isinstance(built, Group) else [built]:
            if run.settings.num_fewshot is not None:
                task.set_config(key="num_fewshot", value=run.settings.num_fewshot)
            task.set_fewshot_seed(seed=FEWSHOT_SEED)
            task.build_all_requests(limit=run.settings.limit)
            instances = sorted(task.instances, key=lambda i: (i.doc_id, i.idx))
            requests += [LoglikelihoodRequest(*i.args) for i in instances if i.request_type == "loglikelihood"]
    return requests


def harness_side(lm: Any, requests: list[LoglikelihoodRequest]) -> tuple[dict, list[float]]:
    """The harness's HF model on the requests: its breakdown and its log-likelihoods."""
    from lm_eval.api.instance import Instance

    clock = Clock(lm.model.device)
    instances = [Instance("loglikelihood", {}, (r.context, r.continuation), index) for index, r in enumerate(requests)]
    lm.tok_encode = clock.timed("tokenization", lm.tok_encode)
    unhook = clock.watch(lm.model)
    try:
        start = time.perf_counter()
        answers = lm.loglikelihood(instances, disable_tqdm=True)
        total = time.perf_counter() - start
    finally:
        unhook()
        del lm.tok_encode  # the class's own again
    return clock.report(total), [value for value, _ in answers]


def engine_side(model: LocalCausalLM, requests: list[LoglikelihoodRequest], before: bool) -> tuple[dict, list[float]]:
    """This engine on the requests, as it is or as it was (`before`): its breakdown and values."""
    from eval_engine import packed, prefix_cache

    clock = Clock(model.network.device)
    patched = [
        (model, "encoded_pairs", model.encoded_pairs),
        (prefix_cache.PrefixTrie, "add", prefix_cache.PrefixTrie.add),
        (prefix_cache, "_fold_short", prefix_cache._fold_short),
        (packed, "plan_passes", packed.plan_passes),
    ]
    encoded_pairs = model.encoded_pairs
    for owner, name, function in patched[1:]:
        setattr(owner, name, clock.timed("planning", function))
    if before:  # one request at a time, as the engine encoded them before
        model.encoded_pairs = clock.timed(  # type: ignore[method-assign]
            "tokenization", lambda batch: [pair for r in batch for pair in encoded_pairs([r])]
        )
        model.packed_passes = False
    else:
        model.encoded_pairs = clock.timed("tokenization", encoded_pairs)  # type: ignore[method-assign]
    unhook = clock.watch(model.network)
    try:
        start = time.perf_counter()
        values = model.loglikelihoods(requests)
        total = time.perf_counter() - start
    finally:
        unhook()
        for owner, name, function in patched:
            if owner is model:
                delattr(model, name)
            else:
                setattr(owner, name, function)
        model.packed_passes = True
    return clock.report(total), values


def breakdown(name: str, requests: list[LoglikelihoodRequest], lm: Any, model: LocalCausalLM) -> list[dict]:
    """Both tools (ours before and after) on the same requests: one row each."""
    rows = []
    harness, theirs = harness_side(lm, requests)
    rows.append({"task": name, "tool": "harness", **harness})
    for before in (True, False):
        ours, values = engine_side(model, requests, before)
        difference = max(abs(a - b) for a, b in zip(values, theirs, strict=True))
        rows.append({"task": name, "tool": "ours before" if before else "ours", **ours, "max_dll": difference})
    return rows


HEADER = (
    "| task | tool | requests | model phase s | tokenization | planning | forward | host | passes "
    "| forward-pass tokens | tokens/s | max abs dLL vs harness |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def row(r: dict) -> str:
    shares = " | ".join(
        f"{r['parts'][part]:.2f} s ({r['parts'][part] / r['seconds']:.0%})" if r["seconds"] else "-" for part in PARTS
    )
    difference = f"{r['max_dll']:.1e}" if "max_dll" in r else "-"
    return (
        f"| {r['task']} | {r['tool']} | {r['requests']} | {r['seconds']:.2f} | {shares} | {r['passes']} "
        f"| {r['tokens']:,} | {r['tokens'] / r['seconds']:,.0f} | {difference} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--docs", type=int, default=20, help="Documents per task (per BBH subtask: a quarter).")
    parser.add_argument("--batch-size", type=int, default=16, help="The harness's batch size.")
    args = parser.parse_args(argv)
    import torch
    from lm_eval.models.huggingface import HFLM

    model = load_local_model()
    lm = HFLM(pretrained=model.network, tokenizer=model.tokenizer, batch_size=args.batch_size)
    print(
        f"{model.fingerprint} on {model.describe_placement()['device_name']}, {torch.get_num_threads()} threads; "
        f"the harness's batch size {args.batch_size}, ours {model.max_batch_tokens} new tokens a pass"
    )
    print(HEADER)
    model.loglikelihoods([LoglikelihoodRequest("Warm-up", " run")])  # first kernels outside the timing
    for name in args.tasks:
        requests = run_requests(task_run(name, max(1, args.docs // 4) if name == "bbh" else args.docs))
        for r in breakdown(name, requests, lm, model):
            print(row({**r, "requests": len(requests)}), flush=True)


if __name__ == "__main__":
    main()
