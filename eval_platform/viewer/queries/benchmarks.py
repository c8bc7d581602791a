"""The benchmark pages' reads: which evaluations a benchmark has, a run's results with their
intervals, two runs' paired statistics (stored in `comparisons`, and pooled over the chosen items
now), a page of items with filters and full-text search, and one document's samples under every
filter with their stored answers and source row.

Every value a user chooses is a bound parameter; only fixed fragments of SQL are chosen by code.
Pages are keyed by (scored the same, task, doc_id), so a page costs the same at any depth."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from datetime import datetime

from eval_platform.benchmarks.comparison import NO_PAIRED_TEST, compare
from eval_platform.benchmarks.imports import IMPORTED
from eval_platform.common.intervals import PAIRED_BOOTSTRAP, PAIRED_SCORE
from eval_platform.viewer.warehouse import Connection, ViewerInputError, fetch

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
QUESTION_CHARS = 240  # of a prompt's end, in a list of items
RIGHT = 0.5  # a document's value at or above it counts as right (a 0/1 metric's 1; mc2's probability)
OUTCOMES = {"right": "right", "wrong": "wrong"}
FLIPS = {"differ": "scored differently", "to_wrong": "A wrong, B right", "to_right": "A right, B wrong"}


@dataclass(frozen=True)
class BenchmarkSummary:
    benchmark: str
    models: int
    runs: int
    last_evaluated: datetime


@dataclass(frozen=True)
class Run:
    """One evaluation: a roster model under a settings key and solver."""

    model: str
    settings_key: str
    solver: str
    model_fingerprint: str
    run_id: str | None
    evaluated_at: datetime
    model_source: str  # the model's name, or an import's tool, version, model and file

    @property
    def imported(self) -> bool:
        return self.model_fingerprint.startswith(IMPORTED)


@dataclass(frozen=True)
class Side:
    """What one side of a page shows: a roster model's run (settings key and solver) and filter."""

    model: str
    settings_key: str
    solver: str
    filter: str


@dataclass(frozen=True)
class ResultRow:
    task: str
    alias: str | None
    is_group: bool
    metric: str
    filter: str
    value: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    num_fewshot: int | None


@dataclass(frozen=True)
class PairedRow:
    """A against B on the documents both were scored on (A minus B)."""

    task: str
    items: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    only_a: int  # right in A, wrong in B (0/1 metrics)
    only_b: int
    mcnemar_p: float | None
    paired_test: str
    ci_low: float | None
    ci_high: float | None
    interval: str  # how the interval was computed
    relation: str = ""  # a stored comparison's relation of B to A (baseline, previous, chosen)


@dataclass(frozen=True)
class ItemQuery:
    """Which items a page lists: the metric and each side's filter, and the user's filters."""

    metric: str
    task: str | None = None
    outcome: str | None = None  # right, wrong (A's value)
    flipped: str | None = None  # differ, to_wrong, to_right (between A and B)
    search: str | None = None  # in A's document and either side's answers
    whole_prompts: bool = False  # the search reads A's whole prompts too (few-shot examples included)


@dataclass(frozen=True)
class Cursor:
    """Where a page starts or ends: (scored the same by both sides, task, doc_id)."""

    same: int
    task: str
    doc_id: int

    def encode(self) -> str:
        return base64.urlsafe_b64encode(json.dumps([self.same, self.task, self.doc_id]).encode()).decode()

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            same, task, doc_id = json.loads(base64.urlsafe_b64decode(text.encode()))
            if not (isinstance(same, int) and isinstance(task, str) and isinstance(doc_id, int)):
                raise ValueError(text)
        except (ValueError, TypeError, binascii.Error) as error:
            raise ViewerInputError(f"not a page position: {text!r}") from error
        return cls(same, task, doc_id)


@dataclass(frozen=True)
class ItemRow:
    task: str
    doc_id: int
    document_id: str | None
    question: str  # the end of the prompt
    reference: str | None
    extracted: str | None  # what A's filter took out of its answer (JSON)
    value: float | None  # A's value of the metric
    extracted_b: str | None = None
    value_b: float | None = None
    same: int = 0

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.same, self.task, self.doc_id)


@dataclass(frozen=True)
class ItemPage:
    rows: list[ItemRow]
    total: int  # items matching the filters
    next: Cursor | None
    previous: Cursor | None
    pooled: PairedRow | None = None  # A against B on every document both were scored on (of the chosen task)


@dataclass(frozen=True)
class SampleRow:
    """One document under one filter, with its document's source row."""

    filter: str
    prompt: str
    arguments: str  # each request's arguments (JSON, as DuckDB returns it: text)
    request_keys: list[str] | None
    target: str | None
    responses: str | None  # JSON
    filtered_responses: str | None  # JSON
    metrics: str  # JSON
    doc: str | None  # JSON
    document_id: str | None
    fewshot_ids: list[str] | None
    run_id: str | None
    model_fingerprint: str
    source_row_id: str | None
    labels: list[str] | None
    source: str | None
    line: int | None


@dataclass(frozen=True)
class StoredRow:
    request_key: str
    request_type: str
    response: str  # JSON
    ended: str | None


def benchmarks(conn: Connection) -> list[BenchmarkSummary]:
    return fetch(
        conn,
        """SELECT benchmark, count(DISTINCT model) AS models, count(*) AS runs, max(evaluated_at) AS last_evaluated
           FROM evaluations GROUP BY benchmark ORDER BY benchmark""",
        [],
        BenchmarkSummary,
    )


def runs(conn: Connection, benchmark: str) -> list[Run]:
    """Every evaluation of the benchmark, by model, settings key and solver."""
    return fetch(
        conn,
        """SELECT model, settings_key, solver, model_fingerprint, run_id, evaluated_at, model_source FROM evaluations
           WHERE benchmark = $benchmark ORDER BY model, settings_key, solver""",
        {"benchmark": benchmark},
        Run,
    )


def _in_run(alias: str, prefix: str = "") -> str:
    """The rows of one side's run: `alias`'s columns against the parameters named with `prefix`."""
    return (
        f"{alias}.benchmark = $benchmark AND {alias}.model = ${prefix}model AND "
        f"{alias}.settings_key = ${prefix}settings AND {alias}.solver = ${prefix}solver"
    )


def _side(side: Side, prefix: str) -> dict[str, str]:
    return {f"{prefix}model": side.model, f"{prefix}settings": side.settings_key, f"{prefix}solver": side.solver}


def results(conn: Connection, benchmark: str, side: Side) -> list[ResultRow]:
    """The run's results: groups first, then each task, each metric and filter."""
    return fetch(
        conn,
        f"""SELECT task, alias, is_group, metric, filter, value, stderr, ci_low, ci_high, n, num_fewshot
            FROM results r WHERE {_in_run("r")} ORDER BY is_group DESC, task, metric, filter""",
        {"benchmark": benchmark, **_side(side, "")},
        ResultRow,
    )


def metrics_and_filters(rows: list[ResultRow]) -> list[tuple[str, str]]:
    """The (metric, filter) pairs a run's tasks were scored on, in order."""
    return list(dict.fromkeys((row.metric, row.filter) for row in rows if not row.is_group))


def _value(alias: str) -> str:
    """A sample's value of the chosen metric: a number, a boolean as 0/1, else NULL."""
    value = f"{alias}.metrics ->> $metric"
    return f"COALESCE(TRY_CAST({value} AS DOUBLE), TRY_CAST({value} AS BOOLEAN)::DOUBLE)"


def _scoped(a: Side, b: Side | None) -> str:
    """The documents of A (and of B where given: those both were scored on) with their values and
    row ids: the pages' filters read only these; a page's columns are then fetched by row id, for
    its rows alone."""
    sides = f"""
        a AS (SELECT rowid AS row_a, task, doc_id, {_value("a")} AS value
              FROM samples a WHERE {_in_run("a", "a_")} AND filter = $a_filter)"""
    if b is None:
        return f"""WITH {sides},
        scoped AS MATERIALIZED (SELECT *, NULL::BIGINT AS row_b, NULL::DOUBLE AS value_b, 0 AS same FROM a)"""
    return f"""WITH {sides},
        b AS (SELECT rowid AS row_b, task, doc_id, {_value("b")} AS value
              FROM samples b WHERE {_in_run("b", "b_")} AND filter = $b_filter),
        scoped AS MATERIALIZED (
            SELECT a.*, b.row_b, b.value AS value_b, (a.value IS NOT DISTINCT FROM b.value)::INTEGER AS same
            FROM a JOIN b USING (task, doc_id))"""


def _found(query: ItemQuery, two_sides: bool) -> str:
    """The rows whose text holds the search: A's document, answer (and whole prompt, where asked),
    or B's answer."""
    if not query.search:
        return ""
    texts = ["doc::VARCHAR", "responses::VARCHAR", *(["prompt"] if query.whole_prompts else [])]
    found = f""",
        found_a AS (SELECT rowid FROM samples a WHERE {_in_run("a", "a_")} AND filter = $a_filter
                    AND ({" OR ".join(f"regexp_matches({text}, $pattern, 'i')" for text in texts)}))"""
    if two_sides:
        found += f""",
        found_b AS (SELECT rowid FROM samples b WHERE {_in_run("b", "b_")} AND filter = $b_filter
                    AND regexp_matches(responses::VARCHAR, $pattern, 'i'))"""
    return found


def literal_pattern(text: str) -> str:
    """A regular expression (RE2's) that matches the text itself: quoted whole (\\Q...\\E), so no
    character of it is a pattern's; with the flag `i`, in any case."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


def _conditions(query: ItemQuery, two_sides: bool) -> tuple[list[str], dict[str, str | int]]:
    conditions, params = [], {}
    if query.task:
        conditions.append("task = $task")
        params["task"] = query.task
    if query.outcome == "right":
        conditions.append(f"value >= {RIGHT}")
    elif query.outcome == "wrong":
        conditions.append(f"value < {RIGHT}")
    if two_sides and query.flipped == "differ":
        conditions.append("same = 0")
    elif two_sides and query.flipped == "to_wrong":
        conditions.append(f"value < {RIGHT} AND value_b >= {RIGHT}")
    elif two_sides and query.flipped == "to_right":
        conditions.append(f"value >= {RIGHT} AND value_b < {RIGHT}")
    if query.search:
        b_found = " OR row_b IN (SELECT rowid FROM found_b)" if two_sides else ""
        conditions.append(f"(row_a IN (SELECT rowid FROM found_a){b_found})")
        params["pattern"] = literal_pattern(query.search)
    return conditions, params


def _parameters(benchmark: str, a: Side, b: Side | None, metric: str) -> dict[str, str]:
    params = {"benchmark": benchmark, "metric": metric, **_side(a, "a_"), "a_filter": a.filter}
    if b is not None:
        params.update(_side(b, "b_"), b_filter=b.filter)
    return params


# A's and B's values on every document both were scored on (of the chosen task), in one order, for
# the comparison the `comparisons` table stores (benchmarks.comparison.compare).
POOLED = """
        pooled AS (SELECT list(value ORDER BY task, doc_id) AS values_a,
                          list(value_b ORDER BY task, doc_id) AS values_b
                   FROM scoped WHERE value IS NOT NULL AND value_b IS NOT NULL{task})"""


def items(
    conn: Connection,
    benchmark: str,
    a: Side,
    b: Side | None,
    query: ItemQuery,
    after: Cursor | None = None,
    before: Cursor | None = None,
    size: int = PAGE_SIZE,
) -> ItemPage:
    """A page of A's items (with B's beside them where given: those scored differently first, and
    the two runs' paired statistics), after (or before) a position, and how many items match the
    filters, in one statement: one scan finds the documents' keys, values and row ids, and only the
    page's rows are read whole."""
    two_sides = b is not None
    conditions, params = _conditions(query, two_sides)
    params.update(_parameters(benchmark, a, b, query.metric), limit=size + 1)
    position, backwards = (before, True) if before is not None else (after, False)
    order = " DESC" if backwards else ""
    bound = "TRUE"
    if position is not None:
        bound = f"(same, task, doc_id) {'<' if backwards else '>'} ($c_same, $c_task, $c_doc)"
        params.update(c_same=position.same, c_task=position.task, c_doc=position.doc_id)
    pooled = "," + POOLED.format(task=" AND task = $task" if query.task else "") if two_sides else ""
    found = conn.execute(
        f"""{_scoped(a, b)}{_found(query, two_sides)},
            matched AS MATERIALIZED (SELECT row_a, row_b, same, task, doc_id, value, value_b FROM scoped
                                     WHERE {" AND ".join(conditions) or "TRUE"}),
            page AS (SELECT * FROM matched WHERE {bound} ORDER BY same{order}, task{order}, doc_id{order} LIMIT $limit)
            {pooled}
            SELECT {"pooled.*" if two_sides else "NULL, NULL"}, t.total,
                   p.task, p.doc_id, s.document_id, right(s.prompt, {QUESTION_CHARS}) AS question,
                   s.target AS reference, s.filtered_responses::VARCHAR AS extracted, p.value,
                   {"sb.filtered_responses::VARCHAR" if two_sides else "NULL"} AS extracted_b, p.value_b, p.same
            FROM (SELECT count(*) AS total FROM matched) t
            {"CROSS JOIN pooled" if two_sides else ""}
            LEFT JOIN page p ON TRUE
            LEFT JOIN samples s ON s.rowid = p.row_a
            {"LEFT JOIN samples sb ON sb.rowid = p.row_b" if two_sides else ""}
            ORDER BY p.same{order}, p.task{order}, p.doc_id{order}""",
        params,
    ).fetchall()
    (values_a, values_b), total = found[0][:2], found[0][2]
    rows = [ItemRow(*row[3:]) for row in found if row[3] is not None]
    more, rows = len(rows) > size, rows[:size]
    comparison = _paired(query.task or "all documents", values_a or [], values_b or []) if two_sides else None
    if backwards:
        rows.reverse()
        next_, previous = (rows[-1].cursor if rows else None), (rows[0].cursor if more and rows else None)
    else:
        next_ = rows[-1].cursor if more and rows else None
        previous = rows[0].cursor if position is not None and rows else None
    return ItemPage(rows, total, next_, previous, comparison)


def _paired(task: str, values_a: list[float], values_b: list[float]) -> PairedRow | None:
    """A against B on their paired values, computed now as the `comparisons` table's rows are."""
    if not values_a:
        return None
    result = compare({str(i): v for i, v in enumerate(values_a)}, {str(i): v for i, v in enumerate(values_b)})
    return PairedRow(
        task,
        result.items,
        result.first_accuracy,
        result.second_accuracy,
        result.difference,
        result.only_first,
        result.only_second,
        result.mcnemar_p,
        "exact McNemar" if result.mcnemar_p is not None else NO_PAIRED_TEST,
        result.ci_low,
        result.ci_high,
        f"{result.interval}, computed now",
    )


def stored_comparisons(conn: Connection, benchmark: str, a: Side, b: Side, metric: str) -> list[PairedRow]:
    """The `comparisons` rows of A and B under A's run and filter (stored either way round), as A against B."""
    if (a.settings_key, a.solver, a.filter) != (b.settings_key, b.solver, b.filter):
        return []
    found = conn.execute(
        """SELECT task, model_a = $a_model AS forward, items, accuracy_a, accuracy_b, difference, only_a, only_b,
                  mcnemar_p, paired_test, ci_low, ci_high, relation
           FROM comparisons WHERE benchmark = $benchmark AND settings_key = $settings AND solver = $solver
             AND filter = $filter AND metric = $metric
             AND ((model_a = $a_model AND model_b = $b_model) OR (model_a = $b_model AND model_b = $a_model))
           ORDER BY task, forward DESC""",
        {
            "benchmark": benchmark,
            "settings": a.settings_key,
            "solver": a.solver,
            "filter": a.filter,
            "metric": metric,
            "a_model": a.model,
            "b_model": b.model,
        },
    ).fetchall()
    rows, seen = [], set()
    for task, forward, n, acc_a, acc_b, difference, only_a, only_b, p, test, low, high, relation in found:
        if task in seen:  # both ways round are stored: A's own row (first) is shown
            continue
        seen.add(task)
        row = PairedRow(task, n, acc_a, acc_b, difference, only_a, only_b, p, test, low, high,
                        PAIRED_SCORE if p is not None else PAIRED_BOOTSTRAP, f"B is A's {relation}")  # fmt: skip
        if not forward:  # stored as B against A: turned round
            row = replace(row, accuracy_a=acc_b, accuracy_b=acc_a, difference=-difference, only_a=only_b,
                          only_b=only_a, ci_low=-high, ci_high=-low, relation=f"A is B's {relation}")  # fmt: skip
        rows.append(row)
    return rows


def samples(conn: Connection, benchmark: str, side: Side, task: str, doc_id: int) -> list[SampleRow]:
    """The document's samples of the run, one per filter, with its source row."""
    return fetch(
        conn,
        f"""SELECT s.filter, s.prompt, s.arguments, s.request_keys, s.target, s.responses, s.filtered_responses,
                   s.metrics, s.doc, s.document_id, s.fewshot_ids, s.run_id, s.model_fingerprint, d.source_row_id,
                   d.labels, raw.source, raw.line
            FROM samples s
            LEFT JOIN documents d ON d.benchmark = s.benchmark AND d.document_id = s.document_id
            LEFT JOIN raw_rows raw ON raw.benchmark = d.benchmark AND raw.source_row_id = d.source_row_id
            WHERE {_in_run("s")} AND s.task = $task AND s.doc_id = $doc_id
            ORDER BY s.filter = $filter DESC, s.filter""",
        {"benchmark": benchmark, **_side(side, ""), "task": task, "doc_id": doc_id, "filter": side.filter},
        SampleRow,
    )


@dataclass(frozen=True)
class SampleScoreRow:
    sample: int
    answer: str | None  # what the filter took out of it
    metric: str
    value: float


def sample_scores(conn: Connection, benchmark: str, side: Side, task: str, doc_id: int) -> list[SampleScoreRow]:
    """Each of a sampled document's k answers scored alone under the side's filter."""
    return fetch(
        conn,
        f"""SELECT sample, answer, metric, value FROM sample_scores ss
            WHERE {_in_run("ss")} AND ss.task = $task AND ss.doc_id = $doc_id AND ss.filter = $filter
            ORDER BY sample, metric""",
        {"benchmark": benchmark, **_side(side, ""), "task": task, "doc_id": doc_id, "filter": side.filter},
        SampleScoreRow,
    )


def stored_answers(conn: Connection, model_fingerprint: str, request_keys: list[str]) -> list[StoredRow]:
    """The answers `answers` keeps for the requests (before any reasoning block was stripped)."""
    if not request_keys:
        return []
    return fetch(
        conn,
        """SELECT request_key, request_type, response, ended FROM answers
           WHERE model_fingerprint = $fingerprint AND request_key IN (SELECT unnest($keys))""",
        {"fingerprint": model_fingerprint, "keys": request_keys},
        StoredRow,
    )


def run_of(runs: list[Run], benchmark: str, model: str, settings_key: str | None, solver: str | None) -> Run:
    """Of a benchmark's runs, the model's under the settings key and solver (its first where not given)."""
    found = [
        run
        for run in runs
        if run.model == model and settings_key in (None, run.settings_key) and solver in (None, run.solver)
    ]
    if not found:
        raise ViewerInputError(
            f"{model} has no evaluation of {benchmark}"
            + (f" under {solver} / {settings_key}" if settings_key or solver else "")
        )
    return found[0]
