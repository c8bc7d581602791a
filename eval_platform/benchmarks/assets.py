"""Benchmark validation: a spec's raw rows (and few-shot rows) -> prompts, one partition per
benchmark; then, one partition per benchmark and roster model, a spec's predictions -> scores ->
comparisons, or a harness benchmark's evaluation -> comparisons (the job model_evaluation runs
whichever the benchmark is); and the named protocols' results and the leaderboard over them."""

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
from dagster import AssetExecutionContext, AutomationCondition, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from eval_platform.benchmarks.comparison import comparison_rows
from eval_platform.benchmarks.harness_format import harness_item_scores
from eval_platform.benchmarks.harness_tasks import (
    HarnessRun,
    evaluate_run,
    headline_rows,
    load_declarations,
    result_rows,
    sample_rows,
)
from eval_platform.benchmarks.leaderboard import (
    HARNESS_MODE,
    PRIMARY_PROTOCOL,
    harness_headline_scores,
    headline_scores,
    leaderboard_plot,
    leaderboard_table,
    short_fingerprint,
)
from eval_platform.benchmarks.leaderboard_v2 import PROTOCOL as V2_PROTOCOL
from eval_platform.benchmarks.leaderboard_v2 import protocol_rows, v2_table
from eval_platform.benchmarks.partitions import (
    benchmark_partitions,
    evaluation_partitions,
    partition_names,
)
from eval_platform.benchmarks.prediction import MODES, PredictionSettings, ProgressLog, predict, resolve_format
from eval_platform.benchmarks.protocols import PROTOCOLS, protocol_results
from eval_platform.benchmarks.resources import RosterResource, entry_gateway, entry_model
from eval_platform.benchmarks.roster import RosterEntry
from eval_platform.benchmarks.samples import harness_sample_markdown, sample_markdown, side_by_side
from eval_platform.benchmarks.scoring import aggregate
from eval_platform.benchmarks.specs import BENCHMARKS, BenchmarkSpec, preprocess_rows
from eval_platform.benchmarks.store import BenchmarkStore, prediction_key, predictions_frame
from eval_platform.common.ingestion import LoadedRows, load_rows
from eval_platform.common.reproducibility import describe_environment
from eval_platform.common.resources import (
    DATA_DIR,
    WAREHOUSE_POOL,
    LanguageModelResource,
    ModelGatewayResource,
    WarehouseResource,
)
from eval_platform.common.warehouse import utc_now

BENCHMARK_DATA = DATA_DIR / "benchmarks"


def markdown_table(frame: pd.DataFrame, rows: int = 10, **tabulate: Any) -> MetadataValue:
    return MetadataValue.md(frame.head(rows).to_markdown(index=False, **tabulate) if len(frame) else "_no rows_")


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


def items_side_by_side(name: str, references: dict[str, str], rows: list[dict]) -> MetadataValue:
    """The model's items beside each reference model's, those scored differently first."""
    return MetadataValue.md(
        "\n\n".join(side_by_side(name, other, rows) for other in references.values()) or "_no model to compare with_"
    )


class SourceConfig(Config):
    source: str | None = Field(
        default=None,
        description="A local JSONL/JSON/Parquet/CSV file or a Hugging Face dataset id. "
        "Default: the slice shipped in data/benchmarks/.",
    )
    hub_config: str | None = Field(default=None, description="Dataset configuration name, for a hub id.")
    split: str | None = Field(default=None, description="Split to load, for a hub id.")
    limit: int | None = Field(default=None, description="Read only the first N rows.")


def _frames(
    benchmark: str, source: str, loaded: LoadedRows, unique_ids: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows and rejections, with the file and line of each; with `unique_ids`, a repeated id is
    rejected (its row keeps its position, so later rows' positions are the source's)."""
    now, seen, rows, rejected = utc_now(), set(), [], []
    for number, ((row_id, row), line) in enumerate(zip(loaded.rows, loaded.lines, strict=False)):
        text = json.dumps(row, default=str, ensure_ascii=False)
        if unique_ids and row_id in seen:
            rejected.append(
                {"source_row_id": row_id, "line": line, "row_json": text, "reason": "duplicate source row id"}
            )
        else:
            rows.append({"source_row_id": row_id, "row_number": number, "line": line, "row_json": text})
        seen.add(row_id)
    rejected += [
        {"source_row_id": None, "line": r.line, "row_json": r.text, "reason": r.reason} for r in loaded.rejected
    ]
    columns = ["source_row_id", "line", "row_json", "reason"]
    return (
        pd.DataFrame(rows, columns=["source_row_id", "row_number", "line", "row_json"]).assign(
            benchmark=benchmark, source=source, ingested_at=now
        ),
        pd.DataFrame(rejected, columns=columns).assign(benchmark=benchmark, source=source, rejected_at=now),
    )


def _rejection_metadata(rejected: pd.DataFrame) -> MetadataValue:
    return markdown_table(rejected[["line", "source_row_id", "reason"]], 20)


def _input_spec(context: AssetExecutionContext) -> BenchmarkSpec | None:
    """The spec of an inputs partition; None (logged) for a harness benchmark's, whose data the
    harness reads from its files when harness_evaluation evaluates it."""
    spec = BENCHMARKS.get(context.partition_key)
    if spec is None:
        context.log.info(
            f"{context.partition_key} is not a spec's benchmark: it has no inputs here (the harness "
            "reads its data when harness_evaluation evaluates it)"
        )
    return spec


@asset(
    partitions_def=benchmark_partitions,
    group_name="benchmark_ingestion",
    kinds={"huggingface", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_raw_rows(
    context: AssetExecutionContext, config: SourceConfig, warehouse: WarehouseResource
) -> Iterator[MaterializeResult]:
    """Rows of the benchmark's evaluation split, verbatim as JSON, keyed by source row id. A line
    that cannot be read, or repeats an id, is kept in `ingest_rejections` with its line and reason."""
    if (spec := _input_spec(context)) is None:
        return
    source = config.source or str(BENCHMARK_DATA / spec.data_file)
    loaded = load_rows(source, config.hub_config or spec.hub_name, config.split or spec.hub_split, config.limit)
    raw, rejected = _frames(spec.name, source, loaded)
    with warehouse.store(BenchmarkStore) as store:
        store.replace_raw_rows(spec.name, raw, rejected)
    for reject in rejected.itertuples():
        context.log.warning(f"{source} line {reject.line}: {reject.reason}")
    yield MaterializeResult(
        metadata={
            "dagster/row_count": len(raw),
            "rejected_rows": len(rejected),
            "source": source,
            "rejections": _rejection_metadata(rejected),
            "preview": markdown_table(raw[["source_row_id", "row_json"]], 5),
        }
    )


@asset(
    partitions_def=benchmark_partitions,
    group_name="benchmark_ingestion",
    kinds={"huggingface", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_fewshot_rows(
    context: AssetExecutionContext, config: SourceConfig, warehouse: WarehouseResource
) -> Iterator[MaterializeResult]:
    """The benchmark's few-shot split, in order: the pool its few-shot examples are drawn from.
    Default: the slice in data/benchmarks/fewshot/ (none ships for HellaSwag, whose train split is
    not available offline; point `source` at it)."""
    if (spec := _input_spec(context)) is None:
        return
    fewshot = spec.fewshot
    default = str(BENCHMARK_DATA / "fewshot" / fewshot.data_file) if fewshot and fewshot.data_file else None
    source = config.source or default
    if fewshot is None or source is None:
        note = (
            "zero-shot only"
            if fewshot is None
            else f"no few-shot split shipped: set source to {fewshot.hub_path} (split {fewshot.hub_split}) with hub "
            "access, or to a local file"
        )
        with warehouse.store(BenchmarkStore) as store:
            store.replace_fewshot_rows(spec.name, None, None)
        context.log.info(f"{spec.name}: {note}")
        yield MaterializeResult(metadata={"dagster/row_count": 0, "note": note})
        return
    loaded = load_rows(source, config.hub_config or fewshot.hub_name, config.split or fewshot.hub_split, config.limit)
    rows, rejected = _frames(spec.name, source, loaded, unique_ids=False)  # the pool keeps every row, as the harness
    with warehouse.store(BenchmarkStore) as store:
        store.replace_fewshot_rows(spec.name, rows, rejected)
    yield MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "rejected_rows": len(rejected),
            "source": source,
            "harness_task": spec.harness_task,
            "shots": fewshot.shots,
            "rejections": _rejection_metadata(rejected),
        }
    )


@asset(
    partitions_def=benchmark_partitions,
    deps=[benchmark_raw_rows, benchmark_fewshot_rows],
    group_name="benchmark_preprocessing",
    kinds={"python", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_prompts(context: AssetExecutionContext, warehouse: WarehouseResource) -> Iterator[MaterializeResult]:
    """Each raw row as system_prompt, user_prompt, labels and real_answer, and its lm-evaluation-
    harness requests zero-shot and with the leaderboard's shots, built by the harness's own task
    (its templates, few-shot sampler and seed) over the rows that parse. Rows that cannot be parsed,
    and few-shot rows left out of the pool, go to prompt_rejections."""
    if (spec := _input_spec(context)) is None:
        return
    with warehouse.store(BenchmarkStore) as store:
        raw = store.load_raw_rows(spec.name)
        fewshot = store.load_fewshot_rows(spec.name)
    rows = {r["source_row_id"]: r["row_json"] for r in raw}
    prepared = preprocess_rows(
        spec,
        [(r["source_row_id"], json.loads(r["row_json"])) for r in raw],
        [(r["source_row_id"], json.loads(r["row_json"])) for r in fewshot],
    )
    numbers = {r["source_row_id"]: r["row_number"] for r in raw}
    prompt_frame = (
        pd.DataFrame(prepared.prompts).assign(row_number=lambda f: f["source_row_id"].map(numbers))
        if prepared.prompts
        else pd.DataFrame()
    )
    reject_frame = pd.DataFrame(prepared.rejected, columns=["benchmark", "source_row_id", "reason"]).assign(
        row_json=lambda f: f["source_row_id"].map(rows), rejected_at=utc_now()
    )
    request_frame = pd.DataFrame(
        [
            {
                "prompt_id": r["prompt_id"],
                "benchmark": spec.name,
                "num_fewshot": r["num_fewshot"],
                **r["item"].fields(),
                "generation_kwargs": json.dumps(r["item"].generation_kwargs) if r["item"].generation_kwargs else None,
            }
            for r in prepared.requests
        ]
    )
    with warehouse.store(BenchmarkStore) as store:
        store.replace_prompts(spec.name, prompt_frame, reject_frame, request_frame)
    for reject in prepared.rejected:
        context.log.warning(f"{spec.name} row {reject['source_row_id']} rejected: {reject['reason']}")
    for shots, reason in prepared.unavailable_shots.items():
        context.log.warning(f"{spec.name}: no {shots}-shot prompts: {reason}")
    per_shots = request_frame.groupby("num_fewshot").size().to_dict() if len(request_frame) else {}
    yield MaterializeResult(
        metadata={
            "dagster/row_count": len(prompt_frame),
            "rejected_rows": len(reject_frame),
            "harness_requests": MetadataValue.json({f"{k}-shot": int(v) for k, v in per_shots.items()}),
            "unavailable_shots": MetadataValue.json({f"{k}-shot": v for k, v in prepared.unavailable_shots.items()}),
            "reject_reasons": markdown_table(reject_frame[["source_row_id", "reason"]], 20),
            "preview": markdown_table(prompt_frame[["prompt_id", "user_prompt", "real_answer"]], 3)
            if prepared.prompts
            else "none",
        }
    )


DEFAULT_MODES = ("letter", "loglikelihood")


class PredictionConfig(Config):
    modes: list[str] | None = Field(
        default=None,
        description="Prediction modes, of those the benchmark supports: letter, loglikelihood, generate. "
        "Default: the roster entry's, else letter and loglikelihood. A benchmark supporting "
        "none of them uses its own (GSM8K: generate).",
    )
    loglikelihood_format: str = Field(default="harness", description="harness (lm-evaluation-harness) or chat.")
    generation_format: str = Field(
        default="chat", description="chat, or harness (its few-shot prompt, stop sequences and filters)."
    )
    num_fewshot: int = Field(
        default=0,
        description="Shots for the harness format: 0, or the benchmark's few-shot "
        "number (ARC 25, HellaSwag 10, MMLU 5, Winogrande 5, GSM8K 5).",
    )
    protocol: str | None = Field(
        default=None,
        description="A named protocol (open_llm_leaderboard_v1): its mode, "
        "format and shots for this benchmark, instead of the above. "
        "Default: the roster entry's.",
    )
    harness_max_new_tokens: int | None = Field(
        default=None,
        description="Generation budget in the harness format; None: the harness task's own (256), "
        "as the protocol and parity with lm-evaluation-harness need.",
    )
    recompute: bool = Field(default=False, description="Ignore stored predictions of the same model.")


def run_environment(
    context: AssetExecutionContext, benchmark: str, model: Any, batch_size: int
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Where this run computes a model's answers (see common/reproducibility.py): as metadata (with
    the engine's path for the model, where it reports one), and as its row of `prediction_runs` or
    `harness_runs`."""
    placement = model.describe_placement()
    environment = describe_environment(placement, batch_size).as_row()
    engine = {"engine": placement["engine"]} if "engine" in placement else {}
    return {**environment, **engine}, pd.DataFrame(
        [
            {
                "run_id": context.run_id,
                "benchmark": benchmark,
                "model": model.name,
                "model_fingerprint": model.fingerprint,
                **environment,
                "recorded_at": utc_now(),
            }
        ]
    )


def _plan(spec: BenchmarkSpec, config: PredictionConfig, entry: RosterEntry) -> list[tuple[str, str, int]]:
    """(mode, prompt format, shots) to run for the benchmark: the run config's, else the roster entry's."""
    protocol = config.protocol or entry.protocol
    if protocol:
        if protocol not in PROTOCOLS:
            raise ValueError(f"Unknown protocol {protocol!r}; known: {sorted(PROTOCOLS)}")
        task = PROTOCOLS[protocol].task_for(spec.name)
        return [(task.mode, task.prompt_format, task.num_fewshot)]
    modes = config.modes or entry.modes or DEFAULT_MODES
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"Unknown prediction mode(s) {unknown}; expected some of {sorted(MODES)}")
    plan = []
    for name in [m for m in modes if m in spec.modes] or [spec.modes[0]]:
        mode = MODES[name]
        requested = config.generation_format if name == "generate" else config.loglikelihood_format
        prompt_format = resolve_format(mode, requested if spec.chat_format else "harness")
        plan.append((name, prompt_format, config.num_fewshot if prompt_format == "harness" else 0))
    return plan


def of_the_other_kind(context: AssetExecutionContext, spec_assets: bool) -> bool:
    """Whether the partition's benchmark is of the other kind than the asset's: `model_evaluation`
    runs both kinds' assets for a partition, and each kind's materialise only for their own
    benchmarks (a spec's, or any other name: a harness benchmark); the other kind's are skipped,
    those after them too."""
    benchmark, _ = partition_names(context.partition_key)
    other = (benchmark in BENCHMARKS) != spec_assets
    if other:
        context.log.info(
            f"{benchmark} is {'not ' if spec_assets else ''}a spec's benchmark: "
            f"{'harness_evaluation' if spec_assets else 'benchmark_predictions'} evaluates it"
        )
    return other


def _partition(context: AssetExecutionContext) -> tuple[BenchmarkSpec, str]:
    """The spec and the roster model's name of an evaluation partition (refused, named, for a harness
    benchmark's: model_evaluation skips these assets there, and harness_evaluation evaluates it)."""
    benchmark, name = partition_names(context.partition_key)
    if benchmark not in BENCHMARKS:
        raise ValueError(
            f"{benchmark} is not a spec's benchmark ({', '.join(BENCHMARKS)}): harness_evaluation "
            "evaluates it, in the job model_evaluation"
        )
    return BENCHMARKS[benchmark], name


@asset(
    partitions_def=evaluation_partitions,
    deps=[benchmark_prompts],
    group_name="benchmark_prediction",
    kinds={"pytorch", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def benchmark_predictions(
    context: AssetExecutionContext,
    config: PredictionConfig,
    warehouse: WarehouseResource,
    roster: RosterResource,
    evaluation_model: LanguageModelResource,
    gateway: ModelGatewayResource,
) -> Iterator[MaterializeResult]:
    """The roster model's answer to every prompt of the benchmark in each mode, with per-label
    probabilities (letter), per-choice log-likelihoods or the generated text, and where this run
    computed them (`prediction_runs`). The model and its settings are the roster entry's, over the
    evaluation_model and gateway resources' settings. Predictions already stored for the same model
    fingerprint, prompt, mode, format and shots are reused, not computed again, and keep the run
    that computed them. Long runs log their progress (items done, items/s, time left). A harness
    benchmark's partition is harness_evaluation's: skipped here."""
    if of_the_other_kind(context, spec_assets=True):
        return
    spec, name = _partition(context)
    entry = roster.entry(name)
    plan = _plan(spec, config, entry)
    resource = entry_model(entry, evaluation_model)
    model = resource.load(entry_gateway(entry, gateway).gateway())
    context.instance.add_run_tags(
        context.run_id, {"eval/model": model.name, "eval/model_fingerprint": model.fingerprint}
    )
    environment, run = run_environment(context, spec.name, model, resource.batch_size)
    counts = {}
    for mode_name, prompt_format, shots in plan:
        mode = MODES[mode_name]
        key = prediction_key(model.fingerprint, spec.name, mode.name, prompt_format, shots)
        with warehouse.store(BenchmarkStore) as store:
            prompts = store.load_prompts(spec.name, shots)
            stored = store.stored_prediction_ids(key)
        label = f"{spec.name} {mode.name} ({prompt_format}, {shots}-shot)"
        if prompt_format == "harness" and any(p["contexts"] is None for p in prompts):
            raise ValueError(
                f"{label}: the prompts have no {shots}-shot harness requests. Materialise "
                f"benchmark_fewshot_rows (with the few-shot split) and benchmark_prompts first; "
                f"{spec.name} builds {list(spec.shot_counts())}-shot prompts."
            )
        todo = [p for p in prompts if config.recompute or p["prompt_id"] not in stored]
        passes_before = getattr(model, "forward_passes", 0)
        settings = PredictionSettings(
            resource.batch_size,
            resource.max_new_tokens,
            config.harness_max_new_tokens,
            progress=ProgressLog(context.log.info, label),
        )
        new = predict(mode, model, todo, prompt_format, spec, settings) if todo else []
        evaluation = pd.DataFrame(
            [{**key, "model": name, "model_source": model.name, "run_id": context.run_id, "evaluated_at": utc_now()}]
        )
        with warehouse.store(BenchmarkStore) as store:
            store.save_predictions(
                key,
                predictions_frame(model.name, key, new, utc_now(), context.run_id),
                config.recompute,
                run,
                evaluation,
            )
        counts[f"{mode.name}/{prompt_format}/{shots}-shot"] = {
            "computed": len(new),
            "reused": len(prompts) - len(todo),
            "forward_passes": getattr(model, "forward_passes", 0) - passes_before,
        }
        context.log.info(f"{label}: {counts[f'{mode.name}/{prompt_format}/{shots}-shot']}")
    yield MaterializeResult(
        metadata={
            "dagster/row_count": sum(c["computed"] + c["reused"] for c in counts.values()),
            "roster_model": name,
            "model": model.name,
            "model_fingerprint": model.fingerprint,
            "modes": MetadataValue.json(counts),
            "environment": MetadataValue.json(environment),
        }
    )


@asset(
    partitions_def=evaluation_partitions,
    deps=[benchmark_raw_rows, benchmark_prompts, benchmark_predictions],
    group_name="benchmark_scoring",
    kinds={"python", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def benchmark_scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The roster model's score on each item per mode, format, shots and metric, and their mean with
    a 95% interval and the per-item report. In the harness's format the harness's own task scores
    the answers (its filters and process_results); each filter's answer is an item score's row."""
    spec, name = _partition(context)
    with warehouse.store(BenchmarkStore) as store:
        rows = store.load_scoring_inputs(spec.name, name)
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(
            (row["model"], row["model_fingerprint"], row["mode"], row["prompt_format"], row["num_fewshot"]), []
        ).append(row)
    items, scores, numbers = [], [], {}
    for (model, fingerprint, mode_name, prompt_format, shots), group in groups.items():
        if prompt_format == "harness":
            by_prompt = harness_item_scores(spec, group)
            per_item = [by_prompt[row["prompt_id"]] for row in group]
            metrics = list(dict.fromkeys(metric for scored in per_item for metric in scored))
        else:
            mode = MODES[mode_name]
            per_item = [mode.item_scores(row, spec) for row in group]
            metrics = mode.metrics(spec)
        for metric in metrics:
            metric_items = [scored[metric] for scored in per_item]
            score = aggregate(metric_items)
            context.log.info(f"{spec.name} {model} {mode_name}/{prompt_format}/{shots}-shot {metric}\n{score.report}")
            key = {
                "model": model,
                "model_fingerprint": fingerprint,
                "benchmark": spec.name,
                "mode": mode_name,
                "prompt_format": prompt_format,
                "num_fewshot": shots,
                "metric": metric,
            }
            scores.append({**key, **vars(score)})
            items += [
                {
                    **key,
                    "prompt_id": row["prompt_id"],
                    "value": item.value,
                    "predicted": item.predicted,
                    "reference": item.reference,
                }
                for row, item in zip(group, metric_items, strict=False)
            ]
            numbers[f"accuracy/{mode_name}/{prompt_format}/{shots}-shot/{metric}"] = score.accuracy
    frame = pd.DataFrame(scores).assign(scored_at=utc_now()) if scores else pd.DataFrame()
    with warehouse.store(BenchmarkStore) as store:
        store.replace_scores(spec.name, name, pd.DataFrame(items), frame, context.run_id)
        views = store.load_item_views(spec.name, name)
    table = (
        frame[["model", "mode", "prompt_format", "num_fewshot", "metric", "n", "accuracy", "ci_low", "ci_high"]].round(
            3
        )
        if scores
        else frame
    )
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(frame),
            "roster_model": name,
            "accuracy": markdown_table(table, 50),
            "samples": MetadataValue.md(sample_markdown(f"{spec.title}: {name}", views)),
            **{name: MetadataValue.float(value) for name, value in numbers.items()},
        }
    )


@asset(
    partitions_def=evaluation_partitions,
    deps=[benchmark_prompts, benchmark_predictions, benchmark_scores],
    group_name="benchmark_scoring",
    kinds={"scipy", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def model_comparison(
    context: AssetExecutionContext, config: ComparisonConfig, warehouse: WarehouseResource, roster: RosterResource
) -> MaterializeResult:
    """The roster model against the entries it is compared with (its baseline, and its predecessor
    for a checkpoint) on the same prompts, mode, format and shots: the accuracy difference (this
    model minus the other), an exact McNemar test on the items they disagree on (or why none
    applies), a paired bootstrap 95% interval, the items that flipped from right to wrong, and where
    the runs behind the two sides computed differently (see `prediction_runs`)."""
    spec, name = _partition(context)
    references = config.references(roster, name)
    with warehouse.store(BenchmarkStore) as store:
        rows = store.load_item_scores(spec.name, [name, *references.values()])
        environments = store.load_prediction_runs(spec.name)
    frame = pd.DataFrame(comparison_rows(spec.name, name, references, rows, environments))
    frame = frame.assign(compared_at=utc_now()) if len(frame) else frame
    with warehouse.store(BenchmarkStore) as store:
        store.replace_model_comparisons(spec.name, name, frame)
    missing = [
        f"{relation} {reference}"
        for relation, reference in references.items()
        if not len(frame) or reference not in set(frame["model_b"])
    ]
    for reference in missing:
        context.log.warning(f"{spec.name}: {name} has no scores in common with its {reference} yet")
    table = (
        frame.assign(
            mcnemar_p=[
                f"{p:.4g}" if p == p and p is not None else test
                for p, test in zip(frame["mcnemar_p"], frame["paired_test"], strict=False)
            ]
        )[
            [
                "model_b",
                "relation",
                "mode",
                "prompt_format",
                "num_fewshot",
                "metric",
                "items",
                "accuracy_a",
                "accuracy_b",
                "difference",
                "only_a",
                "only_b",
                "mcnemar_p",
                "ci_low",
                "ci_high",
                "flipped_to_wrong",
                "environment_differences",
            ]
        ].round(4)
        if len(frame)
        else frame
    )
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(frame),
            "roster_model": name,
            "compared_with": MetadataValue.json(references),
            "not_comparable_yet": MetadataValue.json(missing),
            "comparison": markdown_table(table, 50),
            "items": items_side_by_side(name, references, rows),
        }
    )


@asset(
    group_name="benchmark_protocols",
    deps=[benchmark_scores],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
    automation_condition=AutomationCondition.eager(),
)
def protocol_scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """Every named protocol's tasks per roster model (a score, or why it is missing) and their
    average, from the benchmark scores: the Open LLM Leaderboard (v1) number. Each model's average
    is its own, labelled complete or partial (how many of the tasks it has)."""
    with warehouse.store(BenchmarkStore) as store:
        scores = store.load_scores()
    metadata = {}
    for protocol in PROTOCOLS.values():
        results = pd.DataFrame(protocol_results(protocol, scores))
        with warehouse.store(BenchmarkStore) as store:
            store.replace_protocol_results(protocol.name, results.assign(computed_at=utc_now()))
        if len(results):
            shown = results[
                ["model", "model_fingerprint", "benchmark", "num_fewshot", "metric", "n", "accuracy", "status"]
            ].assign(model_fingerprint=lambda f: f["model_fingerprint"].map(short_fingerprint))
            metadata[protocol.name] = markdown_table(shown.round(4), 50)
            for row in results[results["benchmark"] == "average"].itertuples():
                context.log.info(f"{protocol.title} {row.model}: average {row.accuracy} ({row.status})")
                if row.accuracy is not None:
                    label = (
                        "average"
                        if row.status == "complete"
                        else f"partial average ({int(row.n)} of {len(protocol.tasks)} tasks)"
                    )
                    metadata[f"{protocol.name}/{row.model}/{label}"] = MetadataValue.float(float(row.accuracy))
    return MaterializeResult(metadata={"dagster/row_count": len(scores), **metadata})


@asset(
    group_name="benchmark_protocols",
    deps=[benchmark_scores, protocol_scores, "harness_evaluation", "normalized_protocol_scores"],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
    automation_condition=AutomationCondition.eager(),
)
def leaderboard(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The roster's leaderboard: each model's headline score per benchmark, a spec's or a harness
    task's, with its 95% interval and its protocol average (complete or partial), as a table in the
    metadata, the DuckDB table `leaderboard` (one row per model and benchmark) and view
    `leaderboard_wide` (one row per model, sortable in SQL), and a plot of each model's scores."""
    with warehouse.store(BenchmarkStore) as store:
        harness = headline_rows(store.load_harness_results(), load_declarations())
        headlines = headline_scores(store.load_scores()) + harness_headline_scores(harness)
        averages = store.load_protocol_averages(PRIMARY_PROTOCOL)
        normalized = store.load_normalized_scores(V2_PROTOCOL)
        store.replace_leaderboard(pd.DataFrame(headlines).assign(computed_at=utc_now()) if headlines else None)
    table = leaderboard_table(headlines, averages)
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(table),
            "leaderboard": markdown_table(table, 100, disable_numparse=True),
            V2_PROTOCOL: markdown_table(v2_table(normalized), 100),
            "harness_benchmarks": markdown_table(pd.DataFrame(harness).round(4), 100),
            "plot": MetadataValue.md(leaderboard_plot(headlines)) if headlines else "no scores yet",
            **{
                f"{h['model']}/{h['benchmark']}"
                + (
                    " (harness)" if h["mode"] == HARNESS_MODE and h["benchmark"] in BENCHMARKS else ""
                ): MetadataValue.float(float(h["accuracy"]))
                for h in headlines
            },
        }
    )


class HarnessEvaluationConfig(Config):
    task: str | None = Field(
        default=None,
        description="The lm-evaluation-harness task or group. Default: the "
        "benchmark's declaration in data/harness/, else the partition's "
        "task name.",
    )
    include_path: list[str] = Field(
        default=[], description="Folders of custom task YAML files (the harness's include_path)."
    )
    data_files: dict[str, dict[str, str]] = Field(
        default={}, description="Local data per task: {task: {split: file}} (JSON or JSONL), over the declaration's."
    )
    overrides: dict[str, dict[str, Any]] = Field(
        default={}, description="Task config keys per task: {task: {key: value}}."
    )
    num_fewshot: int | None = Field(default=None, description="Shots for every task; default: each task's own.")
    limit: int | None = Field(default=None, description="Only each task's first N documents.")
    apply_chat_template: bool | None = Field(
        default=None,
        description="Render prompts with the model's chat template. Default: the roster entry's, else false.",
    )
    fewshot_as_multiturn: bool | None = Field(
        default=None, description="Few-shot examples as chat turns. Default: the roster entry's, else false."
    )
    system_instruction: str | None = Field(default=None, description="A system prompt for every request.")
    bootstrap_iters: int = Field(default=1000, description="Bootstrap iterations for standard errors (0: none).")
    recompute: bool = Field(default=False, description="Ignore answers stored for the same model fingerprint.")


def harness_run(benchmark: str, config: HarnessEvaluationConfig, entry: RosterEntry) -> HarnessRun:
    """The run of a harness benchmark: its declaration (if any), the launchpad's config over it,
    and the roster entry's chat settings."""
    declared = load_declarations().get(benchmark)
    base = declared.run if declared else HarnessRun(task=benchmark)

    def first(*values):
        return next((value for value in values if value is not None), None)

    return HarnessRun(
        task=config.task or base.task,
        include_path=tuple(config.include_path) or base.include_path,
        data_files={**base.data_files, **config.data_files},
        overrides={
            task: {**base.overrides.get(task, {}), **config.overrides.get(task, {})}
            for task in {*base.overrides, *config.overrides}
        },
        num_fewshot=first(config.num_fewshot, base.num_fewshot),
        limit=first(config.limit, base.limit),
        apply_chat_template=bool(first(config.apply_chat_template, entry.apply_chat_template, False)),
        fewshot_as_multiturn=bool(first(config.fewshot_as_multiturn, entry.fewshot_as_multiturn, False)),
        system_instruction=config.system_instruction,
        bootstrap_iters=config.bootstrap_iters,
    )


@asset(
    partitions_def=evaluation_partitions,
    group_name="benchmark_harness",
    kinds={"pytorch", "duckdb"},
    pool=WAREHOUSE_POOL,
    output_required=False,
)
def harness_evaluation(
    context: AssetExecutionContext,
    config: HarnessEvaluationConfig,
    warehouse: WarehouseResource,
    roster: RosterResource,
    evaluation_model: LanguageModelResource,
    gateway: ModelGatewayResource,
) -> Iterator[MaterializeResult]:
    """A roster model on an lm-evaluation-harness task or group: the harness builds the requests
    (its templates, few-shot samplers and seed, chat template), the platform's engine answers them
    (answers stored for the same model fingerprint are reused), and the harness's filters,
    process_results and aggregation score them. Every document's prompt, answers and metrics
    (`harness_samples`), every task's and group's results (`harness_results`) and every answer
    (`harness_answers`) land in the warehouse, the first two under the run's settings key: a run
    with other shots, system instruction or task config is kept beside this one. A spec's partition
    is benchmark_predictions': skipped here."""
    if of_the_other_kind(context, spec_assets=False):
        return
    benchmark, name = partition_names(context.partition_key)
    entry = roster.entry(name)
    run = harness_run(benchmark, config, entry)
    resource = entry_model(entry, evaluation_model)
    model = resource.load(entry_gateway(entry, gateway).gateway())
    context.instance.add_run_tags(
        context.run_id, {"eval/model": model.name, "eval/model_fingerprint": model.fingerprint}
    )
    with warehouse.store(BenchmarkStore) as store:
        stored = {} if config.recompute else store.load_harness_answers(model.fingerprint)
    outcome = evaluate_run(run, model, resource.batch_size, stored, entry.reasoning_end)
    now, key = utc_now(), run.settings_key()
    ids = {"benchmark": benchmark, "model": name, "model_fingerprint": model.fingerprint, "settings_key": key}
    computed = [(key, a) for key, a in outcome.answers.items() if a.computed]
    answers = pd.DataFrame(
        [
            {
                "model_fingerprint": model.fingerprint,
                "request_key": key,
                "request_type": a.request_type,
                "arguments": json.dumps(a.arguments, ensure_ascii=False, default=str),
                "response": json.dumps(a.response, ensure_ascii=False),
                "run_id": context.run_id,
                "answered_at": now,
            }
            for key, a in computed
        ]
    )
    samples = pd.DataFrame(sample_rows(outcome)).assign(**ids, run_id=context.run_id)
    results = pd.DataFrame(result_rows(outcome)).assign(
        **ids, settings=json.dumps(run.describe()), run_id=context.run_id, computed_at=now
    )
    environment, environment_row = run_environment(context, benchmark, model, resource.batch_size)
    with warehouse.store(BenchmarkStore) as store:
        store.save_harness_evaluation(benchmark, name, key, answers, samples, results, environment_row)
    shown = results[["task", "metric", "filter", "value", "stderr", "n", "num_fewshot"]].round(4)
    context.log.info(
        f"{benchmark} {name} ({key}): {len(computed)} answers computed in {outcome.model_seconds:.1f} s, "
        f"{len(outcome.answers) - len(computed)} reused\n{shown.to_markdown(index=False)}"
    )
    yield MaterializeResult(
        metadata={
            "dagster/row_count": len(samples),
            "roster_model": name,
            "model_fingerprint": model.fingerprint,
            "harness_task": run.task,
            "settings_key": key,
            "requests": len(outcome.answers),
            "computed": len(computed),
            "reused": len(outcome.answers) - len(computed),
            "model_seconds": MetadataValue.float(outcome.model_seconds),
            "settings": MetadataValue.json(run.describe()),
            "environment": MetadataValue.json(environment),
            "results": markdown_table(shown, 100),
            "samples": MetadataValue.md(
                harness_sample_markdown(f"{benchmark}: {name} ({key})", samples.to_dict("records"))
            ),
            **{
                f"{r.task}/{r.metric}/{r.filter}": MetadataValue.float(float(r.value))
                for r in results.itertuples()
                if r.value == r.value and r.value is not None and (r.is_group or r.task == run.task)
            },
        }
    )


@asset(
    partitions_def=evaluation_partitions,
    deps=[harness_evaluation],
    group_name="benchmark_harness",
    kinds={"scipy", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def harness_model_comparison(
    context: AssetExecutionContext, config: ComparisonConfig, warehouse: WarehouseResource, roster: RosterResource
) -> MaterializeResult:
    """The roster model against its baseline (and predecessor) on the harness benchmark, per settings
    key, task, filter and per-document metric, on the documents both answered: the difference, an exact McNemar
    test (0/1 metrics), a paired bootstrap 95% interval and the documents that flipped to wrong."""
    benchmark, name = partition_names(context.partition_key)
    references = config.references(roster, name)
    with warehouse.store(BenchmarkStore) as store:
        rows = store.load_harness_item_values(benchmark, [name, *references.values()])
        environments = store.load_harness_runs()
    frame = pd.DataFrame(comparison_rows(benchmark, name, references, rows, environments))
    frame = frame.assign(compared_at=utc_now()) if len(frame) else frame
    with warehouse.store(BenchmarkStore) as store:
        store.replace_harness_comparisons(benchmark, name, frame)
    shown = (
        frame[
            [
                "model_b",
                "relation",
                "settings_key",
                "mode",
                "metric",
                "items",
                "accuracy_a",
                "accuracy_b",
                "difference",
                "mcnemar_p",
                "flipped_to_wrong",
                "environment_differences",
            ]
        ].round(4)
        if len(frame)
        else frame
    )
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(frame),
            "roster_model": name,
            "compared_with": MetadataValue.json(references),
            "comparison": markdown_table(shown, 100),
            "items": items_side_by_side(name, references, rows),
        }
    )


@asset(
    group_name="benchmark_protocols",
    deps=[harness_evaluation],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
    automation_condition=AutomationCondition.eager(),
)
def normalized_protocol_scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The Open LLM Leaderboard (v2) per roster model from the harness results: each task's raw score
    and its score rescaled between the random baseline and 1 (0 to 100; BBH and MuSR per subtask,
    then averaged), and their average, complete or partial, each missing task with its reason."""
    with warehouse.store(BenchmarkStore) as store:
        results = store.load_harness_results()
    rows = pd.DataFrame(protocol_rows(results))
    with warehouse.store(BenchmarkStore) as store:
        store.replace_normalized_scores(V2_PROTOCOL, rows.assign(computed_at=utc_now()) if len(rows) else None)
    for row in rows[rows["benchmark"] == "average"].itertuples() if len(rows) else []:
        context.log.info(f"{V2_PROTOCOL} {row.model}: {row.normalized} ({row.status})")
    shown = rows[["model", "benchmark", "metric", "raw", "normalized", "status"]].round(4) if len(rows) else rows
    return MaterializeResult(metadata={"dagster/row_count": len(rows), V2_PROTOCOL: markdown_table(shown, 100)})
