"""The benchmark pages: every benchmark with evaluations; one benchmark's run of a model (its score
and interval, its items with filters, search and pages), beside another model's or another run's
(the paired statistics and the items scored differently first); and one item of one or two runs
(each exact prompt, answer, what each filter took, the reference and every metric; two generated
texts as a diff)."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import eval_platform.viewer.links as links
import eval_platform.viewer.params as params
from eval_platform.viewer.answers import (
    AnswerView,
    DiffPiece,
    Generated,
    StoredAnswer,
    Turn,
    answer_view,
    parsed,
    prompt_turns,
    shown_value,
    text_diff,
)
from eval_platform.viewer.app import rows_page, viewer_of
from eval_platform.viewer.queries import benchmarks as queries
from eval_platform.viewer.queries.benchmarks import (
    FLIPS,
    MAX_PAGE_SIZE,
    OUTCOMES,
    PAGE_SIZE,
    QUESTION_CHARS,
    Cursor,
    ItemPage,
    ItemQuery,
    PairedRow,
    ResultRow,
    Run,
    SampleScoreRow,
    Side,
)
from eval_platform.viewer.registry import Section, register
from eval_platform.viewer.warehouse import Connection, ViewerInputError


def run_value(run: Run) -> str:
    """A run as one form value: `solver/settings key`."""
    return f"{run.solver}/{run.settings_key}"


def _split_run(value: str | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    solver, _, settings_key = value.partition("/")
    return solver, settings_key or None


def score_value(metric: str, filter_name: str) -> str:
    """A metric under a filter as the harness writes it: `acc,none`."""
    return f"{metric},{filter_name}"


@dataclass(frozen=True)
class Asked:
    """What a benchmark page or item page was asked for (its query parameters)."""

    model: str | None
    run: str | None
    against: str | None
    against_run: str | None
    score: str | None
    task: str | None
    outcome: str | None
    flipped: str | None
    search: str | None
    whole_prompts: bool

    @classmethod
    def of(cls, request: Request) -> Asked:
        return cls(
            params.text(request, "model"),
            params.text(request, "run"),
            params.text(request, "against"),
            params.text(request, "against_run"),
            params.text(request, "score"),
            params.text(request, "task"),
            params.choice(request, "outcome", OUTCOMES),
            params.choice(request, "flipped", FLIPS),
            params.text(request, "q"),
            params.choice(request, "prompts", ["whole"]) == "whole",
        )


@dataclass(frozen=True)
class Sides:
    """The runs a page shows, resolved against the warehouse, and the metric it scores them on."""

    runs: list[Run]
    a: Side
    b: Side | None
    metric: str
    results: list[ResultRow]  # A's
    scores: list[tuple[str, str]]  # A's (metric, filter) pairs

    def state(self, asked: Asked) -> dict[str, str | None]:
        """The parameters that keep a page's choices in its links."""
        return {
            "model": self.a.model,
            "run": f"{self.a.solver}/{self.a.settings_key}",
            "against": self.b.model if self.b else None,
            "against_run": f"{self.b.solver}/{self.b.settings_key}" if self.b else None,
            "score": score_value(self.metric, self.a.filter),
            "task": asked.task,
            "outcome": asked.outcome,
            "flipped": asked.flipped if self.b else None,
            "q": asked.search,
            "prompts": "whole" if asked.whole_prompts else None,
        }


def _filter_of(conn: Connection, benchmark: str, run: Run, metric: str, wanted: str) -> str:
    """The filter a run is scored under for `metric`: `wanted` where it has it, else its first."""
    side = Side(run.model, run.settings_key, run.solver, wanted)
    filters = [f for m, f in queries.metrics_and_filters(queries.results(conn, benchmark, side)) if m == metric]
    if not filters:
        raise ViewerInputError(f"{run.model} ({run_value(run)}) has no {metric} results on {benchmark}")
    return wanted if wanted in filters else filters[0]


def resolve(conn: Connection, benchmark: str, asked: Asked) -> Sides:
    """The runs and score the page asked for, each defaulting to the benchmark's first."""
    runs = queries.runs(conn, benchmark)
    if not runs:
        raise ViewerInputError(f"{benchmark} has no evaluations in this warehouse")
    solver, settings_key = _split_run(asked.run)
    a_run = queries.run_of(runs, benchmark, asked.model or runs[0].model, settings_key, solver)
    results = queries.results(conn, benchmark, Side(a_run.model, a_run.settings_key, a_run.solver, ""))
    scores = queries.metrics_and_filters(results)
    if not scores:
        raise ViewerInputError(f"{a_run.model} ({run_value(a_run)}) has no results on {benchmark}")
    metric, _, filter_name = (asked.score or score_value(*scores[0])).partition(",")
    if (metric, filter_name) not in scores:
        raise ViewerInputError(f"{a_run.model} ({run_value(a_run)}) has no {metric},{filter_name} results")
    a = Side(a_run.model, a_run.settings_key, a_run.solver, filter_name)
    b = None
    if asked.against:
        b_solver, b_settings = _split_run(asked.against_run)
        mine = [r for r in runs if r.model == asked.against]
        same_run = [r for r in mine if (r.solver, r.settings_key) == (a.solver, a.settings_key)]
        b_run = (
            queries.run_of(runs, benchmark, asked.against, b_settings, b_solver)
            if asked.against_run or not same_run
            else same_run[0]
        )
        if (b_run.model, b_run.settings_key, b_run.solver) == (a.model, a.settings_key, a.solver):
            raise ViewerInputError("A and B are the same run: choose another model, or another run of this one")
        b = Side(b_run.model, b_run.settings_key, b_run.solver, _filter_of(conn, benchmark, b_run, metric, a.filter))
    return Sides(runs, a, b, metric, results, scores)


@dataclass(frozen=True)
class BenchmarkView:
    benchmark: str
    sides: Sides
    asked: Asked
    state: dict[str, str | None]  # the page's choices, kept in its links
    models: list[str]
    a_runs: list[Run]
    b_runs: list[Run]
    tasks: list[str]
    page: ItemPage
    stored: list[PairedRow]
    size: int


def benchmark_page(request: Request) -> Response:
    benchmark, asked = request.path_params["benchmark"], Asked.of(request)
    size = params.integer(request, "size", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    after, before = params.text(request, "after"), params.text(request, "before")
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        sides = resolve(conn, benchmark, asked)
        query = ItemQuery(sides.metric, asked.task, asked.outcome, asked.flipped, asked.search, asked.whole_prompts)
        page = queries.items(
            conn,
            benchmark,
            sides.a,
            sides.b,
            query,
            Cursor.decode(after) if after else None,
            Cursor.decode(before) if before else None,
            size,
        )
        stored = queries.stored_comparisons(conn, benchmark, sides.a, sides.b, sides.metric) if sides.b else []
    stored = [row for row in stored if asked.task in (None, row.task)]
    models = list(dict.fromkeys(run.model for run in sides.runs))
    view = BenchmarkView(
        benchmark,
        sides,
        asked,
        sides.state(asked),
        models,
        [run for run in sides.runs if run.model == sides.a.model],
        [run for run in sides.runs if sides.b and run.model == sides.b.model],
        list(dict.fromkeys(row.task for row in sides.results if not row.is_group)),
        page,
        stored,
        size,
    )
    return viewer.render(
        request, "benchmarks/benchmark.html", view=view, outcomes=OUTCOMES, flips=FLIPS, question_chars=QUESTION_CHARS
    )


@dataclass(frozen=True)
class FilterScore:
    """What one filter took out of the answer, and the metrics under it."""

    filter: str
    extracted: str
    metrics: list[tuple[str, str]]


@dataclass(frozen=True)
class SampleCell:
    """One of a side's k samples: its text as scored (and any reasoning block before it), why it
    ended, and what the side's filter took out of it with its scores there."""

    generated: Generated
    taken: str | None
    scores: list[tuple[str, str]]


@dataclass(frozen=True)
class SampleLine:
    """The same sample index of every side shown, side by side (None: a side with fewer samples)."""

    index: int
    cells: list[SampleCell | None]


@dataclass(frozen=True)
class ItemSide:
    side: Side
    turns: list[Turn]
    answer: AnswerView
    samples: list[SampleCell]  # a sampled document's k answers (none for one answer)
    reference: str | None
    scores: list[FilterScore]
    value: str  # of the page's metric under the side's filter
    document_id: str | None
    source: str | None  # a dataset's file and line
    source_row_id: str | None
    fewshot_ids: list[str]
    run_id: str | None
    doc: str  # the document as its task read it (JSON)


@dataclass(frozen=True)
class ItemView:
    benchmark: str
    task: str
    doc_id: int
    sides: Sides
    state: dict[str, str | None]  # the page's choices, kept in its links
    shown: list[ItemSide]
    diff: list[DiffPiece] = field(default_factory=list)
    samples: list[SampleLine] = field(default_factory=list)


def item_side(conn: Connection, benchmark: str, side: Side, metric: str, task: str, doc_id: int) -> ItemSide:
    rows = queries.samples(conn, benchmark, side, task, doc_id)
    if not rows:
        raise ViewerInputError(f"{side.model} ({side.solver}/{side.settings_key}) has no {task} document {doc_id}")
    first = rows[0]
    stored = {
        row.request_key: StoredAnswer(row.request_type, parsed(row.response), row.ended)
        for row in queries.stored_answers(conn, first.model_fingerprint, first.request_keys or [])
    }
    arguments = parsed(first.arguments) or []
    own = next((row for row in rows if row.filter == side.filter), first)
    answer = answer_view(
        arguments, parsed(first.responses), first.request_keys, stored, first.target, first.labels or ()
    )
    return ItemSide(
        side,
        prompt_turns(side.solver, first.prompt, arguments),
        answer,
        sample_cells(answer, queries.sample_scores(conn, benchmark, side, task, doc_id)),
        first.target,
        [
            FilterScore(
                row.filter,
                shown_value(row.filtered_responses),
                [(name, shown_value(value)) for name, value in (parsed(row.metrics) or {}).items()],
            )
            for row in rows
        ],
        shown_value((parsed(own.metrics) or {}).get(metric)),
        first.document_id,
        f"{first.source}, line {first.line}" if first.source else None,
        first.source_row_id,
        list(first.fewshot_ids or []),
        first.run_id,
        shown_value(first.doc),
    )


def sample_cells(answer: AnswerView, scores: list[SampleScoreRow]) -> list[SampleCell]:
    """A sampled document's answers, each with what its side's filter took and its scores there."""
    if answer.kind != "generated" or len(answer.generated) < 2:
        return []
    taken = {row.sample: row.answer for row in scores}
    return [
        SampleCell(
            generated,
            taken.get(index),
            [(row.metric, shown_value(row.value)) for row in scores if row.sample == index],
        )
        for index, generated in enumerate(answer.generated)
    ]


def sample_lines(shown: list[ItemSide]) -> list[SampleLine]:
    """Each sample index across the sides shown, where any side has k samples."""
    count = max(len(side.samples) for side in shown)
    return [
        SampleLine(index, [side.samples[index] if index < len(side.samples) else None for side in shown])
        for index in range(count)
    ]


def item_page(request: Request) -> Response:
    benchmark, asked = request.path_params["benchmark"], Asked.of(request)
    task, doc_id = params.required(request, "task"), params.integer(request, "doc_id")
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        sides = resolve(conn, benchmark, asked)
        shown = [item_side(conn, benchmark, sides.a, sides.metric, task, doc_id)]
        if sides.b:
            shown.append(item_side(conn, benchmark, sides.b, sides.metric, task, doc_id))
    texts = [s.answer.generated[0].text for s in shown if s.answer.kind == "generated" and s.answer.generated]
    diff = text_diff(texts[0], texts[1]) if len(texts) == 2 else []
    view = ItemView(benchmark, task, doc_id, sides, sides.state(asked), shown, diff, sample_lines(shown))
    return viewer.render(request, "benchmarks/item.html", view=view)


SECTION = register(
    Section(
        name="benchmarks",
        title="Benchmarks",
        summary="Each model's score and every item behind it: prompts, answers, filters and metrics; two models "
        "or two runs side by side.",
        home=links.BENCHMARKS,
        routes=[
            Route(links.BENCHMARKS, rows_page("benchmarks/index.html", "benchmarks", queries.benchmarks)),
            Route(links.BENCHMARK, benchmark_page),
            Route(links.BENCHMARK_ITEM, item_page),
        ],
        order=10,
    )
)
