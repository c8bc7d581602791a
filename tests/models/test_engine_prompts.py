"""The engine's tests and parity scripts run on the harness's prompts without the platform: the
files speed/engine_prompts.py wrote into engine/ are what lm-evaluation-harness builds today."""

import json

from speed.engine_prompts import PARITY_PROMPTS, TEST_PROMPTS, engine_parity_prompts, engine_test_prompts


def test_the_engines_test_prompts_are_the_harness_prompts_of_the_shipped_slices():
    assert json.loads(TEST_PROMPTS.read_text(encoding="utf-8")) == engine_test_prompts()


def test_the_engines_parity_prompts_are_the_harness_prompts_of_the_shared_benchmarks():
    assert json.loads(PARITY_PROMPTS.read_text(encoding="utf-8")) == engine_parity_prompts()
