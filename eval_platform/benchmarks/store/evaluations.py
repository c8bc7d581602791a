"""Evaluations, of every benchmark and solver: answers, samples, results, runs and history."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import pandas as pd

from eval_engine import Generation
from eval_platform.benchmarks.comparison import DocumentValue
from eval_platform.benchmarks.imports import IMPORTED, ImportedEvaluation, KnownDocument, content_key
from eval_platform.benchmarks.inspect_logs import ExportedEvaluation, ExportedResult, ExportedSample
from eval_platform.benchmarks.records import Answer, Evaluation, Sample, as_json
from eval_platform.benchmarks.store.schema import KEPT_RUNS, BenchmarkSchema
from eval_platform.common.warehouse import reads, utc_now, writes

# one evaluation of a solver: (benchmark, model, settings key, solver)
SCOPE_COLUMNS = ("benchmark", "model", "settings_key", "solver")
SCOPE = " AND ".join(f"{column} = ?" for column in SCOPE_COLUMNS)
SAMPLES_AT_ONCE = 500  # samples made into one frame to insert (a five-shot document's JSON: tens of KB)


@dataclass(frozen=True)
class EvaluationRun:
    """Which roster entry an evaluation was for, with which model and settings, in which run, and
    where the run computed (its `evaluation_runs` row)."""

    benchmark: str
    model: str  # the roster entry
    model_source: str  # the model's name (local/..., a litellm string)
    model_fingerprint: str
    run_id: str
    settings: Mapping[str, object]
    environment: Mapping[str, object]


def _scope(run: EvaluationRun, evaluation: Evaluation) -> dict[str, str]:
    return {
        "benchmark": run.benchmark,
        "model": run.model,
        "model_fingerprint": run.model_fingerprint,
        "settings_key": evaluation.settings_key,
        "solver": evaluation.solver,
        "run_id": run.run_id,
    }


def _samples_frame(scope: Mapping[str, str], samples: Sequence[Sample]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                **scope,
                **{name: getattr(s, name) for name in ("task", "doc_id", "filter", "document_id", "prompt", "target")},
                **{name: as_json(getattr(s, name)) for name in ("arguments", "responses", "filtered_responses")},
                "metrics": as_json(s.metrics),
                "doc": as_json(s.doc),
                "request_keys": s.request_keys,
                "doc_hash": s.doc_hash,
                "prompt_hash": s.prompt_hash,
                "fewshot_ids": s.fewshot_ids,
            }
            for s in samples
        ]
    )


def _sample_scores_frame(scope: Mapping[str, str], samples: Sequence[Sample]) -> pd.DataFrame:
    """Each answer of the samples answered k times, one row per metric: its index, key, what the
    filter took out of it and its value."""
    return pd.DataFrame(
        [
            {
                **scope,
                "task": s.task,
                "doc_id": s.doc_id,
                "filter": s.filter,
                "sample": index,
                "request_key": s.request_keys[index] if index < len(s.request_keys) else None,
                "answer": (s.sample_answers or [None] * (index + 1))[index],
                "metric": metric,
                "value": value,
            }
            for s in samples
            for index, metrics in enumerate(s.sample_metrics or [])
            for metric, value in metrics.items()
        ],
        columns=[*scope, "task", "doc_id", "filter", "sample", "request_key", "answer", "metric", "value"],
    )


def _run_row(run: EvaluationRun, now: datetime) -> pd.DataFrame:
    """The run's `evaluation_runs` row: where it computed its answers."""
    identity = {"run_id": run.run_id, "benchmark": run.benchmark, "model": run.model}
    return pd.DataFrame(
        [{**identity, "model_fingerprint": run.model_fingerprint, **run.environment, "recorded_at": now}]
    )


class EvaluationStore(BenchmarkSchema):
    @reads("answers")
    def load_answers(self, model_fingerprint: str) -> dict[str, object]:
        """Every stored answer of the model fingerprint, by request key (a generation with why it ended)."""
        return {
            key: json.loads(response) if ended is None else Generation(json.loads(response), ended)
            for key, response, ended in self.sql(
                "SELECT request_key, response, ended FROM answers WHERE model_fingerprint = ?", [model_fingerprint]
            ).fetchall()
        }

    @writes("answers", "evaluation_runs")
    def keep_answers(self, run: EvaluationRun, chunk: Sequence[tuple[str, Answer]]) -> None:
        """A chunk of the answers a run computed, by request key (added to, or replacing, the
        fingerprint's stored ones), with the row saying where the run computed them, in one
        transaction: kept as they come, so a run killed later loses none of them."""
        now = utc_now()
        answers = pd.DataFrame(
            {
                "model_fingerprint": run.model_fingerprint,
                "request_key": [key for key, _ in chunk],
                "request_type": [answer.request_type for _, answer in chunk],
                "arguments": [as_json(answer.arguments) for _, answer in chunk],
                "response": [as_json(answer.response) for _, answer in chunk],
                "ended": [answer.ended for _, answer in chunk],
                "run_id": run.run_id,
                "answered_at": now,
            }
        )
        with self.registered("computed", answers[["model_fingerprint", "request_key"]]):
            self.sql(
                "DELETE FROM answers WHERE (model_fingerprint, request_key) IN "
                "(SELECT (model_fingerprint, request_key) FROM computed)"
            )
        self.insert("answers", answers)
        self.replace("evaluation_runs", _run_row(run, now), "run_id = ? AND benchmark = ?", [run.run_id, run.benchmark])

    @writes("samples", "sample_scores", "results", "evaluations", "evaluation_runs", "history")
    @reads("document_values", "answers")
    def save_evaluation(self, run: EvaluationRun, evaluation: Evaluation, keep_runs: int = KEPT_RUNS) -> None:
        """One solver's evaluation of a benchmark for a roster entry, its answers kept already
        (`keep_answers`): the samples (a sampled document's answers each scored, in `sample_scores`)
        and results under its settings key and solver, replacing
        those of the same key and solver (others kept), in one transaction. Each document's values
        are also kept as this run's history (the latest `keep_runs` runs per benchmark, model, key
        and solver), for the regression watch; a run that no answer or history names any more goes."""
        now, columns = utc_now(), _scope(run, evaluation)
        scope = [run.benchmark, run.model, evaluation.settings_key, evaluation.solver]
        self.sql(f"DELETE FROM samples WHERE {SCOPE}", scope)
        self.sql(f"DELETE FROM sample_scores WHERE {SCOPE}", scope)
        for batch in batches(evaluation.samples, SAMPLES_AT_ONCE):  # their JSON texts a batch at a time
            self.insert("samples", _samples_frame(columns, batch))
            self.insert("sample_scores", _sample_scores_frame(columns, batch))
        settings = as_json(run.settings)
        results = [{**columns, **r.__dict__, "settings": settings, "computed_at": now} for r in evaluation.results]
        self.replace("results", pd.DataFrame(results), SCOPE, scope)
        evaluations = {**columns, "model_source": run.model_source, "settings": settings, "evaluated_at": now}
        self.replace("evaluations", pd.DataFrame([evaluations]), SCOPE, scope)
        self.sql(f"DELETE FROM history WHERE {SCOPE} AND run_id = ?", [*scope, run.run_id])
        self.sql(
            f"""
            INSERT INTO history BY NAME
            SELECT ? AS run_id, ? AS scored_at, benchmark, model, model_fingerprint, settings_key, solver, task,
                   filter, metric, doc_id, document_id, value, ? AS num_fewshot, ?::JSON AS settings, prediction_run_id
            FROM document_values WHERE {SCOPE}""",
            [run.run_id, now, _shots(evaluation), as_json(run.settings), *scope],
        )
        self.sql(
            f"""
            DELETE FROM history WHERE {SCOPE} AND run_id NOT IN (
                SELECT run_id FROM history WHERE {SCOPE} GROUP BY run_id ORDER BY max(scored_at) DESC LIMIT ?)""",
            [*scope, *scope, keep_runs],
        )
        self.sql("""
            DELETE FROM evaluation_runs WHERE run_id NOT IN (
                SELECT run_id FROM answers WHERE run_id IS NOT NULL
                UNION SELECT prediction_run_id FROM history WHERE prediction_run_id IS NOT NULL
                UNION SELECT run_id FROM samples WHERE run_id IS NOT NULL)""")

    @writes(
        "import_lineage", "import_rejections", "samples", "sample_scores", "results", "evaluations",
        "evaluation_runs", "history",
    )  # fmt: skip
    def save_import(self, run: EvaluationRun, imported: ImportedEvaluation) -> None:
        """An imported evaluation (`save_evaluation`) with the file and line of each of its samples,
        and the samples that matched no document, replacing the import's earlier ones on the
        benchmark, in one transaction."""
        self.save_evaluation(run, imported.evaluation)
        now, evaluation = utc_now(), imported.evaluation
        scope = [run.benchmark, run.model, evaluation.settings_key, evaluation.solver]
        lineage = [
            {"task": task, "doc_id": doc_id, "filter": filter_name, "source": source.file, "line": source.line,
             "source_doc_id": source.doc_id}
            for (task, doc_id, filter_name), source in imported.lineage.items()
        ]  # fmt: skip
        self.replace(
            "import_lineage",
            self.rows_frame("import_lineage", lineage, **dict(zip(SCOPE_COLUMNS, scope, strict=True)), imported_at=now),
            SCOPE,
            scope,
        )
        rejections = [
            {"source": r.file, "line": r.line, "task": r.task, "source_doc_id": r.doc_id, "filter": r.filter,
             "reason": r.reason, "sample_excerpt": r.sample_excerpt}
            for r in imported.rejections
        ]  # fmt: skip
        self.replace(
            "import_rejections",
            self.rows_frame("import_rejections", rejections, benchmark=run.benchmark, model=run.model, rejected_at=now),
            "benchmark = ? AND model = ?",
            [run.benchmark, run.model],
        )

    @reads("samples", "documents")
    def known_documents(self, benchmark: str) -> dict[tuple[str, str], list[KnownDocument]]:
        """The benchmark's documents the warehouse knows, by (task, content key), several where
        documents are alike: those a harness evaluation here scored (numbered as it numbered them,
        with its reference), else a dataset's documents (numbered in source order within their task,
        as the harness solver numbers them)."""
        rows = self.sql(
            """
            SELECT 0 AS source, task, doc_id, document_id, doc::VARCHAR, target FROM samples
            WHERE benchmark = ? AND solver = 'harness' AND doc IS NOT NULL AND NOT starts_with(model_fingerprint, ?)
            QUALIFY row_number() OVER (PARTITION BY task, doc_id ORDER BY model, settings_key) = 1
            UNION ALL
            SELECT 1, task, (row_number() OVER (PARTITION BY task ORDER BY row_number, source_row_id) - 1)::INTEGER,
                   document_id, doc::VARCHAR, NULL FROM documents WHERE benchmark = ? AND task IS NOT NULL
            ORDER BY source, task, doc_id""",
            [benchmark, IMPORTED, benchmark],
        ).fetchall()
        known: dict[tuple[str, str], list[KnownDocument]] = {}
        numbered: set[tuple[str, int]] = set()
        for _, task, doc_id, document_id, doc, target in rows:
            if (task, doc_id) not in numbered:  # a scored document's own numbering first
                numbered.add((task, doc_id))
                known.setdefault((task, content_key(json.loads(doc))), []).append(
                    KnownDocument(task, doc_id, document_id, target)
                )
        return known

    @reads("samples")
    def known_prompts(self, benchmark: str) -> dict[str, list[KnownDocument]]:
        """The benchmark's documents by the prompts the warehouse's own evaluations gave them and
        their references (`prompt_key`), several where documents are alike."""
        rows = self.sql(  # the key as `prompt_key` makes it, computed here: no prompt leaves DuckDB
            """
            SELECT DISTINCT task, doc_id, document_id, sha256(prompt || chr(0) || coalesce(target, '')) FROM samples
            WHERE benchmark = ? AND NOT starts_with(model_fingerprint, ?) ORDER BY task, doc_id""",
            [benchmark, IMPORTED],
        ).fetchall()
        known: dict[str, list[KnownDocument]] = {}
        for task, doc_id, document_id, key in rows:
            alike = known.setdefault(key, [])
            if all((d.task, d.doc_id) != (task, doc_id) for d in alike):
                alike.append(KnownDocument(task, doc_id, document_id, None))
        return known

    @reads("evaluations")
    def imported_sources(self) -> dict[str, str]:
        """Each imported model's source in short: `imported: <tool> <version>, <results file's name>`."""
        return dict(
            self.sql(
                """
                SELECT model, 'imported: ' || string_agg(DISTINCT concat(settings->>'tool', ' ',
                       settings->>'tool_version', ', ', regexp_extract(settings->>'results_file', '[^/]*$')), '; ')
                FROM evaluations WHERE starts_with(model_fingerprint, ?) GROUP BY model""",
                [IMPORTED],
            ).fetchall()
        )

    @reads("evaluations", "results")
    def exported_evaluations(self, benchmark: str, model: str) -> list[ExportedEvaluation]:
        """The roster model's evaluations of the benchmark (one per settings key and solver), each
        with its results, as an export writes them."""
        evaluations = self.rows(
            "SELECT * REPLACE (settings::VARCHAR AS settings) FROM evaluations WHERE benchmark = ? AND model = ? "
            "ORDER BY settings_key, solver",
            [benchmark, model],
        )
        exported = []
        for row in evaluations:
            scope = [row[column] for column in SCOPE_COLUMNS]
            results = self.rows(
                f"SELECT task, is_group, metric, filter, value, stderr, ci_low, ci_high, n, num_fewshot FROM results "
                f"WHERE {SCOPE} ORDER BY is_group DESC, task, metric, filter",
                scope,
            )
            keys = ("benchmark", "model", "model_source", "model_fingerprint", "settings_key", "solver", "run_id")
            exported.append(ExportedEvaluation(
                **{key: row[key] for key in keys}, settings=json.loads(row["settings"]),
                evaluated_at=row["evaluated_at"], results=cast("list[ExportedResult]", results),
            ))  # fmt: skip
        return exported

    @reads("samples", "sample_scores")
    def exported_samples(
        self, evaluation: ExportedEvaluation, at_once: int = SAMPLES_AT_ONCE
    ) -> Iterator[ExportedSample]:
        """The evaluation's samples in order of task, doc_id and filter, fetched `at_once` at a time
        from one query (run here, read as they are iterated), each with its answers' scores
        (`answer_scores`: sample, answer, metric, value) where it was answered several times."""
        scope = [getattr(evaluation, column) for column in SCOPE_COLUMNS]
        cursor = self.sql(
            f"""
            WITH scored AS (
                SELECT task, doc_id, filter,
                       list({{'sample': sample, 'answer': answer, 'metric': metric, 'value': value}}
                            ORDER BY sample, metric) AS answer_scores
                FROM sample_scores WHERE {SCOPE} GROUP BY ALL)
            SELECT s.task, s.doc_id, s.filter, s.document_id, s.prompt, s.target, s.request_keys,
                   s.arguments::VARCHAR AS arguments, s.responses::VARCHAR AS responses,
                   s.filtered_responses::VARCHAR AS filtered_responses, s.metrics::VARCHAR AS metrics,
                   s.doc::VARCHAR AS doc, a.answer_scores
            FROM samples s LEFT JOIN scored a USING (task, doc_id, filter)
            WHERE {" AND ".join(f"s.{column} = ?" for column in SCOPE_COLUMNS)}
            ORDER BY s.task, s.doc_id, s.filter""",
            [*scope, *scope],
        )
        columns = [d[0] for d in cursor.description]

        def fetched() -> Iterator[ExportedSample]:  # the query's columns, as ExportedSample names them
            while chunk := cursor.fetchmany(at_once):
                yield from (cast("ExportedSample", dict(zip(columns, row, strict=True))) for row in chunk)

        return fetched()

    @reads("results")
    def load_results(self, benchmark: str | None = None) -> list[dict[str, Any]]:
        """Each task's and group's results, with the settings of the run that computed them (JSON)."""
        where, params = ("WHERE benchmark = ?", [benchmark]) if benchmark else ("", [])
        return self.rows(
            f"SELECT * FROM results {where} "
            "ORDER BY benchmark, model, settings_key, solver, is_group DESC, task, metric, filter",
            params,
        )

    @reads("results")
    def result_table(self, benchmarks: Sequence[str] | None = None) -> pd.DataFrame:
        """Every result (of `benchmarks`, where given), one line each, for a console summary."""
        return self.frame(
            """
            SELECT benchmark, solver || ' / ' || settings_key || ' / ' || task || ' / ' || metric
                       || CASE WHEN filter <> 'none' THEN ',' || filter ELSE '' END AS result,
                   model, n, round(value, 3) AS value,
                   CASE WHEN ci_low IS NOT NULL AND NOT isnan(ci_low)
                        THEN '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' ELSE '' END AS ci95
            FROM results WHERE ? IS NULL OR list_contains(?, benchmark) ORDER BY benchmark, result, model""",
            [None if benchmarks is None else list(benchmarks)] * 2,
        )

    @reads("results")
    def sampled_results(self) -> list[dict[str, Any]]:
        """The results of documents answered k times (`<metric> pass@k`, `maj@k`, `mean@n`) per
        benchmark, model, settings key, task, metric and filter, groups' first."""
        return self.rows(
            """
            SELECT benchmark, model, settings_key, task, filter, split_part(metric, ' ', 1) AS metric,
                   split_part(metric, ' ', 2) AS reducer, value, ci_low, ci_high, n
            FROM results WHERE regexp_matches(metric, ' (pass|maj|mean)@[0-9]+$')
            ORDER BY benchmark, model, settings_key, is_group DESC, task, filter, metric,
                     split_part(reducer, '@', 1) DESC, split_part(reducer, '@', 2)::INTEGER"""
        )

    @reads("evaluation_runs")
    def load_evaluation_runs(self) -> dict[str, dict[str, object]]:
        """Every run that computed answers still stored or named, by run id: where it computed them."""
        return {
            row["run_id"]: row for row in self.rows("SELECT * EXCLUDE (recorded_at, benchmark) FROM evaluation_runs")
        }

    @reads("document_values", "documents")
    def load_document_values(self, benchmark: str, models: Sequence[str]) -> list[DocumentValue]:
        """Each document's value of each numeric per-document metric for the named roster models,
        with what names the document (`item`: a dataset's source row id, else task/doc_id), its
        answer, reference and the end of its prompt."""
        rows = self.rows(
            """
            SELECT v.model, v.model_fingerprint, v.settings_key, v.solver, v.task, v.filter, v.metric, v.doc_id,
                   coalesce(d.source_row_id, v.task || '/' || v.doc_id) AS item, v.prediction_run_id, v.value,
                   v.filtered_responses::VARCHAR AS predicted, v.target AS reference, right(v.prompt, 160) AS question
            FROM document_values v LEFT JOIN documents d ON d.benchmark = v.benchmark AND d.document_id = v.document_id
            WHERE v.benchmark = ? AND list_contains(?, v.model)
            ORDER BY v.model, v.settings_key, v.solver, v.task, v.doc_id""",
            [benchmark, list(models)],
        )
        return cast("list[DocumentValue]", rows)  # the query's columns, as DocumentValue names them

    @reads("history", "documents")
    def latest_runs(self) -> list[dict[str, Any]]:
        """Document values of the latest two runs of every benchmark, model, key, solver, task,
        filter and metric (`latest` true for the newest), with each run's settings and what names
        each document (`item`: a dataset's source row id, else task/doc_id)."""
        key = "benchmark, model, model_fingerprint, settings_key, solver, task, filter, metric"
        return self.rows(f"""
            WITH per_run AS (SELECT {key}, run_id, max(scored_at) AS last_scored FROM history GROUP BY ALL),
            runs AS (SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY last_scored DESC) AS recency
                     FROM per_run)
            SELECT h.* REPLACE (h.settings::VARCHAR AS settings), r.recency = 1 AS latest,
                   coalesce(d.source_row_id, h.task || '/' || h.doc_id) AS item
            FROM history h JOIN runs r USING ({key}, run_id)
            LEFT JOIN documents d ON d.benchmark = h.benchmark AND d.document_id = h.document_id
            WHERE r.recency <= 2""")

    @reads("samples")
    def load_samples(self, benchmark: str, model: str, limit: int | None = None) -> pd.DataFrame:
        """The roster model's samples on the benchmark, in order (the first `limit`)."""
        bound = f"LIMIT {int(limit)}" if limit is not None else ""
        return self.frame(
            f"SELECT * FROM samples WHERE benchmark = ? AND model = ? "
            f"ORDER BY settings_key, solver, task, doc_id, filter {bound}",
            [benchmark, model],
        )

    @reads("results")
    def values_outside_unit_interval(self) -> list[tuple]:
        """Results of an accuracy (acc, acc_norm, exact_match, IFEval's ..._acc) outside [0, 1], or
        whose interval does not hold the value."""
        return self.sql(r"""
            SELECT benchmark, model, settings_key, solver, task, metric, filter, value FROM results
            WHERE (metric IN ('acc', 'acc_norm', 'exact_match') OR metric LIKE '%\\_acc' ESCAPE '\')
              AND NOT (value BETWEEN 0 AND 1 AND coalesce(ci_low <= value + 1e-12 AND ci_high >= value - 1e-12,
                                                           TRUE))""").fetchall()

    @reads("samples")
    def duplicate_samples(self) -> list[tuple]:
        return self.sql("""
            SELECT benchmark, model, settings_key, solver, task, doc_id, filter, count(*) FROM samples
            GROUP BY ALL HAVING count(*) > 1""").fetchall()


def batches(items: Iterable[Sample], size: int) -> Iterator[list[Sample]]:
    """The items, `size` at a time."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _shots(evaluation: Evaluation) -> int | None:
    return next((r.num_fewshot for r in evaluation.results if r.num_fewshot is not None), None)
