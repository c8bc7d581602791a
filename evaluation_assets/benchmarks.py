"""Benchmark validation: raw rows -> prompts -> predictions -> scores, one partition per benchmark."""

import json

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, StaticPartitionsDefinition, asset
from pydantic import Field

from evaluation_logic.benchmarks import BENCHMARKS, preprocess_rows
from evaluation_logic.ingestion import default_source, load_rows
from evaluation_logic.prediction import MULTIPLE_CHOICE_MODES, predict, prompt_format_for
from evaluation_logic.scoring import METRICS, score_items
from evaluation_logic.warehouse import Write, records, replace_many, utc_now
from resources import DATA_DIR, WAREHOUSE_POOL, LanguageModelResource, WarehouseResource

benchmark_partitions = StaticPartitionsDefinition(list(BENCHMARKS))



def _markdown(frame: pd.DataFrame, rows: int = 10) -> MetadataValue:
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
    """Rows of the benchmark as loaded by `datasets`, verbatim as JSON, keyed by source row id."""
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
        [{"benchmark": d["benchmark"], "stage": "ingest", "source_row_id": d["source_row_id"],
          "row_json": d["row_json"], "reason": "duplicate source row id"} for d in duplicates],
        columns=["benchmark", "stage", "source_row_id", "row_json", "reason"],
    ).assign(rejected_at=utc_now())
    with warehouse.get_connection() as conn:
        replace_many(conn, [
            Write("raw_rows", raw, {"benchmark": spec.name}),
            Write("rejected_rows", rejected, {"benchmark": spec.name, "stage": "ingest"}),
        ])
    return MaterializeResult(metadata={
        "dagster/row_count": len(raw), "rejected_rows": len(rejected), "source": source,
        "preview": _markdown(raw[["source_row_id", "row_json"]], 5),
    })


@asset(
    partitions_def=benchmark_partitions, deps=[benchmark_raw_rows], group_name="benchmark_preprocessing",
    kinds={"python", "duckdb"}, pool=WAREHOUSE_POOL,
)
def benchmark_prompts(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """Each raw row as system_prompt, user_prompt, labels and real_answer (plus the harness's
    context/continuation pairs); rows that cannot be parsed go to rejected_rows with the reason."""
    spec = BENCHMARKS[context.partition_key]
    with warehouse.get_connection() as conn:
        raw = records(conn, "SELECT source_row_id, row_json FROM raw_rows WHERE benchmark = ? ORDER BY row_number",
                      [spec.name])
    rows = {r["source_row_id"]: r["row_json"] for r in raw}
    prompts, rejects = preprocess_rows(spec, [(row_id, json.loads(text)) for row_id, text in rows.items()])
    prompt_frame = pd.DataFrame(prompts)
    reject_frame = pd.DataFrame(rejects, columns=["benchmark", "source_row_id", "reason"]).assign(
        stage="preprocess", row_json=lambda f: f["source_row_id"].map(rows), rejected_at=utc_now()
    )
    with warehouse.get_connection() as conn:
        replace_many(conn, [
            Write("prompts", prompt_frame, {"benchmark": spec.name}),
            Write("rejected_rows", reject_frame, {"benchmark": spec.name, "stage": "preprocess"}),
        ])
    for reject in rejects:
        context.log.warning(f"{spec.name} row {reject['source_row_id']} rejected: {reject['reason']}")
    return MaterializeResult(metadata={
        "dagster/row_count": len(prompt_frame), "rejected_rows": len(reject_frame),
        "reject_reasons": _markdown(reject_frame[["source_row_id", "reason"]], 20),
        "preview": _markdown(prompt_frame[["prompt_id", "user_prompt", "real_answer"]], 3) if prompts else "none",
    })


class PredictionConfig(Config):
    modes: list[str] = Field(default=list(MULTIPLE_CHOICE_MODES), description="letter and/or loglikelihood.")
    loglikelihood_format: str = Field(default="harness", description="harness (lm-evaluation-harness) or seed.")
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
    modes = config.modes if spec.task == "multiple_choice" else ["generate"]
    with warehouse.get_connection() as conn:
        prompts = records(conn, "SELECT * FROM prompts WHERE benchmark = ? ORDER BY source_row_id", [spec.name])
    counts = {}
    for mode in modes:
        prompt_format = prompt_format_for(mode, config.loglikelihood_format)
        key = {"benchmark": spec.name, "model_fingerprint": model.fingerprint, "mode": mode, "prompt_format": prompt_format}
        with warehouse.get_connection() as conn:
            stored = {r["prompt_id"] for r in records(
                conn, "SELECT prompt_id FROM predictions WHERE " + " AND ".join(f"{k} = ?" for k in key), list(key.values()))}
        todo = [p for p in prompts if config.recompute or p["prompt_id"] not in stored]
        passes_before = getattr(model, "forward_passes", 0)
        new = predict(model, todo, mode, prompt_format, evaluation_model.batch_size, evaluation_model.max_new_tokens)
        frame = _prediction_frame(new, model, key)
        with warehouse.get_connection() as conn:
            replace_many(conn, [Write(
                "predictions", frame, key,
                also="" if config.recompute else "prompt_id NOT IN (SELECT prompt_id FROM prompts WHERE benchmark = ?)",
                also_params=() if config.recompute else (spec.name,),
                computed={"label_probabilities": "map(label_keys, label_values)"},
                inputs=("label_keys", "label_values"),
            )])
        counts[mode] = {"computed": len(new), "reused": len(prompts) - len(todo),
                        "forward_passes": getattr(model, "forward_passes", 0) - passes_before}
        context.log.info(f"{spec.name} {mode} ({prompt_format}): {counts[mode]}")
    return MaterializeResult(metadata={
        "dagster/row_count": len(prompts) * len(modes), "model": model.name, "model_fingerprint": model.fingerprint,
        "modes": MetadataValue.json(counts),
    })


def _prediction_frame(new: list[dict], model, key: dict) -> pd.DataFrame:
    frame = pd.DataFrame(new, columns=["prompt_id", "predicted", "predicted_norm", "predicted_flexible",
                                       "label_probabilities", "choice_loglikelihoods", "output_text"])
    distributions = frame.pop("label_probabilities")
    return frame.assign(
        label_keys=[list(d) if isinstance(d, dict) else None for d in distributions],
        label_values=[list(d.values()) if isinstance(d, dict) else None for d in distributions],
        model=model.name, **key, predicted_at=utc_now(),
    ).astype({"predicted_norm": "object", "predicted_flexible": "object", "output_text": "object",
              "choice_loglikelihoods": "object"})


@asset(
    partitions_def=benchmark_partitions, deps=[benchmark_predictions], group_name="benchmark_scoring",
    kinds={"python", "duckdb"}, pool=WAREHOUSE_POOL,
)
def benchmark_scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """Accuracy per model, mode and metric with a 95% Wilson interval, and the per-item report."""
    spec = BENCHMARKS[context.partition_key]
    with warehouse.get_connection() as conn:
        rows = records(conn, """
            SELECT pr.model, pr.model_fingerprint, pr.mode, pr.prompt_format, pr.predicted, pr.predicted_norm,
                   pr.predicted_flexible, p.real_answer
            FROM predictions pr JOIN prompts p USING (prompt_id)
            WHERE p.benchmark = ? ORDER BY p.source_row_id""", [spec.name])
    predictions = pd.DataFrame(rows, columns=["model", "model_fingerprint", "mode", "prompt_format", "predicted",
                                              "predicted_norm", "predicted_flexible", "real_answer"])
    scores = []
    for (model, fingerprint, mode, prompt_format), group in predictions.groupby(
            ["model", "model_fingerprint", "mode", "prompt_format"], sort=True):
        for metric, column in METRICS[mode].items():
            score = score_items(list(group[column]), list(group["real_answer"]))
            context.log.info(f"{spec.name} {model} {mode}/{prompt_format} {metric}\n{score.report}")
            scores.append({"model": model, "model_fingerprint": fingerprint, "benchmark": spec.name, "mode": mode,
                           "prompt_format": prompt_format, "metric": metric, **vars(score)})
    frame = pd.DataFrame(scores).assign(scored_at=utc_now()) if scores else pd.DataFrame()
    with warehouse.get_connection() as conn:
        replace_many(conn, [Write("scores", frame, {"benchmark": spec.name})])
    table = frame[["model", "mode", "prompt_format", "metric", "n", "accuracy", "ci_low", "ci_high"]] if scores else frame
    return MaterializeResult(metadata={
        "dagster/row_count": len(frame), "accuracy": _markdown(table.round(3) if scores else table, 50),
    })
