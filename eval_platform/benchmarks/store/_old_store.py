"""The benchmark domain's tables: raw rows and few-shot rows, prompts and their harness requests,
predictions, per-item and aggregate scores, protocol results, and every rejection with its reason.

Every write replaces one partition's rows (or one model's predictions in one mode) in a single
transaction, so a re-run never duplicates and a crash never leaves half a partition.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from eval_platform.benchmarks.comparison import NO_PAIRED_TEST
from eval_platform.benchmarks.harness_tasks import settings_key
from eval_platform.benchmarks.leaderboard import HARNESS_MODE, PRIMARY_PROTOCOL
from eval_platform.benchmarks.leaderboard_v2 import PROTOCOL as V2_PROTOCOL
from eval_platform.benchmarks.leaderboard_v2 import V2_TASKS
from eval_platform.benchmarks.specs import BENCHMARKS
from eval_platform.common.warehouse import Store, add_column, is_lake, reads, rebuild_table, writes

PREDICTION_KEY = ("model_fingerprint", "benchmark", "mode", "prompt_format", "num_fewshot")
KEPT_RUNS = 5  # scoring runs per benchmark in score_history, and prediction runs no prediction names any more

_PREDICTIONS_V5 = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL,
    predicted VARCHAR, predicted_norm VARCHAR, predicted_flexible VARCHAR,
    label_probabilities MAP(VARCHAR, DOUBLE), choice_loglikelihoods DOUBLE[], output_text VARCHAR,
    predicted_at TIMESTAMP NOT NULL, run_id VARCHAR,
    PRIMARY KEY (model_fingerprint, prompt_id, mode, prompt_format, num_fewshot)"""
# From version 6 a generated text's answers under each filter are item scores' rows, not columns.
_PREDICTIONS = _PREDICTIONS_V5.replace(" predicted_flexible VARCHAR,", "")
_HARNESS_REQUESTS = """
    prompt_id VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL,
    contexts VARCHAR[] NOT NULL, continuations VARCHAR[] NOT NULL, choice_texts VARCHAR[] NOT NULL,
    generation_kwargs JSON, fewshot_ids VARCHAR[] NOT NULL, PRIMARY KEY (prompt_id, num_fewshot)"""
_SCORES_V4 = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL,
    n INTEGER NOT NULL, correct DOUBLE NOT NULL, accuracy DOUBLE NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, report VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model_fingerprint, benchmark, mode, prompt_format, num_fewshot, metric)"""
# From version 5, `model` in scores and the tables derived from them is the roster entry's name.
_SCORES = _SCORES_V4.replace("PRIMARY KEY (model_fingerprint", "PRIMARY KEY (model, model_fingerprint")
_ITEM_SCORES = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL,
    value DOUBLE NOT NULL, predicted VARCHAR, reference VARCHAR,
    PRIMARY KEY (model, model_fingerprint, prompt_id, mode, prompt_format, num_fewshot, metric)"""
_SCORE_HISTORY = """
    run_id VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL, model VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL,
    source_row_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
    num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL, value DOUBLE NOT NULL, prediction_run_id VARCHAR,
    PRIMARY KEY (run_id, model, model_fingerprint, prompt_id, mode, prompt_format, num_fewshot, metric)"""
# where a run computed its answers (see common/reproducibility.py)
_RUN_ENVIRONMENTS = """
    run_id VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, batch_size INTEGER NOT NULL, device VARCHAR NOT NULL,
    device_name VARCHAR NOT NULL, dtype VARCHAR, threads INTEGER, cpu_capability VARCHAR,
    cpu_features VARCHAR NOT NULL, torch_version VARCHAR, transformers_version VARCHAR,
    python_version VARCHAR NOT NULL, platform VARCHAR NOT NULL, recorded_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, benchmark)"""
# each document of a harness benchmark per roster model, settings key and filter: prompt, answers, metrics
_HARNESS_SAMPLES = """
    benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
    task VARCHAR NOT NULL, doc_id INTEGER NOT NULL, filter VARCHAR NOT NULL, doc JSON NOT NULL,
    prompt VARCHAR NOT NULL, arguments JSON NOT NULL, target VARCHAR, responses JSON NOT NULL,
    filtered_responses JSON NOT NULL, metrics JSON NOT NULL, doc_hash VARCHAR, prompt_hash VARCHAR,
    run_id VARCHAR, request_keys VARCHAR[], settings_key VARCHAR NOT NULL,
    PRIMARY KEY (benchmark, model, settings_key, task, doc_id, filter)"""
# the harness's aggregated results per roster model, settings key, task and group, metric and filter
_HARNESS_RESULTS = """
    benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
    task VARCHAR NOT NULL, alias VARCHAR, is_group BOOLEAN NOT NULL, metric VARCHAR NOT NULL,
    filter VARCHAR NOT NULL, value DOUBLE, stderr DOUBLE, n INTEGER, num_fewshot INTEGER,
    higher_is_better BOOLEAN, random_baseline DOUBLE, settings JSON NOT NULL, run_id VARCHAR,
    computed_at TIMESTAMP NOT NULL, settings_key VARCHAR NOT NULL,
    PRIMARY KEY (benchmark, model, settings_key, task, metric, filter)"""
# each harness evaluation run's per-document metric values, under its run id and with its settings (and
# their key), and the run that computed the document's answers (its latest answer's, where runs shared them)
_HARNESS_HISTORY = """
    run_id VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, task VARCHAR NOT NULL, filter VARCHAR NOT NULL, num_fewshot INTEGER,
    metric VARCHAR NOT NULL, doc_id INTEGER NOT NULL, value DOUBLE NOT NULL, settings JSON NOT NULL,
    prediction_run_id VARCHAR, settings_key VARCHAR NOT NULL,
    PRIMARY KEY (run_id, benchmark, model, task, filter, metric, doc_id)"""
# a harness document's numeric per-document metric values (IFEval's per-instruction lists are left out),
# with the run that computed its answers (`harness_answers` by the document's request keys)
_HARNESS_DOCUMENT_VALUES = """
    WITH answered AS (
        SELECT s.benchmark, s.model, s.settings_key, s.task, s.doc_id, s.filter,
               arg_max(a.run_id, a.answered_at) AS prediction_run_id
        FROM harness_samples s, unnest(s.request_keys) AS k(request_key)
        JOIN harness_answers a ON a.model_fingerprint = s.model_fingerprint AND a.request_key = k.request_key
        GROUP BY ALL)
    SELECT * FROM (
        SELECT s.benchmark, s.model, s.model_fingerprint, s.settings_key, s.task, s.filter, s.doc_id,
               m.key AS metric, s.run_id,
               CASE json_type(m.value) WHEN 'BOOLEAN' THEN (m.value::VARCHAR = 'true')::DOUBLE
                    ELSE TRY_CAST(m.value::VARCHAR AS DOUBLE) END AS value,
               s.filtered_responses, s.target, s.prompt, d.prediction_run_id
        FROM harness_samples s CROSS JOIN json_each(s.metrics) m
        LEFT JOIN answered d USING (benchmark, model, settings_key, task, doc_id, filter))
    WHERE value IS NOT NULL"""
_MODEL_COMPARISONS = """
    benchmark VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
    num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL, model_a VARCHAR NOT NULL,
    fingerprint_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, fingerprint_b VARCHAR NOT NULL, relation VARCHAR NOT NULL,
    items INTEGER NOT NULL, accuracy_a DOUBLE NOT NULL, accuracy_b DOUBLE NOT NULL, difference DOUBLE NOT NULL,
    only_a INTEGER NOT NULL, only_b INTEGER NOT NULL, mcnemar_p DOUBLE, paired_test VARCHAR NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, flipped_to_wrong VARCHAR[], compared_at TIMESTAMP NOT NULL,
    environment_differences VARCHAR,
    PRIMARY KEY (benchmark, mode, prompt_format, num_fewshot, metric, model_a, model_b)"""
# a harness benchmark's comparisons, per settings key as well (mode = the harness task, prompt_format = the filter)
_HARNESS_COMPARISONS = _MODEL_COMPARISONS.replace(
    "PRIMARY KEY (benchmark,", "settings_key VARCHAR NOT NULL, PRIMARY KEY (benchmark, settings_key,"
)
# every benchmark's headline, a spec's or a harness task's (mode `harness`, whose shots, documents
# and interval may be unknown: a group's, or a metric without a standard error)
_LEADERBOARD = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER, metric VARCHAR NOT NULL,
    n INTEGER, accuracy DOUBLE NOT NULL, ci_low DOUBLE, ci_high DOUBLE,
    computed_at TIMESTAMP NOT NULL, PRIMARY KEY (model, benchmark, mode)"""
_PROTOCOL_RESULTS = """
    protocol VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
    benchmark VARCHAR NOT NULL, num_fewshot INTEGER, mode VARCHAR, prompt_format VARCHAR, metric VARCHAR,
    n INTEGER, accuracy DOUBLE, ci_low DOUBLE, ci_high DOUBLE, status VARCHAR NOT NULL,
    computed_at TIMESTAMP NOT NULL, PRIMARY KEY (protocol, model, model_fingerprint, benchmark)"""
_MODEL_EVALUATIONS = """
    benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_source VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
    num_fewshot INTEGER NOT NULL, run_id VARCHAR, evaluated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (benchmark, model, mode, prompt_format, num_fewshot)"""
_PROMPTS = """
    prompt_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER,
    system_prompt VARCHAR NOT NULL, user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL,
    choices VARCHAR[] NOT NULL, real_answer VARCHAR NOT NULL"""
_REJECTIONS = """
    benchmark VARCHAR NOT NULL, source_row_id VARCHAR, row_json VARCHAR, reason VARCHAR NOT NULL,
    rejected_at TIMESTAMP NOT NULL"""
_SOURCE_REJECTIONS = "source VARCHAR, line INTEGER, " + _REJECTIONS


_V1_REJECTIONS = """
    benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_json JSON, reason VARCHAR NOT NULL,
    rejected_at TIMESTAMP NOT NULL"""


def _existing_tables(conn: Any) -> set[str]:
    return {name for (name,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def _from_unversioned(conn: Any) -> None:
    """0 -> 1. The unversioned platform's warehouse: one `rejected_rows` table for two writers,
    prompt format 'seed' (now 'chat'), no number of shots."""
    for stage, table in (("ingest", "ingest_rejections"), ("preprocess", "prompt_rejections")):
        conn.execute(f"CREATE TABLE {table} ({_V1_REJECTIONS})")
        conn.execute(
            f"INSERT INTO {table} BY NAME SELECT benchmark, source_row_id, row_json, reason, rejected_at "
            f"FROM rejected_rows WHERE stage = '{stage}'"
        )
    conn.execute("DROP TABLE rejected_rows")
    renamed = "CASE prompt_format WHEN 'seed' THEN 'chat' ELSE prompt_format END AS prompt_format"
    rebuild_table(conn, "predictions", _PREDICTIONS_V5, f"* REPLACE ({renamed}), 0 AS num_fewshot")
    rebuild_table(
        conn,
        "scores",
        _SCORES_V4.replace("correct DOUBLE", "correct INTEGER"),
        f"* REPLACE ({renamed}), 0 AS num_fewshot",
    )


def _with_harness_requests(conn: Any) -> None:
    """1 -> 2. Harness requests move out of `prompts` into their own table (with few-shot ones);
    rows and rejections record their file and line; `correct` may be fractional (mc2)."""
    conn.execute("ALTER TABLE raw_rows ADD COLUMN line INTEGER")
    rebuild_table(conn, "ingest_rejections", _SOURCE_REJECTIONS, "*")
    rebuild_table(conn, "prompt_rejections", _REJECTIONS, "*")
    rebuild_table(
        conn,
        "prompts",
        _PROMPTS,
        "* EXCLUDE (harness_contexts, harness_continuations), (SELECT r.row_number FROM raw_rows r "
        "WHERE r.benchmark = old.benchmark AND r.source_row_id = old.source_row_id) AS row_number",
    )
    rebuild_table(conn, "scores", _SCORES_V4, "* REPLACE (correct::DOUBLE AS correct)")


def _with_prediction_runs(conn: Any) -> None:
    """2 -> 3. Each prediction names the run that computed it (`prediction_runs`, created with the
    new tables, records where); earlier predictions have none. A score's history names the
    prediction run behind it; a model comparison, the environments that differ between its sides."""
    add_column(conn, "predictions", "run_id", "VARCHAR")
    add_column(conn, "score_history", "prediction_run_id", "VARCHAR")
    add_column(conn, "model_comparisons", "environment_differences", "VARCHAR")


# GSM8K's metrics, named as the harness names its answer filters since version 4.
HARNESS_METRIC_NAMES = {"strict_match": "strict-match", "flexible_match": "flexible-extract"}


def _with_harness_metric_names(conn: Any) -> None:
    """3 -> 4. Generative metrics take the harness's filter names (`strict-match`,
    `flexible-extract`) in every table that names a metric."""
    existing = _existing_tables(conn)
    for table in {"scores", "item_scores", "score_history", "model_comparisons", "protocol_results"} & existing:
        for old, new in HARNESS_METRIC_NAMES.items():
            conn.execute(f"UPDATE {table} SET metric = ? WHERE metric = ?", [new, old])


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


def _with_roster_names(conn: Any) -> None:
    """4 -> 5. Scores belong to roster entries: `model` in scores, item scores, score history,
    comparisons and protocol results becomes the entry's name (`legacy_names` names the models
    scored before), `model_evaluations` records which fingerprint each name was evaluated with, and
    a comparison says how its two sides relate and which items flipped."""
    existing = _existing_tables(conn)
    named = [table for table in ("predictions", "scores", "score_history") if table in existing]
    pairs = conn.execute(" UNION ".join(f"SELECT DISTINCT model, model_fingerprint FROM {t}" for t in named)).fetchall()
    conn.execute("CREATE TEMP TABLE legacy_names (model_fingerprint VARCHAR PRIMARY KEY, name VARCHAR NOT NULL)")
    conn.executemany("INSERT INTO legacy_names VALUES (?, ?)", list(legacy_names(pairs).items()))
    name = "(SELECT n.name FROM legacy_names n WHERE n.model_fingerprint = old.model_fingerprint)"
    conn.execute(f"CREATE TABLE model_evaluations ({_MODEL_EVALUATIONS})")
    conn.execute(f"""INSERT INTO model_evaluations BY NAME
                     SELECT benchmark, {name} AS model, any_value(model) AS model_source, model_fingerprint, mode,
                            prompt_format, num_fewshot, max(run_id) AS run_id, max(predicted_at) AS evaluated_at
                     FROM predictions old GROUP BY benchmark, model_fingerprint, mode, prompt_format, num_fewshot""")
    side = "(SELECT n.name FROM legacy_names n WHERE n.model_fingerprint = old.fingerprint_{})"
    rebuilt = {
        "scores": (_SCORES, f"* REPLACE ({name} AS model)"),
        "item_scores": (_ITEM_SCORES, f"*, {name} AS model"),
        "score_history": (_SCORE_HISTORY, f"* REPLACE ({name} AS model)"),
        "protocol_results": (_PROTOCOL_RESULTS, f"* REPLACE ({name} AS model)"),
        "model_comparisons": (
            _MODEL_COMPARISONS,
            f"* REPLACE ({side.format('a')} AS model_a, {side.format('b')} AS model_b), "
            "'compared before the roster' AS relation, NULL::VARCHAR[] AS flipped_to_wrong, "
            f"CASE WHEN mcnemar_p IS NULL THEN '{NO_PAIRED_TEST}' ELSE 'exact McNemar' END "
            "AS paired_test",
        ),
    }
    for table, (columns, select) in rebuilt.items():
        if table in existing:  # a table created since is created with its new columns
            rebuild_table(conn, table, columns, select)
    conn.execute("DROP TABLE legacy_names")


# What the harness's gsm8k and gsm8k_cot asked to generate before version 6 stored it with each request.
_V5_GENERATION_KWARGS = {
    "gsm8k": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0},
    "gsm8k_cot": {"do_sample": False, "until": ["Q:", "</s>", "<|im_end|>"]},
}


def _with_harness_built_requests(conn: Any) -> None:
    """5 -> 6. Harness requests are the harness task's own: each (context, continuation) pair whole
    (the few-shot prefix no longer apart), a generation's `generation_kwargs`; the harness scores
    them, so gold indices and targets go. A generated text's answers under each filter are item
    scores' rows, so predictions lose `predicted_flexible` (its values are the item scores'
    `flexible-extract` answers)."""
    kwargs = " ".join(f"WHEN '{name}' THEN '{json.dumps(value)}'" for name, value in _V5_GENERATION_KWARGS.items())
    existing = _existing_tables(conn)
    if "harness_requests" in existing:  # a table created since is created with its new columns
        rebuild_table(
            conn,
            "harness_requests",
            _HARNESS_REQUESTS,
            f"""
            prompt_id, benchmark, num_fewshot, choice_texts, fewshot_ids,
        CASE WHEN len(continuations) = 0 THEN [prefix || contexts[1]]
             WHEN len(contexts) > 1 THEN list_transform(contexts, lambda c: prefix || c)
             ELSE list_transform(continuations, lambda k: prefix || contexts[1]) END AS contexts,
        CASE WHEN len(contexts) > 1 THEN list_transform(contexts, lambda c: continuations[1])
             ELSE continuations END AS continuations,
        CASE WHEN len(continuations) = 0 THEN CASE benchmark {kwargs} END END::JSON AS generation_kwargs""",
        )
    rebuild_table(conn, "predictions", _PREDICTIONS, "* EXCLUDE (predicted_flexible)")


def _with_harness_headlines(conn: Any) -> None:
    """6 -> 7. The leaderboard holds the harness benchmarks' headlines beside the specs' (mode
    `harness`, a benchmark of either kind by one name apart), whose shots, documents and interval
    may be unknown."""
    if "leaderboard" in _existing_tables(conn):
        rebuild_table(conn, "leaderboard", _LEADERBOARD, "*")


def _with_sample_request_keys(conn: Any) -> None:
    """7 -> 8. A harness document names its requests (`harness_samples.request_keys`), so its answers
    in `harness_answers`, and the run that computed them (`harness_runs`), are found from it; a
    document stored before has none."""
    add_column(conn, "harness_samples", "request_keys", "VARCHAR[]")


def _with_settings_keys(conn: Any) -> None:
    """8 -> 9. A harness benchmark's results are kept per settings key (harness_tasks.settings_key),
    so a run with other shots, system instruction or task config no longer replaces
    the benchmark's other runs. Each stored row takes the key of the settings it was computed with
    (a sample's and a comparison's: its benchmark and model's, the one run a version 8 warehouse
    held of them)."""
    if "harness_results" not in _existing_tables(conn):  # the harness's tables are created whole
        return
    settings = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT settings::VARCHAR FROM harness_results UNION SELECT DISTINCT settings::VARCHAR "
            "FROM harness_history"
        ).fetchall()
    ]
    conn.execute("CREATE TEMP TABLE settings_keys (settings VARCHAR, settings_key VARCHAR)")
    conn.executemany(
        "INSERT INTO settings_keys VALUES (?, ?)", [(text, settings_key(json.loads(text))) for text in settings]
    )
    conn.execute(
        "CREATE TEMP TABLE run_keys AS SELECT DISTINCT r.benchmark, r.model, k.settings_key "
        "FROM harness_results r JOIN settings_keys k ON k.settings = r.settings::VARCHAR"
    )
    own = "(SELECT k.settings_key FROM settings_keys k WHERE k.settings = old.settings::VARCHAR)"
    runs = (
        "(SELECT coalesce(any_value(k.settings_key), '{}') FROM run_keys k WHERE k.benchmark = old.benchmark "
        "AND k.model = old.{})"
    )
    unknown = settings_key({})
    for table, columns, value in (
        ("harness_results", _HARNESS_RESULTS, own),
        ("harness_history", _HARNESS_HISTORY, own),
        ("harness_samples", _HARNESS_SAMPLES, runs.format(unknown, "model")),
        ("harness_comparisons", _HARNESS_COMPARISONS, runs.format(unknown, "model_a")),
    ):
        if is_lake(conn):  # no keys to change: the column is added in place
            conn.execute(f"ALTER TABLE {table} ADD COLUMN settings_key VARCHAR")
            conn.execute(f"UPDATE {table} AS old SET settings_key = {value}")
        else:
            rebuild_table(conn, table, columns, f"*, {value} AS settings_key")
    conn.execute("DROP TABLE settings_keys")
    conn.execute("DROP TABLE run_keys")


def _spec_metric_and_filter(alias: str) -> str:
    """A spec's metric and filter as the harness names them: a generated answer's metric is
    exact_match under the answer filter the spec names it by (strict-match, flexible-extract); any
    other metric's filter is `none`."""
    return (
        f"CASE WHEN {alias}mode = 'generate' THEN 'exact_match' ELSE {alias}metric END AS metric, "
        f"CASE WHEN {alias}mode = 'generate' THEN {alias}metric ELSE 'none' END AS filter"
    )


def _protocol_cell(table: str, column: str, protocol: str, benchmark: str, name: str) -> str:
    return (
        f"(SELECT any_value(p.{column}) FROM {table} p WHERE p.model = l.model AND p.protocol = '{protocol}' "
        f"AND p.benchmark = '{benchmark}') AS {name}"
    )


def _leaderboard_wide() -> str:
    """One row per model: each spec's headline, the v1 average and its status, each v2 task's
    normalised score, the v2 average and its status."""
    specs = [
        f"max(l.accuracy) FILTER (WHERE l.benchmark = '{name}' AND l.mode <> '{HARNESS_MODE}') AS {name}"
        for name in BENCHMARKS
    ]
    v1 = [
        _protocol_cell("protocol_results", "accuracy", PRIMARY_PROTOCOL, "average", PRIMARY_PROTOCOL),
        _protocol_cell("protocol_results", "status", PRIMARY_PROTOCOL, "average", f"{PRIMARY_PROTOCOL}_status"),
    ]
    v2 = [_protocol_cell("normalized_scores", "normalized", V2_PROTOCOL, task.task, task.task) for task in V2_TASKS]
    v2 += [
        _protocol_cell("normalized_scores", "normalized", V2_PROTOCOL, "average", V2_PROTOCOL),
        _protocol_cell("normalized_scores", "status", V2_PROTOCOL, "average", f"{V2_PROTOCOL}_status"),
    ]
    return f"SELECT l.model, {', '.join(specs + v1 + v2)} FROM leaderboard l GROUP BY l.model"


class BenchmarkStore(Store):
    name = "benchmarks"
    version = 9
    tables = {
        "raw_rows": """
            benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER NOT NULL, line INTEGER,
            row_json JSON NOT NULL, source VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL,
            PRIMARY KEY (benchmark, source_row_id)""",
        "ingest_rejections": _SOURCE_REJECTIONS,
        "fewshot_rows": """
            benchmark VARCHAR NOT NULL, row_number INTEGER NOT NULL, source_row_id VARCHAR NOT NULL, line INTEGER,
            row_json JSON NOT NULL, source VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL,
            PRIMARY KEY (benchmark, row_number)""",
        "fewshot_rejections": _SOURCE_REJECTIONS,
        "prompts": _PROMPTS,
        "prompt_rejections": _REJECTIONS,
        # each prompt's requests as the harness's own task built them, zero-shot and with the leaderboard's shots
        "harness_requests": _HARNESS_REQUESTS,
        "predictions": _PREDICTIONS,
        # where each prediction run computed its predictions (see common/reproducibility.py)
        "prediction_runs": _RUN_ENVIRONMENTS,
        # which fingerprint each roster name was evaluated with, per benchmark, mode, format and shots
        "model_evaluations": _MODEL_EVALUATIONS,
        "item_scores": _ITEM_SCORES,
        "scores": _SCORES,
        "score_history": _SCORE_HISTORY,
        "model_comparisons": _MODEL_COMPARISONS,
        "protocol_results": _PROTOCOL_RESULTS,
        # lm-evaluation-harness tasks (harness_tasks.py): every request's answer per model fingerprint,
        # reused by any task that asks the same request again
        "harness_answers": """
            model_fingerprint VARCHAR NOT NULL, request_key VARCHAR NOT NULL, request_type VARCHAR NOT NULL,
            arguments JSON NOT NULL, response JSON NOT NULL, run_id VARCHAR, answered_at TIMESTAMP NOT NULL,
            PRIMARY KEY (model_fingerprint, request_key)""",
        "harness_samples": _HARNESS_SAMPLES,
        # where each harness run that computed answers computed them, as prediction_runs for a spec's
        "harness_runs": _RUN_ENVIRONMENTS,
        # each run's per-document values, for the regression watch (as score_history for a spec's benchmark)
        "harness_history": _HARNESS_HISTORY,
        "harness_results": _HARNESS_RESULTS,
        # a roster model against its baseline and predecessor on a harness benchmark, per settings key, task,
        # filter and metric (mode = the harness task, prompt_format = the filter), as model_comparisons
        "harness_comparisons": _HARNESS_COMPARISONS,
        # a protocol's scores rescaled between the random baseline and 1 (Open LLM Leaderboard v2)
        "normalized_scores": """
            protocol VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR, benchmark VARCHAR NOT NULL,
            metric VARCHAR, raw DOUBLE, normalized DOUBLE, subtasks INTEGER, status VARCHAR NOT NULL,
            computed_at TIMESTAMP NOT NULL, PRIMARY KEY (protocol, model, benchmark)""",
        # each roster model's headline score per benchmark (written by the leaderboard asset)
        "leaderboard": _LEADERBOARD,
    }
    views = {
        # every rejected row, at any stage, with its reason
        "rejected_rows": """
            SELECT benchmark, 'ingest' AS stage, source, line, source_row_id, row_json, reason, rejected_at
            FROM ingest_rejections
            UNION ALL SELECT benchmark, 'fewshot', source, line, source_row_id, row_json, reason, rejected_at
            FROM fewshot_rejections
            UNION ALL SELECT p.benchmark, 'preprocess', r.source, r.line, p.source_row_id, p.row_json, p.reason,
                             p.rejected_at
            FROM prompt_rejections p LEFT JOIN raw_rows r USING (benchmark, source_row_id)""",
        # score -> each item's score -> the prediction behind it -> its prompt (and harness request) -> the raw row
        "score_lineage": """
            SELECT s.model, s.model_fingerprint, s.benchmark, s.mode, s.prompt_format, s.num_fewshot, s.metric,
                   s.accuracy, i.prompt_id, i.value AS item_score, i.predicted, i.reference,
                   pr.label_probabilities, pr.choice_loglikelihoods, pr.output_text,
                   p.system_prompt, p.user_prompt, h.contexts AS harness_contexts,
                   h.continuations AS harness_continuations, h.fewshot_ids,
                   r.source_row_id, r.row_number, r.line, r.source, r.row_json
            FROM scores s
            JOIN item_scores i USING (model, model_fingerprint, benchmark, mode, prompt_format, num_fewshot, metric)
            JOIN predictions pr USING (model_fingerprint, prompt_id, mode, prompt_format, num_fewshot)
            JOIN prompts p ON p.prompt_id = i.prompt_id
            LEFT JOIN harness_requests h ON s.prompt_format = 'harness' AND h.prompt_id = i.prompt_id
                                         AND h.num_fewshot = i.num_fewshot
            JOIN raw_rows r ON r.benchmark = p.benchmark AND r.source_row_id = p.source_row_id""",
        # a harness benchmark's score (under its settings key, with its shots) -> each document's value of that
        # metric -> its prompt, answers and document -> the run's settings (task, data files, shots, chat template)
        "harness_lineage": """
            SELECT r.benchmark, r.model, r.model_fingerprint, r.settings_key, r.task, r.metric, r.filter,
                   r.num_fewshot, r.value AS score, s.doc_id, s.metrics -> ('$."' || r.metric || '"') AS item_value, s.prompt,
                   s.arguments, s.responses, s.filtered_responses, s.target, s.doc, s.doc_hash,
                   r.settings -> '$.data_files' AS data_files, r.settings, r.run_id
            FROM harness_results r
            JOIN harness_samples s ON s.benchmark = r.benchmark AND s.model = r.model
                                  AND s.settings_key = r.settings_key AND s.task = r.task AND s.filter = r.filter
            WHERE NOT r.is_group""",
        # either kind of benchmark, one row per item, metric and filter (named as the harness names them):
        # score -> item value -> the exact prompt -> the answer and what was extracted from it -> the
        # reference -> the source row (a spec's raw row, a harness task's document) and where it came from
        "item_lineage": f"""
            SELECT 'spec' AS kind, l.model, l.model_fingerprint, l.benchmark, l.benchmark AS task, l.mode,
                   l.prompt_format, {_spec_metric_and_filter("l.")}, l.num_fewshot, l.accuracy AS score,
                   l.source_row_id AS item, to_json(l.item_score) AS item_value,
                   CASE WHEN l.prompt_format <> 'harness'
                        THEN CASE WHEN l.system_prompt <> '' THEN '[system]' || chr(10) || l.system_prompt
                                  || chr(10) || chr(10) ELSE '' END || '[user]' || chr(10) || l.user_prompt
                        WHEN len(list_distinct(l.harness_contexts)) = 1 THEN l.harness_contexts[1]
                        ELSE array_to_string(list_transform(l.harness_contexts, lambda c, i: '[context ' || i || ']'
                                                            || chr(10) || c), chr(10) || chr(10)) END AS prompt,
                   CASE WHEN l.output_text IS NOT NULL THEN to_json(l.output_text)
                        WHEN l.label_probabilities IS NOT NULL THEN to_json(l.label_probabilities)
                        ELSE to_json(l.choice_loglikelihoods) END AS answer,
                   l.predicted AS extracted, l.reference, l.source, l.row_json::JSON AS source_row
            FROM score_lineage l
            UNION ALL BY NAME
            SELECT 'harness' AS kind, h.model, h.model_fingerprint, h.benchmark, h.task, '{HARNESS_MODE}' AS mode,
                   'harness' AS prompt_format, h.metric, h.filter, h.num_fewshot, h.score, h.doc_id::VARCHAR AS item,
                   h.item_value::JSON AS item_value, h.prompt, h.responses AS answer,
                   h.filtered_responses::VARCHAR AS extracted, h.target AS reference, h.data_files::VARCHAR AS source,
                   h.doc AS source_row, h.settings_key
            FROM harness_lineage h""",
        # every model comparison, of either kind of benchmark, with its task, metric and filter as the
        # harness names them
        "comparisons": f"""
            SELECT 'spec' AS kind, benchmark, benchmark AS task, mode, prompt_format, num_fewshot,
                   {_spec_metric_and_filter("")}, * EXCLUDE (benchmark, mode, prompt_format, num_fewshot, metric)
            FROM model_comparisons
            UNION ALL BY NAME
            SELECT 'harness' AS kind, benchmark, mode AS task, '{HARNESS_MODE}' AS mode, 'harness' AS prompt_format,
                   prompt_format AS filter, * EXCLUDE (benchmark, mode, prompt_format)
            FROM harness_comparisons""",
        # the leaderboard, one row per model: a column per spec's benchmark (its headline) and the v1
        # protocol's average, a column per v2 task (its normalised score, 0 to 100) and the v2 average
        "leaderboard_wide": _leaderboard_wide(),
    }
    migrations = {
        0: _from_unversioned,
        1: _with_harness_requests,
        2: _with_prediction_runs,
        3: _with_harness_metric_names,
        4: _with_roster_names,
        5: _with_harness_built_requests,
        6: _with_harness_headlines,
        7: _with_sample_request_keys,
        8: _with_settings_keys,
    }

    # --- raw and few-shot rows ----------------------------------------------------------------------

    @writes("raw_rows", "ingest_rejections")
    def replace_raw_rows(self, benchmark: str, rows: pd.DataFrame, rejections: pd.DataFrame) -> None:
        self.replace_together("benchmark = ?", [benchmark], raw_rows=rows, ingest_rejections=rejections)

    @reads("raw_rows")
    def load_raw_rows(self, benchmark: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT source_row_id, row_number, row_json FROM raw_rows WHERE benchmark = ? ORDER BY row_number",
            [benchmark],
        )

    @writes("fewshot_rows", "fewshot_rejections")
    def replace_fewshot_rows(self, benchmark: str, rows: pd.DataFrame, rejections: pd.DataFrame) -> None:
        self.replace_together("benchmark = ?", [benchmark], fewshot_rows=rows, fewshot_rejections=rejections)

    @reads("fewshot_rows")
    def load_fewshot_rows(self, benchmark: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT source_row_id, row_json FROM fewshot_rows WHERE benchmark = ? ORDER BY row_number", [benchmark]
        )

    # --- prompts --------------------------------------------------------------------------------

    @writes("prompts", "prompt_rejections", "harness_requests")
    def replace_prompts(
        self, benchmark: str, prompts: pd.DataFrame, rejections: pd.DataFrame, requests: pd.DataFrame
    ) -> None:
        self.replace_together(
            "benchmark = ?", [benchmark], prompts=prompts, prompt_rejections=rejections, harness_requests=requests
        )

    @reads("prompts", "harness_requests")
    def load_prompts(self, benchmark: str, num_fewshot: int = 0) -> list[dict[str, Any]]:
        """The benchmark's prompts in source order, each with its harness request for `num_fewshot`
        shots (its fields None where the prompt has none)."""
        return self.rows(
            """
            SELECT p.*, h.contexts, h.continuations, h.choice_texts, h.generation_kwargs, h.fewshot_ids
            FROM prompts p LEFT JOIN harness_requests h ON h.prompt_id = p.prompt_id AND h.num_fewshot = ?
            WHERE p.benchmark = ? ORDER BY p.row_number, p.source_row_id""",
            [num_fewshot, benchmark],
        )

    # --- predictions ----------------------------------------------------------------------------

    @reads("predictions")
    def stored_prediction_ids(self, key: Mapping[str, Any]) -> set[str]:
        condition = " AND ".join(f"{column} = ?" for column in key)
        return {
            r["prompt_id"]
            for r in self.rows(f"SELECT prompt_id FROM predictions WHERE {condition}", list(key.values()))
        }

    @writes("predictions", "prediction_runs", "model_evaluations")
    @reads("prompts")
    def save_predictions(
        self,
        key: Mapping[str, Any],
        predictions: pd.DataFrame,
        replace_all: bool,
        run: pd.DataFrame,
        evaluation: pd.DataFrame,
    ) -> None:
        """Store new predictions under `key` (model, benchmark, mode, format, shots), the row of
        `prediction_runs` saying where their run computed them, and the `evaluation` row naming the
        roster entry they were evaluated for. Predictions for prompts the benchmark
        no longer has are dropped; `replace_all` drops every earlier one. A new prediction replaces one
        of the same prompt stored meanwhile (by another run of the same step: a worker's task handed to
        a second worker), so there is one per prompt. Reused predictions keep their
        run; a run none of whose predictions remain is kept while it is one of the benchmark's latest
        `KEPT_RUNS` (as `score_history` keeps its runs, whose predictions it names)."""
        condition = " AND ".join(f"{column} = ?" for column in key)
        replaced = (
            ""
            if replace_all
            else " AND (prompt_id NOT IN (SELECT prompt_id FROM prompts WHERE benchmark = ?)"
            " OR list_contains(?, prompt_id))"
        )
        benchmark = key["benchmark"]
        self.replace(
            "predictions",
            predictions,
            condition + replaced,
            [*key.values(), *([] if replace_all else [benchmark, list(predictions["prompt_id"])])],
            "* EXCLUDE (label_keys, label_values), map(label_keys, label_values) AS label_probabilities",
        )
        if len(predictions):
            self.replace("prediction_runs", run, "benchmark = ? AND run_id = ?", [benchmark, run["run_id"].iloc[0]])
        entry = evaluation.iloc[0]
        self.replace(
            "model_evaluations",
            evaluation,
            "benchmark = ? AND model = ? AND mode = ? AND prompt_format = ? AND num_fewshot = ?",
            [benchmark, entry["model"], entry["mode"], entry["prompt_format"], int(entry["num_fewshot"])],
        )
        self.sql(
            """DELETE FROM prediction_runs WHERE benchmark = ? AND run_id NOT IN (
                        SELECT run_id FROM predictions WHERE benchmark = ? AND run_id IS NOT NULL)
                    AND run_id NOT IN (SELECT run_id FROM prediction_runs WHERE benchmark = ?
                                       ORDER BY recorded_at DESC LIMIT ?)""",
            [benchmark, benchmark, benchmark, KEPT_RUNS],
        )

    @reads("prediction_runs")
    def load_prediction_runs(self, benchmark: str) -> dict[str, dict[str, Any]]:
        """The benchmark's prediction runs by run id: where each computed its predictions."""
        return {
            row["run_id"]: row
            for row in self.rows("SELECT * EXCLUDE (recorded_at) FROM prediction_runs WHERE benchmark = ?", [benchmark])
        }

    @reads("predictions", "prompts", "raw_rows", "model_evaluations")
    def load_scoring_inputs(self, benchmark: str, model: str) -> list[dict[str, Any]]:
        """The roster model's stored predictions of the benchmark's current prompts (of the
        fingerprint it was last evaluated with, in each mode, format and shots), with what each is
        scored against: the prompt's labels and real answer, and its raw row (the harness's document)."""
        return self.rows(
            """
            SELECT e.model, pr.model_fingerprint, pr.mode, pr.prompt_format, pr.num_fewshot, pr.prompt_id,
                   pr.predicted, pr.predicted_norm, pr.choice_loglikelihoods, pr.output_text,
                   p.labels, p.real_answer, r.row_json
            FROM predictions pr JOIN prompts p USING (prompt_id)
            JOIN raw_rows r ON r.benchmark = p.benchmark AND r.source_row_id = p.source_row_id
            JOIN model_evaluations e ON e.benchmark = p.benchmark AND e.model_fingerprint = pr.model_fingerprint
                 AND e.mode = pr.mode AND e.prompt_format = pr.prompt_format AND e.num_fewshot = pr.num_fewshot
            WHERE p.benchmark = ? AND e.model = ?
            ORDER BY pr.model_fingerprint, pr.mode, pr.prompt_format, pr.num_fewshot, p.row_number, p.source_row_id""",
            [benchmark, model],
        )

    # --- scores ---------------------------------------------------------------------------------

    @writes("item_scores", "scores", "score_history")
    @reads("prompts", "predictions")
    def replace_scores(
        self,
        benchmark: str,
        model: str,
        items: pd.DataFrame,
        scores: pd.DataFrame,
        run_id: str,
        keep_runs: int = KEPT_RUNS,
    ) -> None:
        """The roster model's item scores and scores on the benchmark; the item scores are also kept
        as this run's history (the latest `keep_runs` runs per benchmark and model), for the
        regression watch."""
        where = "benchmark = ? AND model = ?"
        self.replace("item_scores", items, where, [benchmark, model])
        self.replace("scores", scores, where, [benchmark, model])
        self.sql(f"DELETE FROM score_history WHERE {where} AND run_id = ?", [benchmark, model, run_id])
        if len(scores):
            self.sql(
                """
                INSERT INTO score_history BY NAME
                SELECT ? AS run_id, s.scored_at, s.model, i.model_fingerprint, i.benchmark, i.prompt_id,
                       p.source_row_id, i.mode, i.prompt_format, i.num_fewshot, i.metric, i.value,
                       pr.run_id AS prediction_run_id
                FROM item_scores i
                JOIN scores s USING (model, model_fingerprint, benchmark, mode, prompt_format, num_fewshot, metric)
                JOIN prompts p ON p.prompt_id = i.prompt_id
                LEFT JOIN predictions pr ON pr.model_fingerprint = i.model_fingerprint AND pr.prompt_id = i.prompt_id
                    AND pr.mode = i.mode AND pr.prompt_format = i.prompt_format AND pr.num_fewshot = i.num_fewshot
                WHERE i.benchmark = ? AND i.model = ?""",
                [run_id, benchmark, model],
            )
        self._keep_latest_runs("score_history", keep_runs, benchmark=benchmark, model=model)

    def _keep_latest_runs(self, table: str, keep_runs: int, **scope: str) -> None:
        """Drop a history table's runs in `scope` (column -> value: a benchmark and model) but the
        latest `keep_runs`."""
        where, values = " AND ".join(f"{column} = ?" for column in scope), list(scope.values())
        self.sql(
            f"""
            DELETE FROM {table} WHERE {where} AND run_id NOT IN (
                SELECT run_id FROM {table} WHERE {where} GROUP BY run_id
                ORDER BY max(scored_at) DESC LIMIT ?)""",
            [*values, *values, keep_runs],
        )

    def _latest_two_runs(self, table: str, key: str, columns: str) -> list[dict[str, Any]]:
        """`columns` of a history table's rows from the latest two runs of each `key` (`latest` true
        for the newest)."""
        return self.rows(f"""
            WITH per_run AS (
                SELECT {key}, run_id, max(scored_at) AS last_scored FROM {table} GROUP BY ALL),
            runs AS (
                SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY last_scored DESC) AS recency FROM per_run)
            SELECT {columns}, r.recency = 1 AS latest FROM {table} h JOIN runs r USING ({key}, run_id)
            WHERE r.recency <= 2""")

    @reads("item_scores", "predictions", "prompts")
    def load_item_scores(self, benchmark: str, models: Sequence[str]) -> list[dict[str, Any]]:
        """The named roster models' item scores on the benchmark, each with its answer, reference,
        question, source row and the run that predicted it."""
        return self.rows(
            """
            SELECT i.model, i.model_fingerprint, i.mode, i.prompt_format, i.num_fewshot, i.metric, i.prompt_id, i.value,
                   i.predicted, i.reference, p.user_prompt AS question, p.source_row_id, pr.run_id AS prediction_run_id
            FROM item_scores i JOIN prompts p USING (prompt_id)
            LEFT JOIN predictions pr USING (model_fingerprint, prompt_id, mode, prompt_format, num_fewshot)
            WHERE i.benchmark = ? AND list_contains(?, i.model)""",
            [benchmark, list(models)],
        )

    @reads("score_lineage", "prompts")
    def load_item_views(self, benchmark: str, model: str) -> list[dict[str, Any]]:
        """Every scored item of the roster model on the benchmark with its metrics, answer and prompt,
        one row per item and metric, in run and item order (for `samples.sample_markdown`)."""
        return self.rows(
            """
            SELECT l.mode, l.prompt_format, l.num_fewshot, l.metric, l.prompt_id, l.source_row_id, l.item_score,
                   l.predicted, l.reference, l.label_probabilities, l.choice_loglikelihoods, l.output_text,
                   l.system_prompt, l.user_prompt, l.harness_contexts, l.harness_continuations,
                   p.choices
            FROM score_lineage l JOIN prompts p USING (prompt_id)
            WHERE l.benchmark = ? AND l.model = ?
            ORDER BY l.mode, l.prompt_format, l.num_fewshot, l.row_number, l.source_row_id, l.prompt_id, l.metric""",
            [benchmark, model],
        )

    @reads("score_history")
    def latest_score_runs(self) -> list[dict[str, Any]]:
        """Item scores of the latest two runs of every benchmark, model, mode, format, shots and
        metric (`latest` true for the newest)."""
        return self._latest_two_runs(
            "score_history", "benchmark, model, model_fingerprint, mode, prompt_format, num_fewshot, metric", "h.*"
        )

    @writes("model_comparisons")
    def replace_model_comparisons(self, benchmark: str, model: str, comparisons: pd.DataFrame) -> None:
        """The roster model's comparisons (as model_a) with its references on the benchmark."""
        self.replace_together("benchmark = ? AND model_a = ?", [benchmark, model], model_comparisons=comparisons)

    @reads("scores")
    def load_scores(self) -> list[dict[str, Any]]:
        return self.rows("SELECT * EXCLUDE (report) FROM scores ORDER BY benchmark, model, mode, num_fewshot, metric")

    @reads("scores")
    def score_table(self) -> pd.DataFrame:
        """Every score, one line each, for a console summary."""
        return self.frame("""
            SELECT benchmark, mode || ' / ' || prompt_format || ' / ' || num_fewshot || '-shot / ' || metric AS metric,
                   model, n, round(accuracy, 3) AS accuracy,
                   '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95
            FROM scores ORDER BY benchmark, metric, model""")

    @reads("model_comparisons")
    def comparison_table(self) -> pd.DataFrame:
        """Every model comparison, one line each, for a console summary."""
        return self.frame("""
            SELECT benchmark, mode || ' / ' || prompt_format || ' / ' || num_fewshot || '-shot / ' || metric AS metric,
                   model_a || ' vs ' || model_b || ' (' || relation || ')' AS models,
                   items, round(accuracy_a, 3) AS a, round(accuracy_b, 3) AS b, round(difference, 3) AS difference,
                   only_a, only_b, coalesce(printf('%.4g', mcnemar_p), paired_test) AS mcnemar_p,
                   '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95
            FROM model_comparisons ORDER BY benchmark, metric, models""")

    # --- the leaderboard ------------------------------------------------------------------------

    @reads("protocol_results")
    def load_protocol_averages(self, protocol: str) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT model, model_fingerprint, n, accuracy, status FROM protocol_results "
            "WHERE protocol = ? AND benchmark = 'average' ORDER BY model",
            [protocol],
        )

    @reads("leaderboard")
    def load_headlines(self) -> list[dict[str, Any]]:
        return self.rows("SELECT * EXCLUDE (computed_at) FROM leaderboard ORDER BY model, benchmark")

    @writes("leaderboard")
    def replace_leaderboard(self, rows: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], leaderboard=rows)

    # --- lm-evaluation-harness tasks -----------------------------------------------------------------

    @reads("harness_answers")
    def load_harness_answers(self, model_fingerprint: str) -> dict[str, Any]:
        """Every stored answer of the model fingerprint, by request key."""
        return {
            row["request_key"]: json.loads(row["response"])
            for row in self.rows(
                "SELECT request_key, response FROM harness_answers WHERE model_fingerprint = ?", [model_fingerprint]
            )
        }

    @writes("harness_answers", "harness_samples", "harness_results", "harness_history", "harness_runs")
    def save_harness_evaluation(
        self,
        benchmark: str,
        model: str,
        settings_key: str,
        answers: pd.DataFrame,
        samples: pd.DataFrame,
        results: pd.DataFrame,
        run: pd.DataFrame,
        keep_runs: int = KEPT_RUNS,
    ) -> None:
        """A roster model's evaluation on a harness benchmark: the answers this run computed (added
        to, or replacing, the fingerprint's stored ones) with the `run` row saying where it computed
        them (kept while an answer or the history names it), and the benchmark's samples and results
        for the model under the run's settings key, replaced (those under other keys kept), in one
        transaction. Each document's values are also kept as this run's history, with the run's
        settings (the latest `keep_runs` runs per benchmark, model and settings key), for the
        regression watch."""
        if len(answers):
            with self.registered("computed", answers[["model_fingerprint", "request_key"]]):
                self.sql(
                    "DELETE FROM harness_answers WHERE (model_fingerprint, request_key) IN "
                    "(SELECT (model_fingerprint, request_key) FROM computed)"
                )
            self.insert("harness_answers", answers)
            self.replace("harness_runs", run, "run_id = ?", [run["run_id"].iloc[0]])
        where, scope = "benchmark = ? AND model = ? AND settings_key = ?", [benchmark, model, settings_key]
        for table, frame in (("harness_samples", samples), ("harness_results", results)):
            self.replace(table, frame, where, scope)
        self.sql(
            f"DELETE FROM harness_history WHERE {where} AND run_id IN "
            f"(SELECT run_id FROM harness_results WHERE {where})",
            [*scope, *scope],
        )
        self.sql(
            f"""
            INSERT INTO harness_history BY NAME
            SELECT r.run_id, r.computed_at AS scored_at, v.benchmark, v.model, v.model_fingerprint, v.task, v.filter,
                   r.num_fewshot, v.metric, v.doc_id, v.value, r.settings, v.prediction_run_id, v.settings_key
            FROM ({_HARNESS_DOCUMENT_VALUES}) v
            JOIN harness_results r USING (benchmark, model, settings_key, task, metric, filter)
            WHERE v.benchmark = ? AND v.model = ? AND v.settings_key = ? AND r.run_id IS NOT NULL""",
            scope,
        )
        self._keep_latest_runs(
            "harness_history", keep_runs, benchmark=benchmark, model=model, settings_key=settings_key
        )
        self.sql("""DELETE FROM harness_runs WHERE run_id NOT IN (
                        SELECT run_id FROM harness_answers WHERE run_id IS NOT NULL
                        UNION SELECT prediction_run_id FROM harness_history WHERE prediction_run_id IS NOT NULL)""")

    @reads("harness_history")
    def latest_harness_runs(self) -> list[dict[str, Any]]:
        """Document values of the latest two runs of every harness benchmark, model, settings key,
        task, filter and metric (`latest` true for the newest), with each run's settings, as
        `latest_score_runs` gives a spec's (the task with the settings key as mode, the filter as
        format, `task/doc_id` as the item)."""
        return self._latest_two_runs(
            "harness_history",
            "benchmark, model, model_fingerprint, settings_key, task, filter, metric",
            "h.benchmark, h.model, h.model_fingerprint, h.task || ' (' || h.settings_key || ')' AS mode, "
            "h.filter AS prompt_format, "
            "coalesce(h.num_fewshot, 0) AS num_fewshot, h.metric, h.task || '/' || h.doc_id AS prompt_id, "
            "h.task || '/' || h.doc_id AS source_row_id, h.value, h.run_id, h.prediction_run_id, h.settings",
        )

    @reads("harness_runs")
    def load_harness_runs(self) -> dict[str, dict[str, Any]]:
        """Every harness run that computed answers still stored or named, by run id: where it computed them."""
        return {row["run_id"]: row for row in self.rows("SELECT * EXCLUDE (recorded_at) FROM harness_runs")}

    @reads("harness_samples")
    def load_harness_samples(self, benchmark: str, model: str) -> pd.DataFrame:
        return self.frame(
            "SELECT * FROM harness_samples WHERE benchmark = ? AND model = ? ORDER BY task, doc_id, filter",
            [benchmark, model],
        )

    @reads("harness_samples", "harness_answers")
    def load_harness_item_values(self, benchmark: str, models: Sequence[str]) -> list[dict[str, Any]]:
        """Each document's value of each per-document metric (numbers only: IFEval's per-instruction
        lists are left out) for the named roster models, as comparison_rows takes item scores (with
        the settings key), with its filtered answer, reference and the end of its prompt (as
        samples.side_by_side shows them)."""
        return self.rows(
            f"""
            SELECT model, model_fingerprint, settings_key, task AS mode, filter AS prompt_format, 0 AS num_fewshot, metric,
                   task || '/' || doc_id AS prompt_id, task || '/' || doc_id AS source_row_id,
                   prediction_run_id, value, filtered_responses::VARCHAR AS predicted, target AS reference,
                   right(prompt, 160) AS question
            FROM ({_HARNESS_DOCUMENT_VALUES}) WHERE benchmark = ? AND list_contains(?, model)
            ORDER BY model, mode, prompt_id""",
            [benchmark, list(models)],
        )

    @writes("harness_comparisons")
    def replace_harness_comparisons(self, benchmark: str, model: str, comparisons: pd.DataFrame) -> None:
        self.replace_together("benchmark = ? AND model_a = ?", [benchmark, model], harness_comparisons=comparisons)

    @reads("harness_results")
    def load_harness_results(self, benchmark: str | None = None) -> list[dict[str, Any]]:
        """Each task's and group's results, with the settings of the run that computed them (JSON)
        and their key."""
        where, params = ("WHERE benchmark = ?", [benchmark]) if benchmark else ("", [])
        return self.rows(
            f"SELECT * FROM harness_results {where} "
            "ORDER BY benchmark, model, settings_key, is_group DESC, task, metric, filter",
            params,
        )

    @writes("normalized_scores")
    def replace_normalized_scores(self, protocol: str, rows: pd.DataFrame) -> None:
        self.replace_together("protocol = ?", [protocol], normalized_scores=rows)

    @reads("normalized_scores")
    def load_normalized_scores(self, protocol: str) -> pd.DataFrame:
        return self.frame(
            "SELECT * EXCLUDE (computed_at) FROM normalized_scores WHERE protocol = ? "
            "ORDER BY model, benchmark = 'average', benchmark",
            [protocol],
        )

    # --- protocols ------------------------------------------------------------------------------

    @writes("protocol_results")
    def replace_protocol_results(self, protocol: str, results: pd.DataFrame) -> None:
        self.replace_together("protocol = ?", [protocol], protocol_results=results)

    @reads("protocol_results")
    def load_protocol_results(self, protocol: str) -> pd.DataFrame:
        return self.frame(
            "SELECT * FROM protocol_results WHERE protocol = ? ORDER BY model, benchmark = 'average', benchmark",
            [protocol],
        )

    # --- data-quality checks ----------------------------------------------------------------------

    @reads("scores")
    def accuracies_outside_unit_interval(self) -> list[tuple]:
        return self.sql("""
            SELECT benchmark, model, mode, num_fewshot, metric, accuracy FROM scores
            WHERE NOT (accuracy BETWEEN 0 AND 1 AND ci_low BETWEEN 0 AND accuracy
                       AND ci_high BETWEEN accuracy AND 1)""").fetchall()

    def _significant_drops(self, table: str, alpha: float, mode: str = "mode") -> list[tuple]:
        """The comparisons in `table` where a model scored significantly below its baseline or
        predecessor (exact McNemar p < alpha), with the items that flipped from right to wrong (a
        harness comparison's mode is its task, with its settings key, its format its filter)."""
        return self.sql(
            f"""
            SELECT benchmark, model_a, relation, model_b, {mode}, prompt_format, num_fewshot, metric,
                   round(accuracy_a, 4), round(accuracy_b, 4), printf('p=%.3g', mcnemar_p), flipped_to_wrong
            FROM {table} WHERE difference < 0 AND mcnemar_p < ? ORDER BY ALL""",
            [alpha],
        ).fetchall()

    @reads("model_comparisons")
    def significant_drops(self, alpha: float) -> list[tuple]:
        return self._significant_drops("model_comparisons", alpha)

    @reads("harness_comparisons")
    def significant_harness_drops(self, alpha: float) -> list[tuple]:
        return self._significant_drops("harness_comparisons", alpha, "mode || ' (' || settings_key || ')'")

    @reads("predictions")
    def duplicate_predictions(self) -> list[tuple]:
        return self.sql("""
            SELECT model_fingerprint, prompt_id, mode, prompt_format, num_fewshot, count(*) FROM predictions
            GROUP BY ALL HAVING count(*) > 1""").fetchall()

    @reads("ingest_rejections", "prompt_rejections", "prompts")
    def reject_rates_above(self, threshold: float) -> list[tuple]:
        return self.sql(
            """
            WITH counts AS (
                SELECT benchmark, count(*) AS rejected, 0 AS kept FROM ingest_rejections GROUP BY benchmark
                UNION ALL SELECT benchmark, count(*), 0 FROM prompt_rejections GROUP BY benchmark
                UNION ALL SELECT benchmark, 0, count(*) FROM prompts GROUP BY benchmark)
            SELECT benchmark, sum(rejected) AS rejected, sum(kept) AS kept,
                   round(sum(rejected) / (sum(rejected) + sum(kept)), 4) AS reject_rate
            FROM counts GROUP BY benchmark HAVING sum(rejected) / (sum(rejected) + sum(kept)) > ?""",
            [threshold],
        ).fetchall()


def prediction_key(
    model_fingerprint: str, benchmark: str, mode: str, prompt_format: str, num_fewshot: int
) -> dict[str, Any]:
    return dict(zip(PREDICTION_KEY, (model_fingerprint, benchmark, mode, prompt_format, num_fewshot), strict=False))


def predictions_frame(
    model: str, key: Mapping[str, Any], predictions: Sequence[Any], at: Any, run_id: str
) -> pd.DataFrame:
    """Prediction records as rows of `predictions` (label probabilities as key and value lists)."""
    frame = pd.DataFrame(
        [vars(p) for p in predictions],
        columns=[
            "prompt_id",
            "predicted",
            "predicted_norm",
            "label_probabilities",
            "choice_loglikelihoods",
            "output_text",
        ],
    )
    distributions = frame.pop("label_probabilities")
    return frame.assign(
        label_keys=[list(d) if isinstance(d, dict) else None for d in distributions],
        label_values=[list(d.values()) if isinstance(d, dict) else None for d in distributions],
        model=model,
        **key,
        predicted_at=at,
        run_id=run_id,
    ).astype(
        {"predicted": "object", "predicted_norm": "object", "output_text": "object", "choice_loglikelihoods": "object"}
    )
