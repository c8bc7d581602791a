"""The engine's tests and parity scripts run on the harness's prompts without the platform: the
files speed/engine_prompts.py wrote into engine/ are what it builds today (GSM8K's, gsm8k_cot's and
MMLU-Pro's by lm-evaluation-harness's own task objects; ARC-Challenge's requests and the texts from
the slices' rows)."""

import json

from speed.engine_prompts import PARITY_PROMPTS, TEST_PROMPTS, engine_parity_prompts, engine_test_prompts


def test_the_engines_test_prompts_are_those_built_today_from_the_shipped_slices():
    assert json.loads(TEST_PROMPTS.read_text(encoding="utf-8")) == engine_test_prompts()


def test_the_engines_parity_prompts_are_those_built_today_from_the_shared_benchmarks():
    assert json.loads(PARITY_PROMPTS.read_text(encoding="utf-8")) == engine_parity_prompts()
