"""Items answered k times (common/repeats.py): pass@k, the majority of k answers, each item's mean,
and the clustered standard error, worked by hand, and checked against inspect_ai's own reducers and
`stderr(cluster=...)`, run in its own interpreter (.venv-peers, which `make test` installs) on the
same scores: inspect_ai never shares a process with eval_platform."""

import json
from pathlib import Path

import numpy as np
import pytest

from eval_platform.common.repeats import (
    clustered_stderr,
    item_means,
    majority_at_k,
    pass_at_k,
)
from tests.peers import peer_json

REFERENCE = Path(__file__).with_name("inspect_ai_reference.py")


# --- by hand ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, correct, k, expected",
    [
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 1, 0.4),  # pass@1 = c/n
        (10, 3, 5, 11 / 12),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
        (5, 2, 4, 1.0),  # n - c = 3 < k: every draw of 4 holds a right answer
        (5, 0, 3, 0.0),
        (5, 5, 5, 1.0),
    ],
)
def test_pass_at_k_is_chens_estimator(n, correct, k, expected):
    assert pass_at_k(n, correct, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("k", [0, 6])
def test_pass_at_k_needs_k_between_1_and_n(k):
    with pytest.raises(ValueError):
        pass_at_k(5, 2, k)


def test_the_majority_of_k_answers_takes_the_first_seen_among_ties():
    answers = ["B", "A", "A", "B", "C", "A"]
    # k=1: B; k=2: B and A once each, B first; k=3: A twice; k=4, 5: A and B twice each, B first;
    # k=6: A three times
    assert [majority_at_k(answers, k) for k in range(1, 7)] == ["B", "B", "A", "B", "B", "A"]
    with pytest.raises(ValueError):
        majority_at_k(answers, 7)


def test_each_items_mean():
    assert item_means([[1, 0, 1, 1], [0.5, 0.0], [1]]) == [0.75, 0.25, 1.0]


def test_the_clustered_stderr_by_hand():
    values = [1, 0, 1, 1, 0, 0]
    clusters = ["a", "a", "b", "b", "c", "c"]
    # mean 0.5; each cluster's sum of deviations: a 0.5 - 0.5 = 0, b 0.5 + 0.5 = 1, c -1;
    # squares summed 0 + 1 + 1 = 2; C = 3 clusters, n = 6: √(2 · 3/2) / 6 = √3 / 6
    assert clustered_stderr(values, clusters) == pytest.approx(0.28867513459481287, abs=1e-15)
    # unclustered: squared deviations 6 · 0.25 = 1.5, variance (n-1) 1.5/5 = 0.3, √(0.3/6) = √0.05
    assert clustered_stderr(values) == pytest.approx(0.22360679774997896, abs=1e-15)
    # a cluster each: the plain standard error; one cluster, or one value: 0
    assert clustered_stderr(values, list(range(6))) == pytest.approx(0.22360679774997896, abs=1e-15)
    assert clustered_stderr(values, ["a"] * 6) == clustered_stderr([0.4]) == 0.0
    with pytest.raises(ValueError):
        clustered_stderr(values, ["a"] * 5)


def test_answers_clustered_by_item_give_the_plain_stderr_of_item_means():
    """With k answers to every item, √(Σ_i (k(m_i - m))² · I/(I-1)) / (Ik) = sd(m_i) / √I: clustering
    the answers by item is what inspect_ai's default gives (epochs reduced to their mean, then stderr)."""
    scores = [[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0]]
    flat = [s for item in scores for s in item]
    labels = [i for i, item in enumerate(scores) for _ in item]
    # item means 2/3, 1/3, 1, 0; mean 1/2; squared deviations 1/36 + 1/36 + 1/4 + 1/4 = 5/9;
    # variance 5/27; √(5/27 / 4) = √5 / 6√3
    assert clustered_stderr(flat, labels) == pytest.approx(0.21516574145596762, abs=1e-15)
    assert clustered_stderr(item_means(scores)) == pytest.approx(0.21516574145596762, abs=1e-15)


# --- against inspect_ai -------------------------------------------------------------------------

EPOCHS = 5


def scored_items() -> list[dict]:
    """Twelve items in three subjects of unequal size, five answers each: right with the item's own
    chance, the answers letters; and two items whose answers tie."""
    rng = np.random.default_rng(7)
    subjects = ["algebra"] * 5 + ["geometry"] * 4 + ["logic"] * 3
    items = []
    for i, subject in enumerate(subjects):
        right = rng.random(EPOCHS) < rng.random()
        answers = ["A" if r else str(rng.choice(list("BCD"))) for r in right]
        items.append({"id": f"q{i}", "subject": subject, "scores": right.astype(int).tolist(), "answers": answers})
    items.append({"id": "tie1", "subject": "logic", "scores": [0, 1, 1, 0, 0], "answers": ["B", "A", "A", "B", "C"]})
    items.append({"id": "tie2", "subject": "geometry", "scores": [1, 0, 0, 1, 0], "answers": ["A", "D", "C", "A", "D"]})
    return items


@pytest.fixture(scope="module")
def inspect_ai_figures(tmp_path_factory) -> tuple[list[dict], dict]:
    items = scored_items()
    path = tmp_path_factory.mktemp("inspect_ai") / "items.json"
    path.write_text(json.dumps(items))
    return items, peer_json(REFERENCE, str(path), cwd=path.parent, timeout_s=120)


def test_inspect_ai_reduces_each_item_as_we_do(inspect_ai_figures):
    items, theirs = inspect_ai_figures
    assert theirs["inspect_ai"] == "0.3.285"
    assert item_means([item["scores"] for item in items]) == pytest.approx(theirs["mean"], abs=1e-9)
    for k in range(1, EPOCHS + 1):
        ours = [pass_at_k(EPOCHS, sum(item["scores"]), k) for item in items]
        assert ours == pytest.approx(theirs["pass_at"][str(k)], abs=1e-9), k
        assert [majority_at_k(item["answers"], k) for item in items] == theirs["mode"][str(k)], k


def test_inspect_ai_gives_our_clustered_stderr(inspect_ai_figures):
    items, theirs = inspect_ai_figures
    means = item_means([item["scores"] for item in items])
    subjects = [item["subject"] for item in items]
    flat = [s for item in items for s in item["scores"]]
    labels = [item["id"] for item in items for _ in item["scores"]]

    assert clustered_stderr(means) == pytest.approx(theirs["stderr"], abs=1e-9)
    assert clustered_stderr(means, subjects) == pytest.approx(theirs["stderr_subject"], abs=1e-9)
    assert clustered_stderr(flat, labels) == pytest.approx(theirs["stderr_item_unreduced"], abs=1e-9)
    # subjects' clusters are not items': the test can tell one from the other
    assert abs(theirs["stderr_subject"] - theirs["stderr"]) > 1e-3


def test_inspect_ai_reduces_epochs_before_its_metrics(inspect_ai_figures):
    """A whole inspect_ai eval, epochs reduced by "mean" and "pass_at_k": its mean and
    stderr(cluster="subject") are of the reduced per-item values, as ours over pass_at_k's."""
    items, theirs = inspect_ai_figures
    subjects = [item["subject"] for item in items]
    reduced = {"mean": item_means([item["scores"] for item in items])}
    for k in range(1, EPOCHS + 1):
        reduced[f"pass_at_{k}"] = [pass_at_k(EPOCHS, sum(item["scores"]), k) for item in items]
    assert set(theirs["eval"]) == set(reduced)
    for reducer, values in reduced.items():
        figures = theirs["eval"][reducer]
        assert figures["mean"] == pytest.approx(float(np.mean(values)), abs=1e-9), reducer
        assert figures["stderr"] == pytest.approx(clustered_stderr(values, subjects), abs=1e-9), reducer
