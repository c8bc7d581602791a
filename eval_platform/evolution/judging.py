"""Model-as-judge: the fitness document's rubric prompt, tolerant JSON parsing, and the rubric as a
judge asks it (common/judges.py).

Any model can judge. Asked in writing, a model answers the rubric prompt with JSON (API and served
models). A 135M local model cannot write reliable JSON, so it is asked by its next-token
probabilities over each dimension's allowed digits and scored with the probability-weighted digits,
as G-Eval does, in the same structure (`rubric_question` has both forms).
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from eval_engine import Sampling
from eval_platform.common.gateway import call_record, describe_error
from eval_platform.common.judges import Choice, Distribution, Judge, Judgement, Question, judge_for, sampled
from eval_platform.common.models import Chat, LanguageModel

# (name, maximum, rubric section exactly as in the fitness document)
RUBRIC = [
    (
        "faithfulness",
        5,
        """Faithfulness (0-5 points):
- Are all core concepts preserved?
- Are entity names and relationships maintained?
- Is the logical structure intact?

CALIBRATION EXAMPLES:
5 points: All entities, relationships, and core concepts perfectly preserved
4 points: Minor details lost but all main ideas intact
3 points: Main ideas preserved but missing some key details
2 points: Significant information loss or some distortion
1 point: Major concepts missing or distorted
0 points: Completely unfaithful to original""",
    ),
    (
        "clarity",
        3,
        """Clarity (0-3 points):
- Is the compressed text clear and understandable?
- Are there any ambiguities?

CALIBRATION EXAMPLES:
3 points: Perfectly clear and understandable on its own
2 points: Clear with minor ambiguity that doesn't impede understanding
1 point: Somewhat unclear or requires original for interpretation
0 points: Confusing or unclear""",
    ),
    (
        "readability",
        2,
        """Readability (0-2 points):
- Is it grammatically correct?
- Does it flow naturally?

CALIBRATION EXAMPLES:
2 points: Natural, grammatical, flows well
1 point: Readable but awkward or has minor grammar issues
0 points: Choppy, ungrammatical, or hard to read""",
    ),
]

_TEXTS = """ORIGINAL TEXT:
{original_text}

COMPRESSED TEXT:
{compressed_text}"""

RUBRIC_MAX_TOKENS = 300  # a written rubric reply's budget
JSON_INSTRUCTION = """IMPORTANT: Respond with ONLY a JSON object in this exact format:
{
  "faithfulness": <0-5>,
  "clarity": <0-3>,
  "readability": <0-2>,
  "score": <sum of above, 0-10>,
  "comments": "<brief 1-2 sentence explanation>"
}"""


def judge_prompt(original_text: str, compressed_text: str) -> str:
    """The fitness document's judge prompt, verbatim."""
    sections = "\n\n".join(section for _, _, section in RUBRIC)
    texts = _TEXTS.format(original_text=original_text, compressed_text=compressed_text)
    return (
        "You are evaluating a text compression. Score the compressed text on three dimensions:\n\n"
        f"{texts}\n\nSCORING RUBRIC:\n\n{sections}\n\n{JSON_INSTRUCTION}"
    )


class JudgeReplyError(ValueError):
    """A judge reply that is not a usable rubric JSON object (`scores`: what of it could be read,
    recorded with the error)."""

    scores: dict[str, object] = {}


def parse_judge_reply(text: str) -> dict[str, Any]:
    """The rubric scores from a reply: code fences and text around the JSON are tolerated; each
    dimension must be a whole number in its range, and `score` their sum. A reply whose `score`
    is missing or is not the sum of its parts is an error (its parts are kept with it), so the
    judge is left out of the average, as any failing judge is."""
    cleaned = re.sub(r"```(?:json)?", "", text)
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start < 0 or end <= start:
        raise JudgeReplyError(f"no JSON object in reply: {text[:200]!r}")
    try:
        reply = json.loads(cleaned[start : end + 1])
    except json.JSONDecodeError as error:
        raise JudgeReplyError(f"invalid JSON ({error.msg}) in reply: {text[:200]!r}") from error
    if not isinstance(reply, dict):
        raise JudgeReplyError("reply JSON is not an object")
    scores = {}
    for name, maximum, _ in RUBRIC:
        value = reply.get(name)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value != int(value)
        ):
            raise JudgeReplyError(f"{name} must be a whole number, got {value!r}")
        if not 0 <= value <= maximum:
            raise JudgeReplyError(f"{name} {value} is outside 0-{maximum}")
        scores[name] = int(value)
    total = sum(scores.values())
    reported = reply.get("score")
    parsed = {
        **scores,
        "score": float(total),
        "comments": str(reply.get("comments", ""))[:2000],
        "reported_score": float(reported)
        if isinstance(reported, (int, float)) and not isinstance(reported, bool) and math.isfinite(reported)
        else None,
    }
    if parsed["reported_score"] != total:
        error = JudgeReplyError(f"score {reported!r} is not the sum of its parts ({total})")
        error.scores = {**parsed, "score": None, "score_mismatch": True}
        raise error
    return {**parsed, "score_mismatch": False}


def expected_scores(judge_model: str, distributions: list[Distribution]) -> dict[str, Any]:
    """Each dimension as the expected value of the model's next-digit distribution over 0..max, in
    the structure of a parsed reply."""
    scores: dict[str, float] = {}
    for (name, maximum, _), distribution in zip(RUBRIC, distributions, strict=True):
        if distribution is None:
            raise JudgeReplyError(f"{judge_model} answered no digit from 0 to {maximum} for {name}")
        scores[name] = sum(int(digit) * p for digit, p in distribution.items())
    return {
        **scores,
        "score": sum(scores.values()),
        "reported_score": None,
        "score_mismatch": False,
        "comments": "Probability-weighted digits over each rubric dimension (local judge).",
    }


def rubric_question(original_text: str, compressed_text: str, judge_model: str) -> Question[dict[str, Any]]:
    """The rubric as a judge asks it: the fitness document's prompt, answered with JSON; or each
    dimension's question after the same two texts (which a prefix cache encodes once), answered by
    a digit from 0 to its maximum."""
    texts = _TEXTS.format(original_text=original_text, compressed_text=compressed_text)
    choices = tuple(
        Choice(
            Chat(
                "You are evaluating a text compression.",
                f"{texts}\n\n{section}\n\nAnswer with a single digit from 0 to {maximum}.",
            ),
            tuple(str(digit) for digit in range(maximum + 1)),
        )
        for _, maximum, section in RUBRIC
    )
    return Question(
        Chat("", judge_prompt(original_text, compressed_text)),
        parse_judge_reply,
        choices,
        partial(expected_scores, judge_model),
    )


@dataclass(frozen=True)
class PanelJudge:
    """A panel member: its model, and the judge that asks it the rubric."""

    model: LanguageModel
    asking: Judge


def panel_judge(model: LanguageModel, mode: str | None = None) -> PanelJudge:
    """A panel member asked by the judge named `mode`, else by the model's own (`judge_for`)."""
    return PanelJudge(model, judge_for(model, mode))


async def judge_compression(
    judge_name: str,
    judge: PanelJudge,
    original_text: str,
    compressed_text: str,
    sampling: Sampling | None = None,
    samples: int = 1,
) -> dict[str, Any]:
    """One judge's verdict in the fitness document's `judge_details` form, its API calls under
    `calls`: greedy, or the mean of `samples` verdicts drawn with `sampling` (each dimension's and
    the score's mean over the samples that answered; every sample's score in `sampled_scores`, None
    where it failed). A failure is returned, not raised, with `score` None and the error, so the
    judge is left out of the average."""
    start = time.perf_counter()
    model = judge.model.name
    question = rubric_question(original_text, compressed_text, model)
    asked = {"batch_size": len(question.choices)}
    try:
        if sampling is None:
            judgements = await judge.asking.ask(judge.model, [question], RUBRIC_MAX_TOKENS, **asked)
        else:
            (judgements,) = await sampled(judge.asking).ask_samples(
                judge.model, [question], RUBRIC_MAX_TOKENS, sampling, samples, **asked
            )
    except Exception as error:  # a model failing outright: any failure excludes this judge from the average
        judgements = [Judgement(None, getattr(error, "completion", None), error)]
    details: dict[str, Any] = {"judge_model": judge_name, "model": model, **verdict(judgements)}
    if sampling is not None:
        details["sampled_scores"] = [j.value["score"] if j.error is None and j.value else None for j in judgements]
    details["judge_duration_ms"] = round((time.perf_counter() - start) * 1000)
    details["calls"] = [
        call_record("judge", model, j.completion, describe_error(j.error) if j.error else None, judge_name)
        for j in judgements
    ]
    return details


def verdict(judgements: list[Judgement[dict[str, Any]]]) -> dict[str, Any]:
    """The verdict of a judge's answers to one compression: the one answer as read, or several
    answers' scores averaged over those that answered; a failure (every answer failing) with its
    error and what could be read of it."""
    answered = [j.value for j in judgements if j.error is None and j.value]
    if not answered:
        error = judgements[-1].error
        return {
            "faithfulness": None,
            "clarity": None,
            "readability": None,
            "score": None,
            "reported_score": None,
            "score_mismatch": False,
            "comments": "",
            **getattr(error, "scores", {}),
            "error": describe_error(error) if error else "no answer",
        }
    if len(judgements) == 1:
        return {**answered[0], "error": None}
    means = {
        name: sum(a[name] for a in answered) / len(answered)
        for name in ("faithfulness", "clarity", "readability", "score")
    }
    return {
        **means,
        "reported_score": None,
        "score_mismatch": any(a.get("score_mismatch") for a in answered),
        "comments": f"The mean of {len(answered)} of {len(judgements)} sampled verdicts.",
        "error": None,
    }
