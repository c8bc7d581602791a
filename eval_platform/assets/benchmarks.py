"""Benchmark validation: raw rows -> prompts -> predictions -> scores, one partition per benchmark."""

import json

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from eval_platform.core.benchmarks import BENCHMARKS, preprocess_rows
from eval_platform.core.ingestion import default_source, load_rows
from eval_platform.core.prediction import MODES, PredictionSettings, resolve_format
from eval_platform.core.scoring import score_items
from eval_platform.partitions import benchmark_partitions
from eval_platform.resources import DATA_DIR, WAREHOUSE_POOL, LanguageModelResource, WarehouseResource
from eval_platform.stores import BenchmarkStore
from eval_platform.stores.benchmark_store import prediction_key, predictions_frame
from eval_platform.stores.warehouse import utc_now


def markdown_table(frame: pd.DataFrame, rows: int = 10) -> MetadataValue:
    return MetadataValue.md(frame.head(rows).to_markdown(index=False) if len(frame) else "_no rows_")


class BenchmarkSourceConfig(Config):
    source: str | None = Field(
        default=None,
        description="A local JSONL/JSON/Parquet/CSV file or a Hugging Face dataset id. "
        "Default: the slice shipped in data/benchmarks/.",
    )
    hub_config: str | None = Field(default=None, description="Dataset configuration name, for a hub id.")
    split: str | None = Field(default=None, description="Split to load, for a hub id.")
    limit: int | None = Field(default=None, description="Read only the first N rows.")


@asset(
    partitions_def=benchmark_partitions, group_name="benchmark_ingestion", kinds={"huggingface", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def benchmark_raw_rows(
    context: AssetExecutionContext, config: BenchmarkSourceConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """Rows of the benchmark as loaded by `datasets`, verbatim as JSON, keyed by source row id;
    a repeated id is kept in `ingest_rejections` with its reason."""
    spec = BENCHMARKS[context.partition_key]
    source = config.source or default_source(spec, DATA_DIR)
    rows = load_rows(spec, source, config.hub_config, config.split, config.limit)
    seen: set[str] = set()
    kept, duplicates = [], []
    for number, (row_id, row) in enumerate(rows):
        record = {"benchmark": spec.name, "source_row_id": row_id, "row_number": number,
                  "row_json": json.dumps(row, default=str, ensure_ascii=False)}
        (duplicates if row_id in seen else kept).append(record)
        seen.add(row_id)
    raw = pd.DataFrame(kept).assign(source=source, ingested_at=utc_now())
    rejected = pd.DataFrame(
        [{"benchmark": d["benchmark"], "source_row_id": d["source_row_id"], "row_json": d["row_json"],
          "reason": "duplicate source row id"} for d in duplicates],
        columns=["benchmark", "source_row_id", "row_json", "reason"],
    ).assign(rejected_at=utc_now())
    with warehouse.store(BenchmarkStore) as store:
        store.replace_raw_rows(spec.name, raw, rejected)
    return MaterializeResult(metadata={
        "dagster/row_count": len(raw), "rejected_rows": len(rejected), "source": source,
        "preview": markdown_table(raw[["source_row_id", "row_json"]], 5),
    })


@asset(
    partitions_def=benchmark_partitions, deps=[benchmark_raw_rows], group_name="benchmark_preprocessing",
    kinds={"python", "duckdb"}, pool=WAREHOUSE_POOL,
)
def benchmark_prompts(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """Each raw row as system_prompt, user_prompt, labels and real_answer (plus the harness's
    context/continuation pairs); rows that cannot be parsed go to prompt_rejections with the reason."""
    spec = BENCHMARKS[context.partition_key]
    with warehouse.store(BenchmarkStore) as store:
        raw = store.load_raw_rows(spec.name)
    rows = {r["source_row_id"]: r["row_json"] for r in raw}
    prompts, rejects = preprocess_rows(spec, [(row_id, json.loads(text)) for row_id, text in rows.items()])
    prompt_frame = pd.DataFrame(prompts)
    reject_frame = pd.DataFrame(rejects, columns=["benchmark", "source_row_id", "reason"]).assign(
        row_json=lambda f: f["source_row_id"].map(rows), rejected_at=utc_now())
    with warehouse.store(BenchmarkStore) as store:
        store.replace_prompts(spec.name, prompt_frame, reject_frame)
    for reject in rejects:
        context.log.warning(f"{spec.name} row {reject['source_row_id']} rejected: {reject['reason']}")
    return MaterializeResult(metadata={
        "dagster/row_count": len(prompt_frame), "rejected_rows": len(reject_frame),
        "reject_reasons": markdown_table(reject_frame[["source_row_id", "reason"]], 20),
        "preview": markdown_table(prompt_frame[["prompt_id", "user_prompt", "real_answer"]], 3) if prompts else "none",
    })


class PredictionConfig(Config):
    modes: list[str] = Field(default=["letter", "loglikelihood"],
                             description="Prediction modes, of those the benchmark supports: letter, loglikelihood, "
                                         "generate. A benchmark supporting none of them uses its own (GSM8K: generate).")
    loglikelihood_format: str = Field(default="harness", description="harness (lm-evaluation-harness) or chat.")
    recompute: bool = Field(default=False, description="Ignore stored predictions of the same model.")


@asset(
    partitions_def=benchmark_partitions, deps=[benchmark_prompts], group_name="benchmark_prediction",
    kinds={"pytorch", "duckdb"}, pool=WAREHOUSE_POOL,
)
def benchmark_predictions(
    context: AssetExecutionContext, config: PredictionConfig, warehouse: WarehouseResource,
    evaluation_model: LanguageModelResource,
) -> MaterializeResult:
    """The model's answer to every prompt in each mode, with per-label probabilities (letter) or
    per-choice log-likelihoods. Predictions already stored for the same model fingerprint, prompt
    and mode are reused, not computed again."""
    spec = BENCHMARKS[context.partition_key]
    model = evaluation_model.load()
    settings = PredictionSettings(evaluation_model.batch_size, evaluation_model.max_new_tokens)
    unknown = [m for m in config.modes if m not in MODES]
    if unknown:
        raise ValueError(f"Unknown prediction mode(s) {unknown}; expected some of {sorted(MODES)}")
    modes = [m for m in config.modes if m in spec.modes] or [spec.modes[0]]
    for skipped in sorted(set(config.modes) - set(modes)):
        context.log.info(f"{spec.name} does not support the {skipped} mode; it runs {modes}")
    with warehouse.store(BenchmarkStore) as store:
        prompts = store.load_prompts(spec.name)
    counts = {}
    for mode_name in modes:
        mode = MODES[mode_name]
        prompt_format = resolve_format(mode, config.loglikelihood_format)
        key = prediction_key(model.fingerprint, spec.name, mode.name, prompt_format, 0)
        with warehouse.store(BenchmarkStore) as store:
            stored = store.stored_prediction_ids(key)
        todo = [p for p in prompts if config.recompute or p["prompt_id"] not in stored]
        passes_before = getattr(model, "forward_passes", 0)
        new = mode.predict(model, todo, prompt_format, settings) if todo else []
        with warehouse.store(BenchmarkStore) as store:
            store.save_predictions(key, predictions_frame(model.name, key, new, utc_now()), config.recompute)
        counts[mode.name] = {"computed": len(new), "reused": len(prompts) - len(todo),
                             "forward_passes": getattr(model, "forward_passes", 0) - passes_before}
        context.log.info(f"{spec.name} {mode.name} ({prompt_format}): {counts[mode.name]}")
    return MaterializeResult(metadata={
        "dagster/row_count": len(prompts) * len(modes), "model": model.name, "model_fingerprint": model.fingerprint,
        "modes": MetadataValue.json(counts),
    })


@asset(
    partitions_def=benchmark_partitions, deps=[benchmark_prompts, benchmark_predictions], group_name="benchmark_scoring",
    kinds={"python", "duckdb"}, pool=WAREHOUSE_POOL,
)
def benchmark_scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """Accuracy per model, mode and metric with a 95% Wilson interval, and the per-item report."""
    spec = BENCHMARKS[context.partition_key]
    with warehouse.store(BenchmarkStore) as store:
        predictions = store.load_scored_predictions(spec.name)
    scores = []
    key_columns = ["model", "model_fingerprint", "mode", "prompt_format", "num_fewshot"]
    for (model, fingerprint, mode, prompt_format, shots), group in predictions.groupby(key_columns, sort=True):
        for metric, column in MODES[mode].metrics.items():
            score = score_items(list(group[column]), list(group["real_answer"]))
            context.log.info(f"{spec.name} {model} {mode}/{prompt_format}/{shots}-shot {metric}\n{score.report}")
            scores.append({"model": model, "model_fingerprint": fingerprint, "benchmark": spec.name, "mode": mode,
                           "prompt_format": prompt_format, "num_fewshot": shots, "metric": metric, **vars(score)})
    frame = pd.DataFrame(scores).assign(scored_at=utc_now()) if scores else pd.DataFrame()
    with warehouse.store(BenchmarkStore) as store:
        store.replace_scores(spec.name, frame)
    table = frame[["model", "mode", "prompt_format", "metric", "n", "accuracy", "ci_low", "ci_high"]] if scores else frame
    return MaterializeResult(metadata={
        "dagster/row_count": len(frame), "accuracy": markdown_table(table.round(3) if scores else table, 50),
    })
