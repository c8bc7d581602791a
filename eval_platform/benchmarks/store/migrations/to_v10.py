"""9 -> 10. One set of tables for every benchmark and solver.

Version 9 kept a spec's benchmark (predictions, item scores, scores, ...) and a harness benchmark
(harness_samples, harness_results, ...) in two sets of tables. Every row moves into the one set:

- a prediction becomes a sample per filter (its metrics those of its item scores), named by the
  solver its mode and format were (letter, choices, generate; the harness's format: harness) and
  the settings key of its shots; its document is its prompt (`doc`: the raw row as ingested);
- a score becomes a result (MMLU's over all of its subjects is the group `mmlu`), a score's history
  the history's rows, a comparison and a protocol's score the rows of theirs;
- prompts become documents, their harness requests the samples' arguments, the answers of the harness
  the answers, both runs tables the one `evaluation_runs`.

A spec's metrics take the harness's names: `mc2` is truthfulqa_mc2's `acc`, a generated answer's
`strict-match` and `flexible-extract` are `exact_match` under those filters. Answers predicted
before version 10 name no request key, so they are not reused (they are computed again once).
"""

from __future__ import annotations

from typing import Any

from eval_platform.benchmarks.store.migrations.to_v5 import ITEM_SCORES
from eval_platform.common.warehouse import drop_views, existing_tables, is_lake, without_keys

# version 9's views and the tables it no longer has
OLD_VIEWS = ("rejected_rows", "score_lineage", "harness_lineage", "item_lineage", "comparisons", "leaderboard_wide")
OLD_TABLES = (
    "prompts", "prompt_rejections", "harness_requests", "predictions", "prediction_runs", "model_evaluations",
    "item_scores", "scores", "score_history", "model_comparisons", "protocol_results", "harness_answers",
    "harness_samples", "harness_runs", "harness_history", "harness_results", "harness_comparisons",
    "normalized_scores",
)  # fmt: skip
# each spec's harness task in version 9 (MMLU's per subject)
SPEC_TASKS = {
    "arc_easy": "'arc_easy'",
    "arc_challenge": "'arc_challenge'",
    "gsm8k": "'gsm8k'",
    "gsm8k_cot": "'gsm8k_cot'",
    "hellaswag": "'hellaswag'",
    "mmlu": "'mmlu_' || nullif(raw.row_json->>'subject', '')",
    "truthfulqa": "'truthfulqa_mc1'",
    "truthfulqa_mc2": "'truthfulqa_mc2'",
    "winogrande": "'winogrande'",
}
TABLES = {
    "documents": """
        benchmark VARCHAR NOT NULL, document_id VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL,
        row_number INTEGER, task VARCHAR, doc JSON NOT NULL, system_prompt VARCHAR NOT NULL,
        user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL, choices VARCHAR[] NOT NULL,
        real_answer VARCHAR NOT NULL, PRIMARY KEY (benchmark, document_id)""",
    "document_rejections": """
        benchmark VARCHAR NOT NULL, source_row_id VARCHAR, row_json VARCHAR, reason VARCHAR NOT NULL,
        rejected_at TIMESTAMP NOT NULL""",
    "answers": """
        model_fingerprint VARCHAR NOT NULL, request_key VARCHAR NOT NULL, request_type VARCHAR NOT NULL,
        arguments JSON NOT NULL, response JSON NOT NULL, run_id VARCHAR, answered_at TIMESTAMP NOT NULL,
        PRIMARY KEY (model_fingerprint, request_key)""",
    "samples": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
        settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL, doc_id INTEGER NOT NULL,
        filter VARCHAR NOT NULL, document_id VARCHAR, prompt VARCHAR NOT NULL, arguments JSON NOT NULL,
        request_keys VARCHAR[], target VARCHAR, responses JSON, filtered_responses JSON, metrics JSON NOT NULL,
        doc JSON, doc_hash VARCHAR, prompt_hash VARCHAR, fewshot_ids VARCHAR[], run_id VARCHAR,
        PRIMARY KEY (benchmark, model, settings_key, solver, task, doc_id, filter)""",
    "results": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
        settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL, alias VARCHAR,
        is_group BOOLEAN NOT NULL, metric VARCHAR NOT NULL, filter VARCHAR NOT NULL, value DOUBLE, stderr DOUBLE,
        ci_low DOUBLE, ci_high DOUBLE, n INTEGER, num_fewshot INTEGER, higher_is_better BOOLEAN,
        random_baseline DOUBLE, settings JSON NOT NULL, run_id VARCHAR, computed_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, model, settings_key, solver, task, metric, filter)""",
    "evaluations": """
        benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_source VARCHAR NOT NULL,
        model_fingerprint VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL,
        settings JSON NOT NULL, run_id VARCHAR, evaluated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, model, settings_key, solver)""",
    "evaluation_runs": """
        run_id VARCHAR NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
        model_fingerprint VARCHAR NOT NULL, batch_size INTEGER NOT NULL, device VARCHAR NOT NULL,
        device_name VARCHAR NOT NULL, dtype VARCHAR, threads INTEGER, cpu_capability VARCHAR,
        cpu_features VARCHAR NOT NULL, torch_version VARCHAR, transformers_version VARCHAR,
        python_version VARCHAR NOT NULL, platform VARCHAR NOT NULL, recorded_at TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, benchmark)""",
    "history": """
        run_id VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
        model_fingerprint VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL,
        task VARCHAR NOT NULL, filter VARCHAR NOT NULL, metric VARCHAR NOT NULL, doc_id INTEGER NOT NULL,
        document_id VARCHAR, value DOUBLE NOT NULL, num_fewshot INTEGER, settings JSON, prediction_run_id VARCHAR,
        PRIMARY KEY (run_id, benchmark, model, settings_key, solver, task, filter, metric, doc_id)""",
    "comparisons": """
        benchmark VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, solver VARCHAR NOT NULL, task VARCHAR NOT NULL,
        filter VARCHAR NOT NULL, metric VARCHAR NOT NULL, num_fewshot INTEGER, model_a VARCHAR NOT NULL,
        fingerprint_a VARCHAR NOT NULL, model_b VARCHAR NOT NULL, fingerprint_b VARCHAR NOT NULL,
        relation VARCHAR NOT NULL, items INTEGER NOT NULL, accuracy_a DOUBLE NOT NULL, accuracy_b DOUBLE NOT NULL,
        difference DOUBLE NOT NULL, only_a INTEGER NOT NULL, only_b INTEGER NOT NULL, mcnemar_p DOUBLE,
        paired_test VARCHAR NOT NULL, ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, flipped_to_wrong VARCHAR[],
        environment_differences VARCHAR, compared_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, settings_key, solver, task, filter, metric, model_a, model_b)""",
    "protocol_scores": """
        protocol VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR, task VARCHAR NOT NULL,
        benchmark VARCHAR, settings_key VARCHAR, metric VARCHAR, num_fewshot INTEGER, n INTEGER, raw DOUBLE,
        normalized DOUBLE, score DOUBLE, ci_low DOUBLE, ci_high DOUBLE, subtasks INTEGER, status VARCHAR NOT NULL,
        computed_at TIMESTAMP NOT NULL, PRIMARY KEY (protocol, model, task)""",
    "leaderboard": """
        model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
        solver VARCHAR NOT NULL, settings_key VARCHAR NOT NULL, task VARCHAR NOT NULL, metric VARCHAR NOT NULL,
        filter VARCHAR NOT NULL, num_fewshot INTEGER, n INTEGER, value DOUBLE NOT NULL, ci_low DOUBLE,
        ci_high DOUBLE, computed_at TIMESTAMP NOT NULL, PRIMARY KEY (model, benchmark)""",
}


def solver(mode: str, prompt_format: str) -> str:
    """A version 9 prediction mode and format's solver (SQL over columns of those names)."""
    return (
        f"CASE WHEN {prompt_format} = 'harness' THEN 'harness' WHEN {mode} = 'letter' THEN 'letter' "
        f"WHEN {mode} = 'loglikelihood' THEN 'choices' ELSE 'generate' END"
    )


def settings_key(prompt_format: str, shots: str) -> str:
    return f"CASE WHEN {prompt_format} = 'harness' THEN {shots} || '-shot' ELSE '0-shot' END"


def metric_and_filter(mode: str, metric: str) -> str:
    """A version 9 metric as the harness names it, and its filter."""
    return (
        f"CASE WHEN {mode} = 'generate' THEN 'exact_match' WHEN {metric} = 'mc2' THEN 'acc' "
        f"ELSE {metric} END AS metric, "
        f"CASE WHEN {mode} = 'generate' THEN {metric} ELSE 'none' END AS filter"
    )


def spec_task(benchmark: str) -> str:
    """A spec's harness task, from its raw row (`raw.row_json`)."""
    cases = " ".join(f"WHEN '{name}' THEN {task}" for name, task in SPEC_TASKS.items())
    return f"CASE {benchmark} {cases} ELSE {benchmark} END"  # MMLU without a subject: no task


CHAT_PROMPT = (
    "CASE WHEN p.system_prompt <> '' THEN '[system]' || chr(10) || p.system_prompt || chr(10) || chr(10) "
    "ELSE '' END || '[user]' || chr(10) || p.user_prompt"
)


def _create(conn: Any, table: str) -> None:
    columns = TABLES[table]
    conn.execute(f"CREATE TABLE {table} ({without_keys(columns) if is_lake(conn) else columns})")


def _documents(conn: Any, old: set[str]) -> None:
    """Prompts as documents (each prompt's task numbered as the harness numbers a task's documents)."""
    if "prompts" in old:
        conn.execute(f"""
            INSERT INTO documents BY NAME
            SELECT p.benchmark, p.prompt_id AS document_id, p.source_row_id, p.row_number,
                   {spec_task("p.benchmark")} AS task, coalesce(raw.row_json, '{{}}')::JSON AS doc,
                   p.system_prompt, p.user_prompt, p.labels, p.choices, p.real_answer
            FROM prompts p LEFT JOIN raw_rows raw USING (benchmark, source_row_id)""")
    if "prompt_rejections" in old:
        conn.execute("INSERT INTO document_rejections BY NAME SELECT * FROM prompt_rejections")


def _spec_samples(conn: Any, old: set[str]) -> None:
    """Each prediction as a sample per filter, with its item scores as its metrics (a prediction
    never scored: filter `none`, no metrics; an item score whose prediction is gone: no answer; one
    whose prompt is gone: a negative document number)."""
    requests = "harness_requests" in old
    key = "model, model_fingerprint, benchmark, prompt_id, mode, prompt_format, num_fewshot"
    conn.execute(f"""
        CREATE TEMP TABLE spec_samples AS
        WITH scored AS (
            SELECT {key}, filter, json_group_object(metric, value) AS metrics,
                   json_group_object(metric, predicted) AS extracted
            FROM (SELECT * EXCLUDE (metric), {metric_and_filter("mode", "metric")} FROM item_scores) GROUP BY ALL),
        predicted AS (
            SELECT e.model, pr.* EXCLUDE (model) FROM predictions pr
            JOIN model_evaluations e USING (benchmark, model_fingerprint, mode, prompt_format, num_fewshot))
        SELECT *, coalesce(filter, 'none') AS sample_filter FROM predicted FULL JOIN scored USING ({key})""")
    conn.execute(f"""
        INSERT INTO samples BY NAME
        SELECT i.model, i.model_fingerprint, i.benchmark, {settings_key("i.prompt_format", "i.num_fewshot")}
                   AS settings_key, {solver("i.mode", "i.prompt_format")} AS solver,
               coalesce(d.task, i.benchmark) AS task,  -- a chat solver's document of no harness task: its benchmark
               coalesce(d.doc_id, -dense_rank() OVER (PARTITION BY i.benchmark ORDER BY i.prompt_id)) AS doc_id,
               i.sample_filter AS filter, i.prompt_id AS document_id,
               CASE WHEN i.prompt_format = 'harness' THEN coalesce({"h.contexts[1]" if requests else "NULL"}, '')
                    ELSE coalesce({CHAT_PROMPT}, '') END AS prompt,
               coalesce(CASE WHEN i.prompt_format = 'harness' THEN
                         {
        "CASE WHEN len(h.continuations) = 0 THEN json_array(json_array(h.contexts[1], "
        "h.generation_kwargs)) ELSE to_json(list_transform(range(1, len(h.contexts) + 1), "
        "lambda k: [h.contexts[k], h.continuations[k]])) END"
        if requests
        else "NULL::JSON"
    }
                    WHEN i.mode = 'letter'
                        THEN json_array(json_array(p.system_prompt, p.user_prompt, to_json(p.labels)))
                    WHEN i.mode = 'generate' THEN json_array(json_array(p.system_prompt, p.user_prompt))
                    ELSE to_json(list_transform(p.choices, lambda c: [p.system_prompt, p.user_prompt, c])) END,
                        '[]'::JSON) AS arguments,
               NULL::VARCHAR[] AS request_keys, p.real_answer AS target,
               CASE WHEN i.output_text IS NOT NULL THEN to_json([i.output_text])
                    WHEN i.label_probabilities IS NOT NULL THEN to_json([i.label_probabilities])
                    ELSE to_json(i.choice_loglikelihoods) END AS responses,
               to_json(i.extracted) AS filtered_responses, coalesce(i.metrics, '{{}}'::JSON) AS metrics, d.doc,
               {"h.fewshot_ids" if requests else "NULL::VARCHAR[]"} AS fewshot_ids, i.run_id
        FROM spec_samples i
        LEFT JOIN prompts p USING (prompt_id)
        LEFT JOIN (SELECT document_id, task, doc, row_number() OVER (PARTITION BY benchmark, task
                                                                     ORDER BY row_number, source_row_id) - 1 AS doc_id
                   FROM documents) d ON d.document_id = i.prompt_id
        {
        "LEFT JOIN harness_requests h ON h.prompt_id = i.prompt_id AND h.num_fewshot = i.num_fewshot"
        if requests
        else ""
    }""")
    conn.execute("DROP TABLE spec_samples")


def _spec_results(conn: Any) -> None:
    """Each score as a result: a benchmark of one task its task's, MMLU's the group `mmlu`'s."""
    conn.execute(f"""
        INSERT INTO results BY NAME
        SELECT s.benchmark, s.model, s.model_fingerprint, {settings_key("s.prompt_format", "s.num_fewshot")}
                   AS settings_key, {solver("s.mode", "s.prompt_format")} AS solver,
               coalesce(t.task, s.benchmark) AS task, coalesce(t.task, s.benchmark) AS alias,
               t.task IS NULL AS is_group, {metric_and_filter("s.mode", "s.metric")}, s.accuracy AS value,
               NULL AS stderr, s.ci_low, s.ci_high, s.n, s.num_fewshot, TRUE AS higher_is_better,
               NULL AS random_baseline,
               to_json({{'num_fewshot': s.num_fewshot, 'migrated_from': 'scores'}}) AS settings,
               NULL AS run_id, s.scored_at AS computed_at
        FROM scores s
        LEFT JOIN (SELECT benchmark, any_value(task) AS task FROM documents GROUP BY benchmark
                   HAVING count(DISTINCT task) = 1) t USING (benchmark)""")


def _spec_history(conn: Any) -> None:
    conn.execute(f"""
        INSERT INTO history BY NAME
        SELECT h.run_id, h.scored_at, h.benchmark, h.model, h.model_fingerprint,
               {settings_key("h.prompt_format", "h.num_fewshot")} AS settings_key,
               {solver("h.mode", "h.prompt_format")} AS solver, d.task, d.doc_id, h.prompt_id AS document_id,
               {metric_and_filter("h.mode", "h.metric")}, h.value, h.num_fewshot,
               to_json({{'num_fewshot': h.num_fewshot}}) AS settings, h.prediction_run_id
        FROM score_history h
        JOIN (SELECT document_id, task, row_number() OVER (PARTITION BY benchmark, task
                                                           ORDER BY row_number, source_row_id) - 1 AS doc_id
              FROM documents) d ON d.document_id = h.prompt_id""")


def _spec_comparisons(conn: Any) -> None:
    conn.execute(f"""
        INSERT INTO comparisons BY NAME
        SELECT * EXCLUDE (mode, prompt_format, metric),
               {settings_key("prompt_format", "num_fewshot")} AS settings_key,
               {solver("mode", "prompt_format")} AS solver,
               coalesce((SELECT any_value(d.task) FROM documents d WHERE d.benchmark = c.benchmark
                         HAVING count(DISTINCT d.task) = 1), benchmark) AS task,
               {metric_and_filter("mode", "metric")}
        FROM model_comparisons c""")


def _harness(conn: Any, old: set[str]) -> None:
    """A harness benchmark's tables: the same rows, under solver `harness`."""
    if "harness_answers" in old:
        conn.execute("INSERT INTO answers BY NAME SELECT * FROM harness_answers")
    if "harness_samples" in old:
        conn.execute("""
            INSERT INTO samples BY NAME
            SELECT * EXCLUDE (doc, arguments, responses, filtered_responses), 'harness' AS solver, doc::JSON AS doc,
                   arguments::JSON AS arguments, responses::JSON AS responses,
                   filtered_responses::JSON AS filtered_responses
            FROM harness_samples""")
    if "harness_results" in old:
        conn.execute("""
            INSERT INTO results BY NAME
            SELECT *, 'harness' AS solver,
                   CASE WHEN stderr IS NOT NULL THEN value - 1.959964 * stderr END AS ci_low,
                   CASE WHEN stderr IS NOT NULL THEN value + 1.959964 * stderr END AS ci_high
            FROM harness_results""")
        conn.execute("""
            INSERT INTO evaluations BY NAME
            SELECT benchmark, model, split_part(model_fingerprint, '@', 1) AS model_source, model_fingerprint,
                   settings_key, 'harness' AS solver, any_value(settings) AS settings, any_value(run_id) AS run_id,
                   max(computed_at) AS evaluated_at
            FROM harness_results GROUP BY benchmark, model, model_fingerprint, settings_key""")
    if "harness_history" in old:
        conn.execute("INSERT INTO history BY NAME SELECT *, 'harness' AS solver FROM harness_history")
    if "harness_comparisons" in old:
        conn.execute("""
            INSERT INTO comparisons BY NAME
            SELECT * EXCLUDE (mode, prompt_format), 'harness' AS solver, mode AS task, prompt_format AS filter
            FROM harness_comparisons""")


def _evaluations_and_runs(conn: Any, old: set[str]) -> None:
    if "model_evaluations" in old:
        conn.execute(f"""
            INSERT INTO evaluations BY NAME
            SELECT benchmark, model, any_value(model_source) AS model_source, any_value(model_fingerprint)
                       AS model_fingerprint, {settings_key("prompt_format", "num_fewshot")} AS settings_key,
                   {solver("mode", "prompt_format")} AS solver,
                   to_json({{'num_fewshot': any_value(num_fewshot)}}) AS settings, max(run_id) AS run_id,
                   max(evaluated_at) AS evaluated_at
            FROM model_evaluations GROUP BY ALL""")
    runs = [table for table in ("prediction_runs", "harness_runs") if table in old]
    if runs:
        union = " UNION ".join(f"SELECT * FROM {table}" for table in runs)
        conn.execute(
            f"INSERT INTO evaluation_runs BY NAME SELECT * FROM ({union}) QUALIFY "
            "row_number() OVER (PARTITION BY run_id, benchmark ORDER BY recorded_at DESC) = 1"
        )


def _protocols_and_leaderboard(conn: Any, old: set[str]) -> None:
    if "protocol_results" in old:
        conn.execute(f"""
            INSERT INTO protocol_scores BY NAME
            SELECT protocol, model, model_fingerprint, benchmark AS task,
                   CASE WHEN benchmark <> 'average' THEN benchmark END AS benchmark,
                   CASE WHEN benchmark <> 'average' THEN {settings_key("prompt_format", "num_fewshot")} END
                       AS settings_key, CASE WHEN metric = 'mc2' THEN 'acc' ELSE metric END AS metric, num_fewshot,
                   n, accuracy AS raw, NULL AS normalized, accuracy AS score, ci_low, ci_high, NULL AS subtasks,
                   status, computed_at
            FROM protocol_results
            QUALIFY row_number() OVER (PARTITION BY protocol, model, benchmark ORDER BY computed_at DESC) = 1""")
    if "normalized_scores" in old:
        conn.execute("""
            INSERT INTO protocol_scores BY NAME
            SELECT protocol, model, model_fingerprint, benchmark AS task,
                   CASE WHEN benchmark <> 'average' THEN benchmark END AS benchmark, metric, raw, normalized,
                   normalized AS score, subtasks, status, computed_at
            FROM normalized_scores""")
    if "leaderboard_v9" in old:
        conn.execute(f"""
            INSERT INTO leaderboard BY NAME
            SELECT model, model_fingerprint, benchmark,
                   CASE WHEN mode = 'harness' THEN 'harness' ELSE {solver("mode", "prompt_format")} END AS solver,
                   CASE WHEN mode = 'harness' THEN coalesce(num_fewshot || '-shot', 'default shots')
                        ELSE {settings_key("prompt_format", "num_fewshot")} END AS settings_key,
                   benchmark AS task,
                   CASE WHEN mode = 'harness' THEN split_part(metric, ',', 1) WHEN mode = 'generate'
                        THEN 'exact_match' WHEN metric = 'mc2' THEN 'acc' ELSE metric END AS metric,
                   CASE WHEN mode = 'harness' THEN coalesce(nullif(split_part(metric, ',', 2), ''), 'none')
                        WHEN mode = 'generate' THEN metric ELSE 'none' END AS filter,
                   num_fewshot, n, accuracy AS value, ci_low, ci_high, computed_at
            FROM leaderboard_v9
            QUALIFY row_number() OVER (PARTITION BY model, benchmark ORDER BY mode = 'harness') = 1""")


def migrate(conn: Any) -> None:
    drop_views(conn, OLD_VIEWS)
    old = existing_tables(conn)
    if "leaderboard" in old:  # version 9's, kept aside in a temporary table (on a lake, a table renamed
        # and then dropped in one transaction fails its commit: DuckLake 0.3, DuckDB 1.4.4)
        conn.execute("CREATE TEMP TABLE leaderboard_v9 AS SELECT * FROM leaderboard")
        conn.execute("DROP TABLE leaderboard")
        old = existing_tables(conn) | {"leaderboard_v9"}
    for table in TABLES:
        if table not in old:
            _create(conn, table)
    _documents(conn, old)
    if {"predictions", "model_evaluations"} <= old:
        if "item_scores" not in old:  # predictions of a warehouse never scored since version 5
            conn.execute(f"CREATE TEMP TABLE item_scores ({without_keys(ITEM_SCORES)})")
        _spec_samples(conn, old)
    if "scores" in old:
        _spec_results(conn)
    if "score_history" in old:
        _spec_history(conn)
    if "model_comparisons" in old:
        _spec_comparisons(conn)
    _harness(conn, old)
    _evaluations_and_runs(conn, old)
    _protocols_and_leaderboard(conn, old)
    for table in OLD_TABLES:
        if table in old:
            conn.execute(f"DROP TABLE {table}")
    conn.execute("DROP TABLE IF EXISTS temp.item_scores")
    conn.execute("DROP TABLE IF EXISTS temp.leaderboard_v9")
