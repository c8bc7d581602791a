"""Benchmark validation, one chain for every benchmark: a dataset's rows and few-shot rows ->
its documents (one partition per benchmark; a harness task reads its own data); then, one partition
per benchmark and roster model, its evaluation by each solver -> the model against its baseline and
predecessor; and the protocols' scores and the leaderboard over every evaluation."""

from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib.metadata import version
from pathlib import Path

import pandas as pd
from dagster import (
    AssetExecutionContext,
    AssetObservation,
    AutomationCondition,
    Config,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from eval_engine import DEFAULT_SEED
from eval_platform.benchmarks.answering import AnswerProgress
from eval_platform.benchmarks.comparison import comparison_rows, not_comparable
from eval_platform.benchmarks.declarations import Benchmark, DataSource, EvaluationSettings
from eval_platform.benchmarks.documents import Document, build_documents, fewshot_pool
from eval_platform.benchmarks.evaluation import (
    Plan,
    ProgressLog,
    SolverEvaluations,
    benchmark_named,
    evaluate_solvers,
    evaluation_plan,
)
from eval_platform.benchmarks.imports import imported_evaluation, read_harness_output
from eval_platform.benchmarks.inspect_imports import inspect_evaluation, is_inspect_log, read_inspect_log
from eval_platform.benchmarks.inspect_logs import export_inspect_logs
from eval_platform.benchmarks.leaderboard import headline_rows, leaderboard_plot, leaderboard_table
from eval_platform.benchmarks.protocols import protocol_rows, protocol_table
from eval_platform.benchmarks.records import Answer, Evaluation
from eval_platform.benchmarks.roster import RosterEntry
from eval_platform.benchmarks.samples import every_document, sample_markdown, side_by_side
from eval_platform.benchmarks.solvers import EvaluationJob
from eval_platform.benchmarks.store import ComparisonStore, EvaluationStore, InputStore, LeaderboardStore
from eval_platform.benchmarks.store.evaluations import EvaluationRun
from eval_platform.common.ingestion import load_rows
from eval_platform.common.reproducibility import describe_environment
from eval_platform.environment import environment
from eval_platform.evaluation_assets.configs import optional_config, set_fields
from eval_platform.evaluation_assets.metadata import MAX_TABLE_ROWS, markdown_table
from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_partitions, partition_names
from eval_platform.resources import (
    WAREHOUSE_POOL,
    LanguageModelResource,
    ModelGatewayResource,
    RosterResource,
    WarehouseResource,
    entry_gateway,
)
from eval_platform.viewer.links import comparison_link, evaluation_link


class SourceConfig(
    optional_config(DataSource, limit=(int | None, Field(default=None, description="Read only the first N rows.")))
):
    """Where the rows come from, over the declaration's (a local file, or a hub id with its
    configuration and split), and how many to read."""


def _dataset(context: AssetExecutionContext, roster: RosterResource) -> Benchmark | None:
    """The declared dataset of an inputs partition; None (logged) for a harness task's, whose data the
    harness reads from its own files when it is evaluated."""
    benchmark = roster.benchmarks().get(context.partition_key)
    if benchmark is None or not benchmark.is_dataset:
        context.log.info(
            f"{context.partition_key} declares no dataset: the harness reads its task's data when "
            "benchmark_evaluation evaluates it"
        )
        return None
    return benchmark


def _source(declared: DataSource | None, config: Config) -> DataSource | None:
    """The launchpad's source where it names a file or hub id, else the declaration's (its split and
    configuration overridden where set)."""
    fields = set_fields(config, DataSource)
    if "file" in fields or "hub" in fields:
        return DataSource(**fields)
    return declared.model_copy(update=fields) if declared else None


def _rejection_metadata(rejected: pd.DataFrame) -> MetadataValue:
    return markdown_table(rejected[["line", "source_row_id", "reason"]], 20)


# Eager, without waiting for every upstream partition: the evaluation grid (benchmark x roster model)
# always has partitions nobody evaluates (an entry names its benchmarks), and eager's default,
# `~any_deps_missing`, would never fire on it.
AFTER_ANY_EVALUATION = (
    AutomationCondition.eager().without(~AutomationCondition.any_deps_missing()).with_label("eager_allow_missing")
)


@asset(
    partitions_def=benchmark_partitions,
    group_name="benchmark_inputs",
    kinds={"huggingface", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_raw_rows(
    context: AssetExecutionContext, config: SourceConfig, warehouse: WarehouseResource, roster: RosterResource
) -> Iterator[MaterializeResult]:
    """A dataset's evaluation split, each row verbatim as JSON, keyed by source row id. A line that
    cannot be read, or repeats an id, is kept in `ingest_rejections` with its line and reason."""
    if (benchmark := _dataset(context, roster)) is None:
        return
    source = _source(benchmark.dataset, config)
    assert source is not None
    loaded = load_rows(source.file or str(source.hub), source.hub_name, source.split, config.limit)
    with warehouse.store(InputStore) as store:
        count, rejected = store.replace_raw_rows(benchmark.name, source.describe(), loaded)
    for reject in rejected.itertuples():
        context.log.warning(f"{source.describe()} line {reject.line}: {reject.reason}")
    yield MaterializeResult(
        metadata={
            "dagster/row_count": count,
            "rejected_rows": len(rejected),
            "source": source.describe(),
            "rejections": _rejection_metadata(rejected),
        }
    )


@asset(
    partitions_def=benchmark_partitions,
    group_name="benchmark_inputs",
    kinds={"huggingface", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_fewshot_rows(
    context: AssetExecutionContext, config: SourceConfig, warehouse: WarehouseResource, roster: RosterResource
) -> Iterator[MaterializeResult]:
    """A dataset's few-shot split, in order: the pool the harness draws its examples from. Default: the
    declaration's (none ships for HellaSwag, whose train split is not available offline: point the
    source at it)."""
    if (benchmark := _dataset(context, roster)) is None:
        return
    declared = benchmark.fewshot
    source = _source(declared if declared and declared.file else None, config)
    if source is None:
        note = (
            "zero-shot only"
            if declared is None
            else f"no few-shot split shipped: set the source to {declared.describe()} with hub access, "
            "or to a local file"
        )
        with warehouse.store(InputStore) as store:
            store.replace_fewshot_rows(benchmark.name, None, None)
        context.log.info(f"{benchmark.name}: {note}")
        yield MaterializeResult(metadata={"dagster/row_count": 0, "note": note})
        return
    loaded = load_rows(source.file or str(source.hub), source.hub_name, source.split, config.limit)
    with warehouse.store(InputStore) as store:
        count, rejected = store.replace_fewshot_rows(benchmark.name, source.describe(), loaded)
    yield MaterializeResult(
        metadata={
            "dagster/row_count": count,
            "rejected_rows": len(rejected),
            "source": source.describe(),
            "rejections": _rejection_metadata(rejected),
        }
    )


@asset(
    partitions_def=benchmark_partitions,
    deps=[benchmark_raw_rows, benchmark_fewshot_rows],
    group_name="benchmark_inputs",
    kinds={"python", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_documents(
    context: AssetExecutionContext, warehouse: WarehouseResource, roster: RosterResource
) -> Iterator[MaterializeResult]:
    """Each row that parses as a document: the row in its harness task's layout and its chat prompt
    (system and user turns, labels, choices, the real answer). Rows that cannot be parsed, and
    few-shot rows left out of the pool, are kept in `document_rejections` with their reason."""
    if (benchmark := _dataset(context, roster)) is None:
        return
    with warehouse.store(InputStore) as store:
        built = build_documents(benchmark, store.load_raw_rows(benchmark.name), store.load_fewshot_rows(benchmark.name))
        store.replace_documents(benchmark.name, built.documents, built.rejected)
    for reject in built.rejected:
        context.log.warning(f"{benchmark.name} row {reject.source_row_id} rejected: {reject.reason}")
    first = built.documents[:3]
    yield MaterializeResult(
        metadata={
            "dagster/row_count": len(built.documents),
            "rejected_rows": len(built.rejected),
            "few_shot_pool": len(built.pool),
            "tasks": MetadataValue.json(sorted({d.task for d in built.documents if d.task})[:50]),
            "reject_reasons": markdown_table(
                pd.DataFrame([r.__dict__ for r in built.rejected], columns=["source_row_id", "reason"]), 20
            ),
            "preview": markdown_table(
                pd.DataFrame(
                    [[d.document_id, d.user_prompt, d.real_answer] for d in first],
                    columns=["document_id", "user_prompt", "real_answer"],
                )  # fmt: skip
            ),
        }
    )


class EvaluationConfig(
    optional_config(
        EvaluationSettings,
        protocol=(
            str | None,
            Field(
                default=None,
                description="A protocol (open_llm_leaderboard_v1): its solver and shots for the benchmark.",
            ),
        ),
        recompute=(bool, Field(default=False, description="Ignore the answers stored for the same model fingerprint.")),
    )
):
    """How the benchmark is evaluated, over its declaration's and the roster entry's settings."""


def keeper(warehouse: WarehouseResource, run: EvaluationRun) -> Callable[[Sequence[tuple[str, Answer]]], None]:
    """What keeps a chunk of the run's computed answers: the warehouse, in one short transaction."""

    def keep(chunk: Sequence[tuple[str, Answer]]) -> None:
        with warehouse.store(EvaluationStore) as store:
            store.keep_answers(run, chunk)

    return keep


def saver(warehouse: WarehouseResource, run: EvaluationRun) -> Callable[[Evaluation], None]:
    """What stores each solver's evaluation as it ends: its samples, results and history."""

    def save(evaluation: Evaluation) -> None:
        with warehouse.store(EvaluationStore) as store:
            store.save_evaluation(run, evaluation)

    return save


def progress_reporters(context: AssetExecutionContext, label: str) -> Callable[[str], Callable[[AnswerProgress], None]]:
    """Each solver's progress reporter (`progress_reporter`) by its name, labelled `<label> <solver>`."""
    return lambda solver: progress_reporter(context, f"{label} {solver}", solver)


def progress_reporter(context: AssetExecutionContext, label: str, solver: str) -> Callable[[AnswerProgress], None]:
    """What reports each kept chunk while the run goes on: a log line (answers stored of needed, the
    rate and the time left) and an observation of the partition with those numbers, both in the UI."""
    log = ProgressLog(context.log.info, label)

    def report(progress: AnswerProgress) -> None:
        log(progress)
        context.log_event(
            AssetObservation(
                asset_key=context.asset_key,
                partition=context.partition_key,
                metadata={
                    "solver": solver,
                    "answers_stored": progress.stored,
                    "answers_needed": progress.needed,
                    "answers_computed": progress.computed,
                    "chunks_kept": progress.chunks,
                    "progress": f"{progress.stored:,} of {progress.needed:,} answers stored",
                },
            )
        )

    return report


def _plan(
    context: AssetExecutionContext, config: EvaluationConfig, roster: RosterResource, entry: RosterEntry
) -> tuple[Benchmark, Plan]:
    """The partition's benchmark and the plan of its evaluation for the roster entry, with the
    launchpad's settings and protocol over the entry's (each solver skipped logged)."""
    name = partition_names(context.partition_key)[0]
    benchmark = benchmark_named(name, roster.benchmarks(), config.task)
    protocol_name = config.protocol or entry.protocol
    protocol = roster.protocols()[protocol_name] if protocol_name else None
    launchpad = set_fields(config, EvaluationSettings)
    plan = evaluation_plan(benchmark, entry.evaluation_settings(), launchpad, protocol, environment().harness_index)
    for solver, reason in plan.skipped.items():
        context.log.info(f"{name}: the {solver} solver is skipped: {reason}")
    return benchmark, plan


def _documents(
    warehouse: WarehouseResource, benchmark: Benchmark
) -> tuple[list[Document], list[tuple[str, Mapping[str, object]]]]:
    """A dataset's documents and few-shot pool (none for a harness task, which reads its own data)."""
    if not benchmark.is_dataset:
        return [], []
    with warehouse.store(InputStore) as store:
        documents, fewshot = store.load_documents(benchmark.name), store.load_fewshot_rows(benchmark.name)
    if not documents:
        raise ValueError(f"{benchmark.name} has no documents yet: materialise benchmark_inputs for it first")
    return documents, fewshot_pool(benchmark, fewshot)[0]


def evaluation_metadata(
    benchmark: Benchmark,
    run: EvaluationRun,
    placement: Mapping[str, object],
    evaluations: SolverEvaluations,
    shown: list,
) -> dict[str, MetadataValue | str | int]:
    """An evaluation's metadata: its solvers, settings and environment (the engine's path for the
    model among it), its results and headline values, the first samples and every document."""
    results = evaluations.results
    table = pd.DataFrame(results)[
        ["solver", "settings_key", "task", "metric", "filter", "value", "ci_low", "ci_high", "n", "num_fewshot"]
    ]
    engine = {"engine": placement["engine"]} if "engine" in placement else {}
    title = f"{benchmark.title}: {run.model}"
    return {
        "dagster/row_count": len(results),
        "roster_model": run.model,
        "viewer": MetadataValue.url(evaluation_link(environment().viewer_base_url, run.benchmark, run.model)),
        "model": run.model_source,
        "model_fingerprint": run.model_fingerprint,
        "solvers": MetadataValue.json(evaluations.summary),
        "settings": MetadataValue.json(run.settings),
        "environment": MetadataValue.json({**run.environment, **engine}),
        "results": markdown_table(table.round(4)),
        "samples": MetadataValue.md(sample_markdown(title, shown, evaluations.documents, "`samples`")),
        "every_document": MetadataValue.md(every_document(run.benchmark, [run.model])),
        **{
            f"{r['solver']}/{r['task']}/{r['metric']}"
            + ("" if r["filter"] == "none" else f",{r['filter']}"): MetadataValue.float(float(r["value"]))
            for r in results[:MAX_TABLE_ROWS]
            if r["value"] is not None and (r["is_group"] or r["task"] in (benchmark.task, benchmark.name))
        },
    }


@asset(
    partitions_def=evaluation_partitions,
    deps=[benchmark_documents, benchmark_fewshot_rows],
    group_name="benchmark_evaluation",
    kinds={"pytorch", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def benchmark_evaluation(
    context: AssetExecutionContext,
    config: EvaluationConfig,
    warehouse: WarehouseResource,
    roster: RosterResource,
    evaluation_model: LanguageModelResource,
    gateway: ModelGatewayResource,
) -> MaterializeResult:
    """A roster model on a benchmark (an import's: read from its file, `imported`), by each of its
    solvers: the harness's requests, filters and metrics, or the chat prompt's letter, choices or
    generated answer. Every answer (reused where the same model fingerprint answered the same request
    before), each document's sample and each task's result land in the warehouse under the settings
    key and the solver, with where the run computed its answers and each document's value in history."""
    name, model_name = partition_names(context.partition_key)
    entry = roster.entry(model_name)
    if entry.source is not None:
        return imported(context, warehouse, benchmark_named(name, roster.benchmarks(), None), entry)
    benchmark, plan = _plan(context, config, roster, entry)
    resource = evaluation_model.for_entry(entry)
    model = resource.load(entry_gateway(entry, gateway).gateway())
    tags = {"eval/model": model.name, "eval/model_fingerprint": model.fingerprint}
    context.instance.add_run_tags(context.run_id, tags)
    documents, pool = _documents(warehouse, benchmark)
    with warehouse.store(EvaluationStore) as store:
        stored = {} if config.recompute else store.load_answers(model.fingerprint)
    placement = model.describe_placement()
    computed_in = describe_environment(placement, resource.batch_size).as_row()
    run = EvaluationRun(
        name, model_name, model.name, model.fingerprint, context.run_id, plan.settings.describe(), computed_in
    )
    job = EvaluationJob(
        benchmark=benchmark, settings=plan.settings, model=model, batch_size=resource.batch_size,
        max_new_tokens=resource.max_new_tokens, documents=documents, pool=pool, stored=stored,
        keep=keeper(warehouse, run), environment=environment(),
    )  # fmt: skip
    label = f"{name} {model_name}"
    evaluations = evaluate_solvers(job, progress_reporters(context, label), saver(warehouse, run), context.log, label)
    with warehouse.store(EvaluationStore) as store:
        shown = store.load_samples(name, model_name, limit=40).to_dict("records")
    return MaterializeResult(metadata=evaluation_metadata(benchmark, run, placement, evaluations, shown))


def imported(
    context: AssetExecutionContext, warehouse: WarehouseResource, benchmark: Benchmark, entry: RosterEntry
) -> MaterializeResult:
    """An imported entry's evaluation of the benchmark, read from its file (no model is opened):
    its samples matched to the warehouse's documents by content, each with its file and line in
    `import_lineage`, those matching none in `import_rejections`, and the tool's results. A file that
    is not what it claims fails the run naming the file and line, and nothing of it lands."""
    source = Path(str(entry.source))
    with warehouse.store(EvaluationStore) as store:
        known = store.known_documents(benchmark.name)
        result = (
            inspect_evaluation(read_inspect_log(source), benchmark, known, store.known_prompts(benchmark.name))
            if is_inspect_log(source)
            else imported_evaluation(read_harness_output(source), benchmark, known, DEFAULT_SEED)
        )
    run = EvaluationRun(
        benchmark.name, entry.name, result.source, result.fingerprint, context.run_id, result.settings, {}
    )
    with warehouse.store(EvaluationStore, warehouse.import_memory_limit) as store:
        store.save_import(run, result)
    for rejection in result.rejections[:20]:
        context.log.warning(f"{rejection.file} line {rejection.line}: {rejection.reason}")
    evaluation = result.evaluation
    rows = pd.DataFrame([r.__dict__ for r in evaluation.results])
    shown = ["task", "metric", "filter", "value", "ci_low", "ci_high", "n", "num_fewshot"]
    rejected = pd.DataFrame([r.__dict__ for r in result.rejections], columns=["file", "line", "task", "reason"])
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(evaluation.results),
            "roster_model": entry.name,
            "viewer": MetadataValue.url(evaluation_link(environment().viewer_base_url, benchmark.name, entry.name)),
            "model": result.source,
            "model_fingerprint": result.fingerprint,
            "imported_from": MetadataValue.path(result.settings["results_file"]),
            "settings": MetadataValue.json(result.settings),
            "samples_matched": len(evaluation.samples),
            "samples_rejected": len(result.rejections),
            "results": markdown_table(rows[shown].round(4)),
            "rejections": markdown_table(rejected, 20),
        }
    )


# A comparison's columns its metadata shows.
COMPARISON_COLUMNS = [
    "model_b", "relation", "solver", "settings_key", "task", "metric", "filter", "items", "accuracy_a", "accuracy_b",
    "difference", "only_a", "only_b", "mcnemar_p", "ci_low", "ci_high", "flipped_to_wrong", "environment_differences",
]  # fmt: skip


class ComparisonConfig(Config):
    compare_with: str | None = Field(
        default=None,
        description="Another roster entry to compare with too (relation 'chosen'), beside the entry's "
        "baseline and predecessor.",
    )

    def references(self, roster: RosterResource, name: str) -> dict[str, str]:
        """The entries the roster model is compared with, by relation."""
        chosen = {"chosen": roster.entry(self.compare_with).name} if self.compare_with else {}
        return {**roster.entry(name).references(), **chosen}


def comparison_links(benchmark: str, name: str, references: Mapping[str, str]) -> dict[str, MetadataValue]:
    """The viewer's page of the model against each entry it is compared with, by relation."""
    base_url = environment().viewer_base_url
    return {
        f"viewer_{relation}": MetadataValue.url(comparison_link(base_url, benchmark, name, reference))
        for relation, reference in references.items()
    }


@asset(
    partitions_def=evaluation_partitions,
    deps=[benchmark_evaluation, benchmark_documents],
    group_name="benchmark_evaluation",
    kinds={"scipy", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def model_comparison(
    context: AssetExecutionContext, config: ComparisonConfig, warehouse: WarehouseResource, roster: RosterResource
) -> MaterializeResult:
    """The roster model against the entries it is compared with (its baseline, and its predecessor
    for a checkpoint) on the documents both were scored on, per settings key, solver, task, filter
    and metric: the difference (this model minus the other), an exact McNemar test on the documents
    they disagree on (or why none applies), the 95% interval of the difference, the documents that
    flipped from right to wrong, and what differed where the two sides' answers were computed."""
    benchmark, name = partition_names(context.partition_key)
    references = config.references(roster, name)
    with warehouse.store(EvaluationStore) as store:
        rows = store.load_document_values(benchmark, [name, *references.values()])
        environments = store.load_evaluation_runs()
    comparisons = comparison_rows(benchmark, name, references, rows, environments)
    with warehouse.store(ComparisonStore) as store:
        store.replace_comparisons(benchmark, name, comparisons)
    missing = not_comparable(references, comparisons)
    for reference in missing:
        context.log.warning(f"{benchmark}: {name} has no scores in common with its {reference} yet")
    frame = pd.DataFrame(comparisons)
    shown = frame[COMPARISON_COLUMNS].round(4) if len(frame) else frame
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(frame),
            "roster_model": name,
            **comparison_links(benchmark, name, references),
            "compared_with": MetadataValue.json(references),
            "not_comparable_yet": MetadataValue.json(missing),
            "comparison": markdown_table(shown),
            "items": MetadataValue.md(
                "\n\n".join(side_by_side(name, other, rows) for other in references.values())
                or "_no model to compare with_"
            ),
            "every_document": MetadataValue.md(every_document(benchmark, [name, *references.values()])),
        }
    )


@asset(
    group_name="benchmark_protocols",
    deps=[benchmark_evaluation],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
    automation_condition=AFTER_ANY_EVALUATION,
)
def protocol_scores(
    context: AssetExecutionContext, warehouse: WarehouseResource, roster: RosterResource
) -> MaterializeResult:
    """Every declared protocol's tasks per roster model (a score, or why it is missing) and their
    average, complete or partial: the Open LLM Leaderboard's v1 and v2 numbers."""
    with warehouse.store(EvaluationStore) as store:
        results = store.load_results()
    metadata: dict[str, MetadataValue | int] = {"dagster/row_count": len(results)}
    for protocol in roster.protocols().values():
        rows = protocol_rows(protocol, results)
        with warehouse.store(LeaderboardStore) as store:
            store.replace_protocol_scores(protocol.name, rows)
        metadata[protocol.name] = markdown_table(protocol_table(rows))
        for row in (r for r in rows if r["task"] == "average"):
            context.log.info(f"{protocol.title} {row['model']}: {row['score']} ({row['status']})")
            if row["score"] is not None:
                label = "average" if row["status"] == "complete" else f"partial average ({row['n']} tasks)"
                metadata[f"{protocol.name}/{row['model']}/{label}"] = MetadataValue.float(float(row["score"]))
    return MaterializeResult(metadata=metadata)


@asset(
    group_name="benchmark_protocols",
    deps=[benchmark_evaluation, protocol_scores],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
    automation_condition=AFTER_ANY_EVALUATION,
)
def leaderboard(warehouse: WarehouseResource, roster: RosterResource) -> MaterializeResult:
    """The roster's leaderboard: each model's headline on each benchmark with its 95% interval and
    each protocol's average (complete or partial), as a table in the metadata, the table
    `leaderboard` (one row per model and benchmark) and the view `leaderboard_wide` (one row per
    model, sortable in SQL), and a plot of each model's scores."""
    benchmarks = roster.benchmarks()
    with warehouse.store(EvaluationStore) as store:
        headlines, sources = headline_rows(store.load_results(), benchmarks), store.imported_sources()
    with warehouse.store(LeaderboardStore) as store:
        store.replace_leaderboard(headlines)
        averages = [r for r in store.load_protocol_scores() if r["task"] == "average"]
    table = leaderboard_table(headlines, averages, benchmarks, sources)
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(table),
            "leaderboard": markdown_table(table, disable_numparse=True),
            "plot": MetadataValue.md(leaderboard_plot(headlines)) if headlines else "no scores yet",
            **{f"{h['model']}/{h['benchmark']}": MetadataValue.float(float(h["value"])) for h in headlines},
        }
    )


# --- evaluations written out for the tools users already open (inspect_ai logs) ---

DISTRIBUTION = "lm-eval-platform"


class ExportConfig(Config):
    folder: str | None = Field(
        default=None,
        description="The folder the logs are written to. Default: the benchmark's folder in EVAL_EXPORTS_DIR.",
    )

    def benchmark_folder(self, benchmark: str) -> Path:
        """The folder given (as it is), else the benchmark's under EVAL_EXPORTS_DIR."""
        return Path(self.folder) if self.folder else environment().exports_dir / benchmark


def export_partition(warehouse: WarehouseResource, benchmark: str, model: str, folder: Path) -> dict[Path, int]:
    """The roster model's evaluations of the benchmark as inspect_ai logs in `folder`, each replaced
    whole; each file and its number of samples."""
    with warehouse.store(EvaluationStore) as store:
        evaluations = store.exported_evaluations(benchmark, model)
        if not evaluations:
            raise ValueError(f"{benchmark}|{model}: the warehouse holds no evaluation of it to export")
        return export_inspect_logs(evaluations, store.exported_samples, folder, version(DISTRIBUTION))


@asset(
    partitions_def=evaluation_partitions,
    deps=[benchmark_evaluation],
    group_name="benchmark_evaluation",
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
)
def inspect_log(
    context: AssetExecutionContext, config: ExportConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """A roster model's evaluation of a benchmark as inspect_ai logs (one per settings key and
    solver), which `inspect view` opens and `inspect_ai.log.read_eval_log` reads: every document and
    answer a sample with its scores, the results, the model's fingerprint and settings."""
    benchmark, model = partition_names(context.partition_key)
    written = export_partition(warehouse, benchmark, model, config.benchmark_folder(benchmark))
    return MaterializeResult(
        metadata={
            "files": MetadataValue.md("\n".join(f"- `{path}`: {count} samples" for path, count in written.items())),
            "samples": sum(written.values()),
            "open_with": f"inspect view --log-dir {config.benchmark_folder(benchmark)}",
        }
    )
