"""The benchmark domain's tables (schema version 11), one set for every benchmark and solver.

Inputs (a dataset's): its raw rows and few-shot rows, its documents, and every rejection with its
reason. Evaluation: every answer a model gave (by request, reused by any later request of the same
model fingerprint), each document's sample and each task's result per roster model, settings key
and solver, where each run computed its answers (an imported evaluation: the file and line each
sample came from, and the samples that matched no document), each run's per-document values (the regression
watch's history), comparisons between roster models, the protocols' scores and the leaderboard.
Views are SQL files beside this one (`views/`), and the wide leaderboard is built from the declared
benchmarks and protocols.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import duckdb

from eval_platform.benchmarks.leaderboard import FLAGGED_CUT_AT_BUDGET
from eval_platform.common.warehouse import Store
from eval_platform.environment import DeclarationFolders

VERSION = 11
KEPT_RUNS = 5  # runs per benchmark, model, settings key and solver kept in `history`

REJECTIONS = """
    benchmark VARCHAR NOT NULL, source_row_id VARCHAR, row_json VARCHAR, reason VARCHAR NOT NULL,
    rejected_at TIMESTAMP NOT NULL"""
SOURCE_REJECTIONS = "source VARCHAR, line INTEGER, " + REJECTIONS
# where a run computed its answers (see common/reproducibility.py)
RUN_ENVIRONMENTS = """
    run_id VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, batch_size INTEGER NOT NULL, device VARCHAR NOT NULL,
    device_name VARCHAR NOT NULL, dtype VARCHAR, threads INTEGER, cpu_capability VARCHAR,
    cpu_features VARCHAR NOT NULL, torch_version VARCHAR, transformers_version VARCHAR,
    python_version VARCHAR NOT NULL, platform VARCHAR NOT NULL, recorded_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, benchmark)"""

TABLES = {
    # --- a dataset's inputs ---
    "raw_rows": """
        benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER NOT NULL, line INTEGER,
        row_json JSON NOT NULL, source VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, source_row_id)""",
    "ingest_rejections": SOURCE_REJECTIONS,
    "fewshot_rows": """
        benchmark VARCHAR NOT NULL, row_number INTEGER NOT NULL, source_row_id VARCHAR NOT NULL, line INTEGER,
        row_json JSON NOT NULL, source VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, row_number)""",
    "fewshot_rejections": SOURCE_REJECTIONS,
    # each row that parses: the row as its harness task reads it (`doc`) and its chat prompt
    "documents": """
        benchmark VARCHAR NOT NULL, document_id VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL,
        row_number INTEGER, task VARCHAR, doc JSON NOT NULL, system_prompt VARCHAR NOT NULL,
        user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL, choices VARCHAR[] NOT NULL,
        real_answer VARCHAR NOT NULL, PRIMARY KEY (benchmark, document_id)""",
    "document_rejections": REJECTIONS,
    # --- evaluations, of every benchmark and solver ---
    # every request's answer per model fingerprint, reused by any solver that asks the same request again
    "answers": """
        model_fingerprint VARCHAR NOT NULL, request_key VARCHAR NOT NULL, request_type VARCHAR NOT NULL,
        arguments JSON NOT NULL, response JSON NOT NULL, run_id VARCHAR, answered_at TIMESTAMP NOT NULL,
        ended VARCHAR, PRIMARY KEY (model_fingerprint, request_key)""",
    # each document under each filter: the exact prompt, requests, answers, what the filter took, metrics
    "samples": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
        settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL, doc_id INTEGER NOT NULL,
        filter VARCHAR NOT NULL, document_id VARCHAR, prompt VARCHAR NOT NULL, arguments JSON NOT NULL,
        request_keys VARCHAR[], target VARCHAR, responses JSON, filtered_responses JSON, metrics JSON NOT NULL,
        doc JSON, doc_hash VARCHAR, prompt_hash VARCHAR, fewshot_ids VARCHAR[], run_id VARCHAR,
        PRIMARY KEY (benchmark, model, settings_key, solver, task, doc_id, filter)""",
    # each answer of a document answered k times (a sampled task's repeats), filtered and scored alone
    "sample_scores": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
        settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL, doc_id INTEGER NOT NULL,
        filter VARCHAR NOT NULL, sample INTEGER NOT NULL, request_key VARCHAR, answer VARCHAR, metric VARCHAR NOT NULL,
        value DOUBLE NOT NULL, run_id VARCHAR,
        PRIMARY KEY (benchmark, model, settings_key, solver, task, doc_id, filter, sample, metric)""",
    # each task's (and group's) aggregate of each metric and filter
    "results": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
        settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL, alias VARCHAR,
        is_group BOOLEAN NOT NULL, metric VARCHAR NOT NULL, filter VARCHAR NOT NULL, value DOUBLE, stderr DOUBLE,
        ci_low DOUBLE, ci_high DOUBLE, n INTEGER, num_fewshot INTEGER, higher_is_better BOOLEAN,
        random_baseline DOUBLE, settings JSON NOT NULL, run_id VARCHAR, computed_at TIMESTAMP NOT NULL,
        cut_at_budget DOUBLE, PRIMARY KEY (benchmark, model, settings_key, solver, task, metric, filter)""",
    # which roster entry was evaluated with which fingerprint, settings and solver, and when
    "evaluations": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_source VARCHAR NOT NULL,
        model_fingerprint VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL,
        settings JSON NOT NULL, run_id VARCHAR, evaluated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, model, settings_key, solver)""",
    "evaluation_runs": RUN_ENVIRONMENTS,
    # an imported evaluation's samples: the file and line each came from, and its doc_id there
    "import_lineage": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL,
        task VARCHAR NOT NULL, doc_id INTEGER NOT NULL, filter VARCHAR NOT NULL, source VARCHAR NOT NULL,
        line INTEGER NOT NULL, source_doc_id INTEGER NOT NULL, imported_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, model, settings_key, solver, task, doc_id, filter)""",
    # an imported sample that matches no document of the warehouse, with its reason
    "import_rejections": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, source VARCHAR NOT NULL, line INTEGER NOT NULL,
        task VARCHAR NOT NULL, source_doc_id INTEGER NOT NULL, filter VARCHAR NOT NULL, reason VARCHAR NOT NULL,
        sample_excerpt VARCHAR NOT NULL, rejected_at TIMESTAMP NOT NULL""",
    # each run's per-document values, for the regression watch (the latest KEPT_RUNS runs)
    "history": """
        run_id VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
        model_fingerprint VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL,
        task VARCHAR NOT NULL, filter VARCHAR NOT NULL, metric VARCHAR NOT NULL, doc_id INTEGER NOT NULL,
        document_id VARCHAR, value DOUBLE NOT NULL, num_fewshot INTEGER, settings JSON, prediction_run_id VARCHAR,
        PRIMARY KEY (run_id, benchmark, model, settings_key, solver, task, filter, metric, doc_id)""",
    # a roster model against its baseline and predecessor, per settings key, solver, task, filter and metric
    "comparisons": """
        benchmark VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL,
        filter VARCHAR NOT NULL, metric VARCHAR NOT NULL, num_fewshot INTEGER, model_a VARCHAR NOT NULL,
        fingerprint_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, fingerprint_b VARCHAR NOT NULL,
        relation VARCHAR NOT NULL, items INTEGER NOT NULL, accuracy_a DOUBLE NOT NULL, accuracy_b DOUBLE NOT NULL,
        difference DOUBLE NOT NULL, only_a INTEGER NOT NULL, only_b INTEGER NOT NULL, mcnemar_p DOUBLE,
        paired_test VARCHAR NOT NULL, ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, flipped_to_wrong VARCHAR[],
        environment_differences VARCHAR, compared_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, settings_key, solver, task, filter, metric, model_a, model_b)""",
    # each protocol's tasks per roster model (a score, or why it is missing) and its average
    "protocol_scores": """
        protocol VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR, task VARCHAR NOT NULL,
        benchmark VARCHAR, settings_key VARCHAR, metric VARCHAR, num_fewshot INTEGER, n INTEGER, raw DOUBLE,
        normalized DOUBLE, score DOUBLE, ci_low DOUBLE, ci_high DOUBLE, subtasks INTEGER, status VARCHAR NOT NULL,
        computed_at TIMESTAMP NOT NULL, PRIMARY KEY (protocol, model, task)""",
    # each roster model's headline per benchmark
    "leaderboard": """
        model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
        solver VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, task VARCHAR NOT NULL, metric VARCHAR NOT NULL,
        filter VARCHAR NOT NULL, num_fewshot INTEGER, n INTEGER, value DOUBLE NOT NULL, ci_low DOUBLE,
        ci_high DOUBLE, computed_at TIMESTAMP NOT NULL, cut_at_budget DOUBLE, PRIMARY KEY (model, benchmark)""",
}

VIEW_FOLDER = Path(__file__).with_name("views")
VIEWS = {path.stem: path.read_text(encoding="utf-8") for path in sorted(VIEW_FOLDER.glob("*.sql"))}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# What a headline holds, as leaderboard.measured_label says it: `0-shot acc_norm by letter, first 5 documents`
MEASURED = """concat_ws(', ',
    concat(CASE WHEN l.num_fewshot IS NULL THEN '' ELSE l.num_fewshot || '-shot ' END, l.metric,
           CASE WHEN l.filter = 'none' THEN '' ELSE ',' || l.filter END,
           CASE WHEN l.solver = 'harness' THEN '' ELSE ' by ' || l.solver END),
    nullif(regexp_replace(l.settings_key, '^([0-9]+-shot|default shots)(, )?', ''), ''))"""


def leaderboard_wide(benchmarks: Iterable[str], protocols: Iterable[tuple[str, Iterable[str]]]) -> str:
    """One row per model: each declared benchmark's headline and what it holds (`<benchmark> measured`:
    its shots, metric, solver and settings; `<benchmark> cut at the budget`: the share of its answers cut
    at the budget, where more than 5%), and each protocol's task scores, its average and the average's
    status (complete, partial, or not measured)."""
    columns = [
        column
        for name in benchmarks
        for column in (
            f"max(l.value) FILTER (WHERE l.benchmark = {_literal(name)}) AS {_quoted(name)}",
            f"any_value({MEASURED}) FILTER (WHERE l.benchmark = {_literal(name)}) AS {_quoted(name + ' measured')}",
            f"max(l.cut_at_budget) FILTER (WHERE l.benchmark = {_literal(name)} AND l.cut_at_budget > "
            f"{FLAGGED_CUT_AT_BUDGET}) AS {_quoted(name + ' cut at the budget')}",
        )
    ]
    for protocol, tasks in protocols:

        def cell(task: str, column: str, name: str, protocol: str = protocol) -> str:
            return (
                f"(SELECT any_value(p.{column}) FROM protocol_scores p WHERE p.model = l.model "
                f"AND p.protocol = {_literal(protocol)} AND p.task = {_literal(task)}) AS {_quoted(name)}"
            )

        columns += [cell(task, "score", f"{protocol}__{task}") for task in tasks]
        columns += [cell("average", "score", protocol), cell("average", "status", f"{protocol}_status")]
    return f"SELECT {', '.join(['l.model', *columns])} FROM leaderboard l GROUP BY l.model"


def _leaderboard_wide(declarations: DeclarationFolders) -> str:
    from eval_platform.benchmarks.declarations import declared_benchmarks
    from eval_platform.benchmarks.protocols import declared_protocols

    protocols = declared_protocols(declarations.protocols)
    return leaderboard_wide(
        declared_benchmarks(declarations.benchmarks),
        [(name, [task.name for task in protocol.tasks]) for name, protocol in protocols.items()],
    )


def _with_endings(conn: duckdb.DuckDBPyConnection) -> None:
    """Version 10 to 11: why each generation ended (`answers.ended`, unknown for those stored
    before) and each result's share of answers cut at the budget."""
    for table, column in (("answers", "ended VARCHAR"), ("results", "cut_at_budget DOUBLE"),
                          ("leaderboard", "cut_at_budget DOUBLE")):  # fmt: skip
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


class BenchmarkSchema(Store):
    """The benchmark tables and their views (the store classes read and write them)."""

    name = "benchmarks"
    version = VERSION
    tables = TABLES
    views = VIEWS
    # one row per model, a column per declared benchmark and protocol task
    dynamic_views = {"leaderboard_wide": _leaderboard_wide}
    migrations = {10: _with_endings}
