"""Tokenized once: the engine's batch encoding gives the token ids of one request at a time, as the
harness encodes a pair, on every shipped benchmark's requests (the harness's and the `choices`
solver's chats)."""

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.documents import build_documents
from eval_platform.benchmarks.solvers.chat import chat_of
from eval_platform.benchmarks.solvers.harness import rows_requests
from eval_platform.common.ingestion import load_rows
from eval_platform.common.models import LoglikelihoodRequest
from eval_platform.environment import environment
from speed.engine_prompts import task_requests


def shipped_requests() -> dict[str, list[LoglikelihoodRequest]]:
    """Log-likelihood requests of every shipped benchmark: the harness's (its declared shots) on a
    dataset's first rows or a task's first documents, and the `choices` solver's chats."""
    requests: dict[str, list[LoglikelihoodRequest]] = {}
    for name, benchmark in declared_benchmarks(environment().benchmarks_dir).items():
        if not benchmark.is_dataset:
            requests.update({f"{name}: {task}": asked for task, asked in task_requests(name, 4).items()})
            continue
        assert benchmark.dataset is not None and benchmark.dataset.file is not None
        rows = load_rows(benchmark.dataset.file, None, None, 4).rows
        built = rows_requests(benchmark, rows)
        requests[name] = [
            LoglikelihoodRequest(*a) for asked, _ in built.values() for a in asked if isinstance(a[1], str)
        ]
        if benchmark.chat is not None:
            documents = build_documents(benchmark, rows).documents
            requests[f"{name} (chat)"] = [
                LoglikelihoodRequest(chat_of(document), f" {choice}")
                for document in documents
                for choice in document.choices
            ]
    return {name: batch for name, batch in requests.items() if batch}


def test_tokenized_once_gives_the_token_ids_of_one_request_at_a_time_on_every_shipped_benchmark(local_model):
    tokenizer = local_model.tokenizer
    checked = []
    for name, requests in shipped_requests().items():
        batch = local_model.scored_sequences(requests)
        for request, (tokens, scored) in zip(requests, batch, strict=True):
            # one at a time, as the harness encodes a pair (its rule, spelled out here)
            context = local_model.render(request.context)
            continuation = request.continuation
            spaces = len(context) - len(context.rstrip())
            if spaces:
                context, continuation = context[:-spaces], context[-spaces:] + continuation
            special = not context.startswith(tokenizer.bos_token or "\0")
            own = tokenizer(context, add_special_tokens=special)["input_ids"]
            whole = tokenizer(context + continuation, add_special_tokens=special)["input_ids"]
            expected = (own + whole[len(own) :])[-(local_model.max_length + 1) :]
            assert (tokens, scored) == (expected, len(whole) - len(own)), (name, request)
        checked.append(name)
    assert {"arc_challenge", "mmlu", "winogrande", "leaderboard_mmlu_pro: leaderboard_mmlu_pro"} <= set(checked)
    assert any(name.startswith("leaderboard_bbh") for name in checked) and any("(chat)" in n for n in checked)
