"""5 -> 6. Harness requests are the harness task's own: each (context, continuation) pair whole (the
few-shot prefix no longer apart), a generation's `generation_kwargs`; the harness scores them, so
gold indices and targets go. A generated text's answers under each filter are item scores' rows, so
predictions lose `predicted_flexible` (its values are the item scores' `flexible-extract` answers)."""

import json
from typing import Any

from eval_platform.benchmarks.store.migrations.to_v1 import PREDICTIONS as PREDICTIONS_V5
from eval_platform.common.warehouse import existing_tables, rebuild_table

HARNESS_REQUESTS = """
    prompt_id VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL,
    contexts VARCHAR[] NOT NULL, continuations VARCHAR[] NOT NULL, choice_texts VARCHAR[] NOT NULL,
    generation_kwargs JSON, fewshot_ids VARCHAR[] NOT NULL, PRIMARY KEY (prompt_id, num_fewshot)"""
PREDICTIONS = PREDICTIONS_V5.replace(" predicted_flexible VARCHAR,", "")
# What the harness's gsm8k and gsm8k_cot asked to generate before version 6 stored it with each request.
V5_GENERATION_KWARGS = {
    "gsm8k": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0},
    "gsm8k_cot": {"do_sample": False, "until": ["Q:", "</s>", "<|im_end|>"]},
}


def migrate(conn: Any) -> None:
    kwargs = " ".join(f"WHEN '{name}' THEN '{json.dumps(value)}'" for name, value in V5_GENERATION_KWARGS.items())
    if "harness_requests" in existing_tables(conn):
        rebuild_table(
            conn,
            "harness_requests",
            HARNESS_REQUESTS,
            f"""
            prompt_id, benchmark, num_fewshot, choice_texts, fewshot_ids,
        CASE WHEN len(continuations) = 0 THEN [prefix || contexts[1]]
             WHEN len(contexts) > 1 THEN list_transform(contexts, lambda c: prefix || c)
             ELSE list_transform(continuations, lambda k: prefix || contexts[1]) END AS contexts,
        CASE WHEN len(contexts) > 1 THEN list_transform(contexts, lambda c: continuations[1])
             ELSE continuations END AS continuations,
        CASE WHEN len(continuations) = 0 THEN CASE benchmark {kwargs} END END::JSON AS generation_kwargs""",
        )
    rebuild_table(conn, "predictions", PREDICTIONS, "* EXCLUDE (predicted_flexible)")
