"""4 -> 5. Scores belong to roster entries: `model` in scores, item scores, score history,
comparisons and protocol results becomes the entry's name (`legacy_names` names the models scored
before), `model_evaluations` records which fingerprint each name was evaluated with, and a
comparison says how its two sides relate and which items flipped."""

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from eval_platform.common.warehouse import existing_tables, rebuild_table

NO_PAIRED_TEST = "n/a: the metric is not 0/1 (no McNemar test)"
MODEL_EVALUATIONS = """
    benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_source VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
    num_fewshot INTEGER NOT NULL, run_id VARCHAR, evaluated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (benchmark, model, mode, prompt_format, num_fewshot)"""
SCORES = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL,
    n INTEGER NOT NULL, correct DOUBLE NOT NULL, accuracy DOUBLE NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, report VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model, model_fingerprint, benchmark, mode, prompt_format, num_fewshot, metric)"""
ITEM_SCORES = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL,
    value DOUBLE NOT NULL, predicted VARCHAR, reference VARCHAR,
    PRIMARY KEY (model, model_fingerprint, prompt_id, mode, prompt_format, num_fewshot, metric)"""
SCORE_HISTORY = """
    run_id VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL, model VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL,
    source_row_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
    num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL, value DOUBLE NOT NULL, prediction_run_id VARCHAR,
    PRIMARY KEY (run_id, model, model_fingerprint, prompt_id, mode, prompt_format, num_fewshot, metric)"""
PROTOCOL_RESULTS = """
    protocol VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
    benchmark VARCHAR NOT NULL, num_fewshot INTEGER, mode VARCHAR, prompt_format VARCHAR, metric VARCHAR,
    n INTEGER, accuracy DOUBLE, ci_low DOUBLE, ci_high DOUBLE, status VARCHAR NOT NULL,
    computed_at TIMESTAMP NOT NULL, PRIMARY KEY (protocol, model, model_fingerprint, benchmark)"""
MODEL_COMPARISONS = """
    benchmark VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
    num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL, model_a VARCHAR NOT NULL,
    fingerprint_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, fingerprint_b VARCHAR NOT NULL, relation VARCHAR NOT NULL,
    items INTEGER NOT NULL, accuracy_a DOUBLE NOT NULL, accuracy_b DOUBLE NOT NULL, difference DOUBLE NOT NULL,
    only_a INTEGER NOT NULL, only_b INTEGER NOT NULL, mcnemar_p DOUBLE, paired_test VARCHAR NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, flipped_to_wrong VARCHAR[], compared_at TIMESTAMP NOT NULL,
    environment_differences VARCHAR,
    PRIMARY KEY (benchmark, mode, prompt_format, num_fewshot, metric, model_a, model_b)"""


def legacy_names(models: Sequence[tuple[str, str]]) -> dict[str, str]:
    """A roster name for each (model, fingerprint) scored before the roster: the model's last path
    segment and its precision (`local/smollm2-135m-instruct` in bfloat16 ->
    `smollm2-135m-instruct-bfloat16`; a local model without a precision suffix ran in float32), with
    the fingerprint's digest added where two fingerprints would share a name."""

    def base(model: str, fingerprint: str) -> str:
        stem = re.sub(r"[^A-Za-z0-9._-]", "-", model.rstrip("/").rsplit("/", 1)[-1]).strip("-") or "model"
        precision = (
            fingerprint.rsplit("+", 1)[1] if "+" in fingerprint else "float32" if model.startswith("local/") else None
        )
        return f"{stem}-{precision}" if precision else stem

    names = {fingerprint: base(model, fingerprint) for model, fingerprint in models}
    shared = Counter(names.values())
    return {
        fingerprint: name if shared[name] == 1 else f"{name}-{fingerprint.rsplit('@', 1)[-1][:8]}"
        for fingerprint, name in names.items()
    }


def migrate(conn: Any) -> None:
    existing = existing_tables(conn)
    named = [table for table in ("predictions", "scores", "score_history") if table in existing]
    pairs = conn.execute(" UNION ".join(f"SELECT DISTINCT model, model_fingerprint FROM {t}" for t in named)).fetchall()
    conn.execute("CREATE TEMP TABLE legacy_names (model_fingerprint VARCHAR PRIMARY KEY, name VARCHAR NOT NULL)")
    conn.executemany("INSERT INTO legacy_names VALUES (?, ?)", list(legacy_names(pairs).items()))
    name = "(SELECT n.name FROM legacy_names n WHERE n.model_fingerprint = old.model_fingerprint)"
    conn.execute(f"CREATE TABLE model_evaluations ({MODEL_EVALUATIONS})")
    conn.execute(f"""INSERT INTO model_evaluations BY NAME
                     SELECT benchmark, {name} AS model, any_value(model) AS model_source, model_fingerprint, mode,
                            prompt_format, num_fewshot, max(run_id) AS run_id, max(predicted_at) AS evaluated_at
                     FROM predictions old GROUP BY benchmark, model_fingerprint, mode, prompt_format, num_fewshot""")
    side = "(SELECT n.name FROM legacy_names n WHERE n.model_fingerprint = old.fingerprint_{})"
    rebuilt = {
        "scores": (SCORES, f"* REPLACE ({name} AS model)"),
        "item_scores": (ITEM_SCORES, f"*, {name} AS model"),
        "score_history": (SCORE_HISTORY, f"* REPLACE ({name} AS model)"),
        "protocol_results": (PROTOCOL_RESULTS, f"* REPLACE ({name} AS model)"),
        "model_comparisons": (
            MODEL_COMPARISONS,
            f"* REPLACE ({side.format('a')} AS model_a, {side.format('b')} AS model_b), "
            "'compared before the roster' AS relation, NULL::VARCHAR[] AS flipped_to_wrong, "
            f"CASE WHEN mcnemar_p IS NULL THEN '{NO_PAIRED_TEST}' ELSE 'exact McNemar' END "
            "AS paired_test",
        ),
    }
    for table, (columns, select) in rebuilt.items():
        if table in existing:
            rebuild_table(conn, table, columns, select)
    conn.execute("DROP TABLE legacy_names")
