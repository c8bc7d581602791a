"""Judges sampled (common/judges.py, evolution/judging.py): a probabilities judge draws its label from
the warped distribution as the engine draws a token, seeded per sample; a local judge's sampled
verdict is the mean of its samples, offline; a panel asking for samples at temperature 0 is refused."""

import asyncio

import pytest
from scipy.stats import chisquare

from eval_engine import Sampling
from eval_platform.common.judges import drawn_label
from eval_platform.common.models import Chat
from eval_platform.common.panels import JudgePanel

DISTRIBUTION = {"0": 0.5, "1": 0.3, "2": 0.2}
DRAWS = 3000


def counts(sampling: Sampling) -> list[int]:
    drawn = [drawn_label(DISTRIBUTION, sampling, sample, Chat("", "Score it."), "judge") for sample in range(DRAWS)]
    return [sum(d[label] for d in drawn if d) for label in DISTRIBUTION]


@pytest.mark.parametrize(
    ("sampling", "expected"),
    [
        # by hand: at temperature 0.5 each probability squared, renormalised (.25, .09, .04 of .38)
        (Sampling(temperature=0.5, seed=3), [0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38]),
        # top-p 0.6 keeps the likeliest labels until their mass reaches it (.5, then .3): .625, .375
        (Sampling(temperature=1.0, top_p=0.6, seed=3), [0.625, 0.375, 0.0]),
    ],
)
def test_a_sampled_probabilities_judge_draws_its_label_from_the_warped_distribution(sampling, expected):
    observed = counts(sampling)
    assert sum(observed) == DRAWS and all(c == 0 for c, p in zip(observed, expected, strict=True) if p == 0)
    kept = [(c, p * DRAWS) for c, p in zip(observed, expected, strict=True) if p > 0]
    assert chisquare([c for c, _ in kept], [e for _, e in kept]).pvalue > 0.001


def test_a_sampler_with_the_wrong_temperature_fails_the_same_check():
    """The check above cannot pass by luck: the draws at temperature 1 against temperature 0.5's distribution."""
    observed = counts(Sampling(temperature=1.0, seed=3))
    expected = [0.25 / 0.38 * DRAWS, 0.09 / 0.38 * DRAWS, 0.04 / 0.38 * DRAWS]
    assert chisquare(observed, expected).pvalue < 1e-6


def test_the_same_seed_draws_the_same_verdicts_each_sample_and_each_judge_its_own():
    chat = Chat("", "Score it.")

    def drawn(seed: int, judge: str = "judge") -> list:
        return [drawn_label(DISTRIBUTION, Sampling(seed=seed), sample, chat, judge) for sample in range(40)]

    first = drawn(9)
    assert first == drawn(9) and first != drawn(10) and len({tuple(d.items()) for d in first if d}) > 1
    assert first != drawn(9, "another judge")  # two judges asked the same question draw apart


def test_a_local_judge_sampled_offline_scores_the_mean_of_its_samples(local_model):
    from eval_platform.evolution.judging import judge_compression, panel_judge

    judge = panel_judge(local_model)
    original = "Rivers flood each spring when the snow in the mountains melts and the water rises."
    verdict = asyncio.run(
        judge_compression("local", judge, original, "Rivers flood in spring as snow melts.", Sampling(0.9, seed=4), 3)
    )
    samples = verdict["sampled_scores"]
    assert verdict["error"] is None and len(samples) == 3 and len(verdict["calls"]) == 3
    # each sample draws one digit a dimension (0-5, 0-3, 0-2): a whole score
    assert all(score == int(score) and 0 <= score <= 10 for score in samples)
    assert verdict["score"] == pytest.approx(sum(samples) / 3)


def test_a_judge_that_cannot_be_sampled_is_refused_before_any_call():
    from eval_platform.common.judges import JudgeError, sampled

    class GreedyOnly:
        name = "greedy-only"

    with pytest.raises(JudgeError, match="the greedy-only judge cannot be sampled"):
        sampled(GreedyOnly())  # type: ignore[arg-type]


def test_samples_at_temperature_0_are_refused():
    with pytest.raises(ValueError, match="judge_samples 3 at judge_temperature 0"):
        JudgePanel(judge_samples=3)
    assert JudgePanel(judge_samples=3, judge_temperature=0.7).judge_sampling == Sampling(0.7)
    assert JudgePanel().judge_sampling is None
