"""Scoring: per-item scores (exact match, log-likelihood argmax and acc_norm), means with a 95%
interval, and the per-item report of the benchmark specification (`0. Output: A, Reference: A :: O`
... `Score: 0.5`)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from eval_engine import CUT_AT_BUDGET
from eval_platform.benchmarks.records import Answer, Result, Sample
from eval_platform.common.intervals import item_interval
from eval_platform.common.repeats import clustered_stderr, item_means, majority_at_k, pass_at_k


def argmax(values: Sequence[float]) -> int:
    """The index of the largest value; the first one wins ties (as numpy's argmax)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


def argmax_label(labels: Sequence[str], scores: Sequence[float]) -> str:
    """The label of the highest score; the first one wins ties (deterministic)."""
    return labels[argmax(scores)]


def length_normalized(loglikelihoods: Sequence[float], choice_texts: Sequence[str]) -> list[float]:
    """`acc_norm`'s scores: each log-likelihood divided by its choice's length in characters."""
    return [ll / float(len(text)) for ll, text in zip(loglikelihoods, choice_texts, strict=True)]


def standard_error(values: Sequence[float]) -> float:
    """The standard error of a mean, as the harness computes it (sample deviation / sqrt(n))."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


@dataclass(frozen=True)
class ItemScore:
    """One item's value of one metric (1/0 for a hit or miss, or a value in [0, 1]), with what the
    model answered and what it was scored against."""

    value: float
    predicted: str | None
    reference: str | None


@dataclass(frozen=True)
class Score:
    n: int
    correct: float  # the sum of the items' values: the number right, for a 0/1 metric
    accuracy: float
    ci_low: float | None
    ci_high: float | None
    report: str


def aggregate(items: Sequence[ItemScore]) -> Score:
    """The mean of the items' values with its 95% interval (common/intervals.py: Wilson's for 0/1
    values, a bootstrap for values in [0, 1]), and the specification's report: `0. Output: A,
    Reference: A :: O` per item, then `Score: 0.5`."""
    n = len(items)
    total = sum(item.value for item in items)
    binary = all(item.value in (0.0, 1.0) for item in items)
    lines = [
        f"{i}. Output: {item.predicted}, Reference: {item.reference} :: "
        + (("O" if item.value == 1.0 else "X") if binary else f"{item.value:.4f}")
        for i, item in enumerate(items)
    ]
    accuracy = total / n if n else 0.0
    lines.append(f"Score: {round(accuracy, 4)}")
    interval = item_interval([item.value for item in items])
    return Score(n, total, accuracy, interval.low, interval.high, "\n".join(lines))


def exact(predicted: str | None, reference: str | None) -> ItemScore:
    """A hit when the answer equals the reference."""
    return ItemScore(float(predicted is not None and str(predicted) == str(reference)), predicted, reference)


def score_items(outputs: Sequence[str | None], references: Sequence[str]) -> Score:
    """Accuracy of outputs against references (exact match), with the specification's report."""
    return aggregate([exact(output, reference) for output, reference in zip(outputs, references, strict=True)])


def item_scores(samples: Iterable[Sample], metric: str, filter_name: str) -> list[ItemScore]:
    """The samples' values of one metric under one filter, with what was answered and expected."""
    return [
        ItemScore(sample.numeric_metrics()[metric], _shown(sample.filtered_responses), sample.target)
        for sample in samples
        if sample.filter == filter_name and metric in sample.numeric_metrics()
    ]


def _shown(answer: object) -> str | None:
    while isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    return None if answer is None else str(answer)


def mean_results(samples: Sequence[Sample], task: str, num_fewshot: int | None, group: bool = False) -> list[Result]:
    """Each numeric metric's mean over the samples per filter, as `task`'s result (a group's over
    several tasks, when `group`): its documents, standard error and 95% interval (`aggregate`)."""
    keys = dict.fromkeys((metric, s.filter) for s in samples for metric in s.numeric_metrics())
    results = []
    for metric, filter_name in keys:
        items = item_scores(samples, metric, filter_name)
        score = aggregate(items)
        values = [item.value for item in items]
        results.append(
            Result(
                task=task,
                metric=metric,
                filter=filter_name,
                value=score.accuracy,
                stderr=standard_error(values),
                n=score.n,
                num_fewshot=num_fewshot,
                is_group=group,
                alias=task,
                higher_is_better=True,
                ci_low=score.ci_low,
                ci_high=score.ci_high,
            )
        )
    return results


def results_by_task(samples: Sequence[Sample], benchmark: str, num_fewshot: int | None) -> list[Result]:
    """Each task's mean results, and where the samples span several tasks (MMLU's subjects), the
    benchmark's over all of them, named after it (a group)."""
    tasks = dict.fromkeys(sample.task for sample in samples)
    results = [
        result for task in tasks for result in mean_results([s for s in samples if s.task == task], task, num_fewshot)
    ]
    if len(tasks) > 1:
        results += mean_results(samples, benchmark, num_fewshot, group=True)
    return results


def group_leaves(task: str, groups: Mapping[str, Sequence[str]], within: frozenset[str] = frozenset()) -> set[str]:
    """The tasks a result covers: a task itself, or every task under a group (`groups`: each one's
    tasks or groups; a group named among its own members, or its members', counts as a task there)."""
    if task not in groups or task in within:
        return {task}
    return set().union(*(group_leaves(member, groups, within | {task}) for member in groups[task]))


def with_budget_shares(
    results: Sequence[Result],
    samples: Sequence[Sample],
    answers: Mapping[str, Answer],
    groups: Mapping[str, Sequence[str]],
) -> list[Result]:
    """Each result with the share of its generations cut at the budget (`cut_at_budget`: of the
    answers to its tasks' documents whose ending is known, each counted once; None where none is)."""
    endings: dict[str, dict[str, str]] = defaultdict(dict)
    for sample in samples:
        for key in sample.request_keys:
            answer = answers.get(key)
            if answer is not None and answer.ended is not None:
                endings[sample.task][key] = answer.ended

    def share(task: str) -> float | None:
        known = {key: ended for leaf in group_leaves(task, groups) for key, ended in endings[leaf].items()}
        return sum(ended in CUT_AT_BUDGET for ended in known.values()) / len(known) if known else None

    return [replace(result, cut_at_budget=share(result.task)) for result in results]


def with_intervals(
    results: Sequence[Result], samples: Sequence[Sample], groups: Mapping[str, Sequence[str]]
) -> list[Result]:
    """The harness's results, each with the 95% interval of its items' values (`item_interval`: the
    same method as every other solver's; a group's over its tasks' items, which are also its count),
    its standard error as the harness computed it."""

    intervals = []
    for result in results:
        tasks = group_leaves(result.task, groups)
        values = [
            sample.metrics[result.metric]
            for sample in samples
            if sample.task in tasks
            and sample.filter == result.filter
            and _proportion_like(sample.metrics.get(result.metric))
        ]
        interval = item_interval(values)
        n = result.n if result.n is not None else interval.n or None  # a group's: its tasks' items
        intervals.append(replace(result, ci_low=interval.low, ci_high=interval.high, n=n))
    return intervals


def _proportion_like(value: object) -> bool:
    """A number, or a list of numbers (IFEval's instruction-level results of one prompt)."""
    if isinstance(value, list | tuple):
        return all(isinstance(v, bool | int | float) for v in value)
    return isinstance(value, bool | int | float) and value == value


def sample_counts(n: int) -> list[int]:
    """The k of pass@k and maj@k reported for n answers an item: 1, 2, 4, ... up to n, and n."""
    return sorted({*(2**power for power in range(n.bit_length()) if 2**power <= n), n})


def answer_scores(members: Sequence[Sample], metric: str) -> list[list[float]]:
    """Each item's first n answers' scores, n the fewest any item has."""
    n = min(len(sample.sample_metrics or ()) for sample in members)
    return [[metrics[metric] for metrics in (sample.sample_metrics or [])[:n]] for sample in members]


def reduced_items(members: Sequence[Sample], metric: str) -> dict[str, list[float]]:
    """Each item's k answers reduced, by reducer name: for a 0/1 metric, `pass@k` (the unbiased
    estimator; pass@1 is the mean of the k) and `maj@k` (the score of the majority of the first k
    filtered answers, ties to the first seen) for each k of `sample_counts`; for any other metric,
    `mean@n`. Every item counts its first n answers, n the fewest any item has."""
    scores = answer_scores(members, metric)
    n = len(scores[0])
    if not all(value in (0.0, 1.0) for item in scores for value in item):
        return {f"mean@{n}": item_means(scores)}
    reduced = {f"pass@{k}": [pass_at_k(n, int(sum(item)), k) for item in scores] for k in sample_counts(n)}
    for k in sample_counts(n)[1:]:
        reduced[f"maj@{k}"] = [
            item[answers.index(majority_at_k(answers, k))]
            for item, answers in zip(scores, [list(sample.sample_answers or [])[:n] for sample in members], strict=True)
        ]
    return reduced


def sampled_results(
    samples: Sequence[Sample], groups: Mapping[str, Sequence[str]], shots: Mapping[str, int | None]
) -> list[Result]:
    """The results of documents answered k times (a sampled task's repeats): per task, and per group
    (`groups`: each one's tasks or groups) of such tasks, each metric and filter reduced per item
    (`reduced_items`, named `<metric> <reducer>`), its mean over items, the standard error clustered
    by item (each item reduced first, as inspect_ai's epochs are) and, for a group, by task, and the
    95% interval every proportion gets (`item_interval`): pass@1's over each item's answers as trials,
    any other reducer's over the items' reduced values."""
    sampled = [sample for sample in samples if sample.sample_metrics]

    tasks = {sample.task for sample in sampled}
    owners = [*sorted(tasks), *(group for group in groups if group_leaves(group, groups) & tasks)]
    results = []
    for owner in owners:
        members = [sample for sample in sampled if sample.task in group_leaves(owner, groups)]
        keys = dict.fromkeys((m, s.filter) for s in members for m in (s.sample_metrics or [{}])[0])
        for metric, filter_name in keys:
            items = [s for s in members if s.filter == filter_name and all(metric in m for m in s.sample_metrics or ())]
            clusters = [s.task for s in items] if owner in groups else None
            answers = answer_scores(items, metric)
            for reducer, values in reduced_items(items, metric).items():
                mean = math.fsum(values) / len(values)
                stderr = clustered_stderr(values, clusters)
                interval = item_interval(answers if reducer == "pass@1" else values)
                results.append(
                    Result(
                        task=owner,
                        metric=f"{metric} {reducer}",
                        filter=filter_name,
                        value=mean,
                        stderr=stderr,
                        n=len(items),
                        num_fewshot=shots.get(owner),
                        is_group=owner in groups,
                        alias=owner,
                        higher_is_better=True,
                        ci_low=interval.low,
                        ci_high=interval.high,
                    )
                )
    return results
