"""Two models (or two runs of one) on the same items: the accuracy difference, an exact McNemar test
on the items where they disagree, and the 95% interval of the difference
(`intervals.paired_difference`: Newcombe's paired score interval for 0/1 items)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from eval_platform.common.intervals import paired_difference


class DocumentValue(TypedDict):
    """One document's value of one metric for one model, settings key, solver, task and filter: a row
    of `document_values` as `EvaluationStore.load_document_values` reads it (`item` names the document:
    a dataset's source row id, else task/doc_id)."""

    model: str
    model_fingerprint: str
    settings_key: str
    solver: str
    task: str
    filter: str
    metric: str
    doc_id: int
    item: str
    prediction_run_id: str | None
    value: float
    predicted: str | None
    reference: str | None
    question: str


def exact_mcnemar(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant items at 1/2."""
    from scipy.stats import binomtest

    discordant = only_first + only_second
    return 1.0 if discordant == 0 else float(binomtest(only_first, discordant, 0.5).pvalue)


@dataclass(frozen=True)
class PairedComparison:
    items: int  # items both were scored on
    first_accuracy: float
    second_accuracy: float
    difference: float  # first - second
    only_first: int  # items the first got right and the second wrong (0/1 metrics)
    only_second: int
    mcnemar_p: float | None  # None for a metric that is not 0/1 (mc2)
    ci_low: float
    ci_high: float
    interval: str  # how the interval was made


def compare(first: Mapping[str, float], second: Mapping[str, float]) -> PairedComparison:
    """Compare two item -> value mappings on the items they share."""
    shared = sorted(set(first) & set(second))
    a, b = [first[item] for item in shared], [second[item] for item in shared]
    n = len(shared)
    binary = all(v in (0.0, 1.0) for v in a + b)
    only_first = sum(x == 1.0 and y == 0.0 for x, y in zip(a, b, strict=False))
    only_second = sum(x == 0.0 and y == 1.0 for x, y in zip(a, b, strict=False))
    low, high, interval = paired_difference(a, b) if n else (0.0, 0.0, "none: no items in common")
    first_accuracy, second_accuracy = (sum(a) / n, sum(b) / n) if n else (0.0, 0.0)
    return PairedComparison(
        n,
        first_accuracy,
        second_accuracy,
        first_accuracy - second_accuracy,
        only_first,
        only_second,
        exact_mcnemar(only_first, only_second) if binary else None,
        low,
        high,
        interval,
    )


def flipped_to_wrong(before: Mapping[str, float], after: Mapping[str, float]) -> list[str]:
    """The items right before and wrong after."""
    return sorted(item for item in set(before) & set(after) if before[item] == 1.0 and after[item] == 0.0)


# What a comparison says instead of a p-value where McNemar's test does not apply.
NO_PAIRED_TEST = "n/a: the metric is not 0/1 (no McNemar test)"


def comparison_rows(
    benchmark: str,
    model: str,
    references: Mapping[str, str],
    rows: Sequence[DocumentValue],
    environments: Mapping[str, Mapping[str, object]],
) -> list[dict[str, object]]:
    """`model` against each of its references (relation -> name) on every settings key, solver,
    task, filter and metric both were scored on, from document values (model, model_fingerprint,
    settings_key, solver, task, filter, metric, item, value, prediction_run_id; `item` names the
    document: a dataset's source row id, else task/doc_id): a = the model, b = the reference, with
    the items right in b and wrong in a."""
    from eval_platform.common.reproducibility import environment_differences

    values: dict[tuple, dict[str, dict[str, float]]] = {}
    fingerprints: dict[tuple, str] = {}
    runs: dict[tuple, set] = {}
    for row in rows:
        key = (row["settings_key"], row["solver"], row["task"], row["filter"], row["metric"])
        values.setdefault(key, {}).setdefault(row["model"], {})[row["item"]] = row["value"]
        fingerprints[(*key, row["model"])] = row["model_fingerprint"]
        runs.setdefault((*key, row["model"]), set()).add(row["prediction_run_id"])
    comparisons = []
    for key, by_model in sorted(values.items()):
        for relation, reference in references.items():
            if model not in by_model or reference not in by_model:
                continue
            pair = (by_model[model], by_model[reference])
            result = compare(*pair)
            if not result.items:
                continue
            comparisons.append(
                {
                    "benchmark": benchmark,
                    **dict(zip(("settings_key", "solver", "task", "filter", "metric"), key, strict=True)),
                    "model_a": model,
                    "fingerprint_a": fingerprints[(*key, model)],
                    "model_b": reference,
                    "fingerprint_b": fingerprints[(*key, reference)],
                    "relation": relation,
                    "items": result.items,
                    "accuracy_a": result.first_accuracy,
                    "accuracy_b": result.second_accuracy,
                    "difference": result.difference,
                    "only_a": result.only_first,
                    "only_b": result.only_second,
                    "mcnemar_p": result.mcnemar_p,
                    "paired_test": "exact McNemar" if result.mcnemar_p is not None else NO_PAIRED_TEST,
                    "ci_low": result.ci_low,
                    "ci_high": result.ci_high,
                    "flipped_to_wrong": None if result.mcnemar_p is None else flipped_to_wrong(*pair[::-1]),
                    "environment_differences": environment_differences(
                        [environments.get(run) for run in runs[(*key, model)]],
                        [environments.get(run) for run in runs[(*key, reference)]],
                    ),
                }
            )
    return comparisons


def not_comparable(references: Mapping[str, str], comparisons: Sequence[Mapping[str, object]]) -> list[str]:
    """The references (`relation name`) the model has no scores in common with yet."""
    compared = {c["model_b"] for c in comparisons}
    return [f"{relation} {reference}" for relation, reference in references.items() if reference not in compared]
