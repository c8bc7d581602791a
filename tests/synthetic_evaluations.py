"""Synthetic evaluations of any size, written through the real stores as `benchmark_evaluation` and
`model_comparison` write them: two roster models on a benchmark of generated answers (five-shot
prompts drawn from a shared pool, two filters, `exact_match`), over several tasks. For the viewer's
paging tests and its page-load script (speed/viewer_page_load.py). Every value follows from the
document's number and the seed, so a test can say which documents each model got right."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from eval_platform.benchmarks.comparison import comparison_rows
from eval_platform.benchmarks.records import Evaluation, Sample, request_key
from eval_platform.benchmarks.scoring import results_by_task
from eval_platform.benchmarks.store import ComparisonStore, EvaluationStore
from eval_platform.benchmarks.store.evaluations import EvaluationRun
from eval_platform.common.connections import connect

BENCHMARK = "synthetic_math"
MODELS = ("model-a", "model-b")
TASKS = tuple(f"subject_{n:02d}" for n in range(20))
FILTERS = ("strict-match", "flexible-extract")
SETTINGS_KEY = "5-shot"
SOLVER = "harness"
WORDS = (
    "apples baskets cost dollars each farmer sells market morning bakes muffins friends eggs ducks weekly "
    "train travels miles hours speed tank litres fills minutes pages reads book chapter students class "
    "teacher gives pencils boxes pack remaining total spends saves earns wage hourly rent shares equally"
).split()


def right_answer(document: int) -> str:
    return str(document % 97 + 3)


def is_right(model: str, document: int, seed: int) -> bool:
    """Whether the model answers the document right: about 60% of documents for A, and B agreeing
    with A on about 80% of them."""
    first = random.Random(f"{seed}:{document}").random() < 0.6
    if model == MODELS[0]:
        return first
    return first if random.Random(f"{seed}:{document}:b").random() < 0.8 else not first


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize()


def shots(seed: int) -> list[str]:
    rng = random.Random(f"shots:{seed}")
    return [
        f"Question: {_sentence(rng, 40)}?\nAnswer: {_sentence(rng, 30)}. #### {rng.randint(1, 99)}" for _ in range(40)
    ]


def question(document: int, seed: int) -> str:
    return f"{_sentence(random.Random(f'{seed}:q:{document}'), 45)} (problem {document})?"


def prompt(document: int, seed: int, pool: Sequence[str]) -> str:
    """A five-shot prompt: five examples of the shared pool, then the document's question."""
    rng = random.Random(f"{seed}:p:{document}")
    return "\n\n".join([*rng.sample(list(pool), 5), f"Question: {question(document, seed)}\nAnswer:"])


def answer_text(model: str, document: int, seed: int) -> str:
    rng = random.Random(f"{seed}:{model}:{document}")
    value = right_answer(document) if is_right(model, document, seed) else str(int(right_answer(document)) + 1)
    return f"{_sentence(rng, 25)}. So the answer is {value}.\n#### {value}"


def evaluation(model: str, documents: int, seed: int = 0) -> Evaluation:
    """The model's evaluation: per task, documents numbered as the harness numbers them."""
    pool, result = shots(seed), Evaluation(SOLVER, SETTINGS_KEY)
    for document in range(documents):
        task, doc_id = TASKS[document % len(TASKS)], document // len(TASKS)
        context = prompt(document, seed, pool)
        arguments = [[context, {"until": ["Question:"], "do_sample": False}]]
        key = request_key("generate_until", arguments[0])
        text = answer_text(model, document, seed)
        extracted = text.rsplit("#### ", 1)[-1]
        for name in FILTERS:
            result.samples.append(
                Sample(
                    task=task,
                    doc_id=doc_id,
                    filter=name,
                    prompt=context,
                    arguments=arguments,
                    request_keys=[key],
                    target=right_answer(document),
                    responses=[[text]],
                    filtered_responses=[extracted],
                    metrics={"exact_match": float(extracted == right_answer(document))},
                    doc={"question": question(document, seed), "answer": right_answer(document)},
                    document_id=f"doc-{document}",
                )
            )
    result.results = results_by_task(result.samples, BENCHMARK, 5)
    return result


def write(warehouse: Path | str, documents: int, seed: int = 0, data_path: str | None = None) -> None:
    """Both models' evaluations of `documents` documents and B's comparison with A (its baseline),
    in a warehouse file or a lake (its catalog, with `data_path`)."""
    environment = {
        "batch_size": 8, "device": "cpu", "device_name": "synthetic", "dtype": None, "threads": None,
        "cpu_capability": None, "cpu_features": "", "torch_version": None, "transformers_version": None,
        "python_version": "3.11", "platform": "synthetic",
    }  # fmt: skip
    for model in MODELS:
        run = EvaluationRun(BENCHMARK, model, f"local/{model}", f"{model}@1", f"run-{model}", {}, environment)
        with connect(str(warehouse), data_path) as conn:
            EvaluationStore(conn).save_evaluation(run, evaluation(model, documents, seed))
    with connect(str(warehouse), data_path) as conn:
        store = EvaluationStore(conn)
        rows = store.load_document_values(BENCHMARK, list(MODELS))
        environments = store.load_evaluation_runs()
    comparisons = comparison_rows(BENCHMARK, MODELS[1], {"baseline": MODELS[0]}, rows, environments)
    with connect(str(warehouse), data_path) as conn:
        ComparisonStore(conn).replace_comparisons(BENCHMARK, MODELS[1], comparisons)
