"""The fitness document's table and edge cases; judge reply parsing; its prompt texts."""

import pytest

from eval_platform.evolution.fitness import calculate_fitness, fitness_score
from eval_platform.evolution.genetic import build_compression_prompt
from eval_platform.evolution.judging import JudgeReplyError, judge_prompt, parse_judge_reply
from tests.conftest import PROJECT_ROOT

words = len  # token counter stand-in where tokens are not the point: one token per character


@pytest.mark.parametrize(
    "quality, ratio, survival, expected",
    [
        (9.0, 3.5, 1, 0.719),  # excellent compression
        (8.5, 1.8, 1, 0.660),  # high quality, low compression
        (5.0, 8.0, 1, 0.475),  # aggressive but poor quality
        (9.5, 0.8, 0, 0.000),  # text expanded
        (0.0, 0.0, 0, 0.000),  # compression failed
    ],
)
def test_fitness_document_table(quality, ratio, survival, expected):
    _, fitness = fitness_score(quality, ratio, survival)
    assert round(fitness, 3) == expected


def test_fitness_document_raw_fitness_for_expanded_text():
    raw, fitness = fitness_score(9.5, 0.8, 0)
    assert raw == pytest.approx(0.7225) and fitness == 0  # the document rounds 0.7225 up to 0.723


ORIGINAL = " ".join(f"w{i}" for i in range(100))


def test_empty_compressed_text():
    result = calculate_fitness(ORIGINAL, "", {"openai": 9.0}, False, words)
    assert (result["compressed_words"], result["compression_ratio"], result["survival_factor"], result["fitness"]) == (
        0,
        0,
        0,
        0,
    )


def test_all_judges_fail_gives_zero_even_when_compressed():
    result = calculate_fitness(ORIGINAL, "w1 w2 w3", {"openai": None, "claude": None}, False, words)
    assert result["quality_score_avg"] == 0 and result["survival_factor"] == 1 and result["fitness"] == 0


def test_text_expansion_gives_zero_regardless_of_quality():
    result = calculate_fitness("a b c", "a b c d", {"openai": 10.0}, False, words)
    assert result["survival_factor"] == 0 and result["fitness"] == 0
    same_length = calculate_fitness("a b c", "x y z", {"openai": 10.0}, False, words)
    assert same_length["survival_factor"] == 0


def test_compression_capped_at_twenty():
    result = calculate_fitness(ORIGINAL, "w1 w2", {"openai": 10.0}, False, words)  # 50x
    assert result["compression_ratio"] == 50 and result["fitness"] == pytest.approx(1.0)


def test_failed_judge_excluded_from_average():
    result = calculate_fitness(
        ORIGINAL, " ".join(ORIGINAL.split()[:25]), {"openai": 8, "claude": None, "gemini": 6}, False, words
    )
    assert result["quality_score_avg"] == 7
    assert result["fitness"] == pytest.approx(0.75 * 0.7 + 0.25 * 4 / 20)


def test_token_metric_changes_ratio_but_survival_stays_word_based():
    original, compressed = "alpha beta gamma delta", "alphabetagamma"  # 4 words -> 1 word, 22 -> 14 chars
    by_words = calculate_fitness(original, compressed, {"j": 8}, False, words)
    by_tokens = calculate_fitness(original, compressed, {"j": 8}, True, words)
    assert by_words["compression_ratio"] == 4.0
    assert by_tokens["compression_ratio"] == pytest.approx(22 / 14)
    assert by_tokens["word_compression_ratio"] == 4.0 and by_words["token_compression_ratio"] == pytest.approx(22 / 14)
    assert by_tokens["survival_factor"] == by_words["survival_factor"] == 1


def test_token_expansion_alone_does_not_kill_survival():
    result = calculate_fitness("aa bb cc", "aabbccddee", {"j": 8}, True, words)
    assert result["survival_factor"] == 1 and result["token_compression_ratio"] < 1


VALID = {"faithfulness": 4, "clarity": 3, "readability": 2, "score": 9, "comments": "Good."}


def test_parse_plain_json():
    parsed = parse_judge_reply('{"faithfulness": 4, "clarity": 3, "readability": 2, "score": 9, "comments": "Good."}')
    assert parsed["score"] == 9 and parsed["score_mismatch"] is False and parsed["comments"] == "Good."


def test_parse_fenced_and_chatty_reply():
    reply = (
        "Sure! Here is my evaluation:\n```json\n"
        '{"faithfulness": 3, "clarity": 2, "readability": 1, "score": 6, "comments": "ok"}'
        "\n```\nHope it helps."
    )
    assert parse_judge_reply(reply)["score"] == 6


def test_a_score_that_is_not_the_sum_of_its_parts_is_an_error_that_keeps_the_parts():
    with pytest.raises(JudgeReplyError, match=r"score 9 is not the sum of its parts \(6\)") as failure:
        parse_judge_reply('{"faithfulness": 3, "clarity": 2, "readability": 1, "score": 9, "comments": ""}')
    assert failure.value.scores == {
        "faithfulness": 3,
        "clarity": 2,
        "readability": 1,
        "score": None,
        "reported_score": 9.0,
        "score_mismatch": True,
        "comments": "",
    }


@pytest.mark.parametrize(
    "reply, message",
    [
        ("I think it is good.", "no JSON object"),
        ('{"faithfulness": 4, "clarity": 3,, }', "invalid JSON"),
        ('{"faithfulness": 6, "clarity": 3, "readability": 2, "score": 11}', "faithfulness 6 is outside 0-5"),
        ('{"faithfulness": 4, "clarity": -1, "readability": 2, "score": 5}', "clarity -1 is outside 0-3"),
        ('{"faithfulness": 4, "clarity": 3, "score": 7}', "readability must be a whole number"),
        ('{"faithfulness": 4.5, "clarity": 3, "readability": 2, "score": 9.5}', "faithfulness must be a whole number"),
        ('{"faithfulness": "4", "clarity": 3, "readability": 2, "score": 9}', "faithfulness must be a whole number"),
    ],
)
def test_invalid_or_out_of_range_replies_are_refused(reply, message):
    with pytest.raises(JudgeReplyError, match=message):
        parse_judge_reply(reply)


def test_judge_prompt_is_the_fitness_documents_verbatim():
    # tests/data holds the judge prompt block of the fitness document, copied character for character.
    block = (PROJECT_ROOT / "tests" / "data" / "fitness_document_judge_prompt.txt").read_text(encoding="utf-8")
    assert judge_prompt("{original_text}", "{compressed_text}") == block


def test_compression_prompt_assembly():
    genome = {"role": "R", "compression_target": "T", "fidelity": "F", "constraints": "C", "output": "O"}
    assert build_compression_prompt(genome, "P") == "R\n\nT\n\nF\n\nC\n\nO\n\nOriginal Text:\nP"
