"""Prompt evolution: paragraphs and gene pools -> an era (one partition per era), checkpointed
generation by generation -> its summary, its judges' analysis and its Pareto front."""

import asyncio
import json
from typing import cast

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from eval_platform.common.gateway import MemoryResponseCache, ResponseCachedModel
from eval_platform.common.ingestion import DataFileError, load_rows
from eval_platform.common.models import Completion, LanguageModel
from eval_platform.common.models.local import token_counter
from eval_platform.common.panels import AgreementMetric, agreement_weights, flag_judges
from eval_platform.common.plots import new_axes, png_markdown
from eval_platform.common.warehouse import utc_now
from eval_platform.environment import DATA_DIR
from eval_platform.evolution import eras as era_logic
from eval_platform.evolution.eras import config_hash, era_start, generation_frames, paragraph_records
from eval_platform.evolution.genetic import TAGS, EraSettings, GenerationRecord, era_models, run_era
from eval_platform.evolution.store import EraAnalysisStore, EraStore, EvolutionInputStore
from eval_platform.viewer.links import era_link
from evaluation_assets.configs import config_class
from evaluation_assets.judging.assets import judge_agreement
from evaluation_assets.metadata import markdown_table
from evaluation_assets.partitions import era_partitions
from resources import WAREHOUSE_POOL, LanguageModelResource, ModelGatewayResource, WarehouseResource

EVOLUTION_DIR = DATA_DIR / "evolution"


class ParagraphsConfig(Config):
    source: str = Field(
        default=str(EVOLUTION_DIR / "paragraphs.jsonl"),
        description="JSONL file of paragraphs: paragraph_id, title, text.",
    )


@asset(group_name="evolution_inputs", kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def source_paragraphs(
    context: AssetExecutionContext, config: ParagraphsConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """The paragraphs candidate prompts compress. A line that cannot be used is kept in
    paragraph_rejections with its line and reason; every good paragraph still lands."""
    paragraphs, rejections = paragraph_records(load_rows(config.source))
    if not paragraphs:
        raise DataFileError(
            f"{config.source}: no usable paragraph ({len(rejections)} rejected: "
            f"{rejections[0]['reason'] if rejections else 'empty'})"
        )
    frame = pd.DataFrame(paragraphs)
    rejected = pd.DataFrame(rejections, columns=["line", "row_json", "reason"]).assign(
        source=config.source, rejected_at=utc_now()
    )
    with warehouse.store(EvolutionInputStore) as store:
        store.replace_source_paragraphs(frame, rejected)
    for reject in rejections:
        context.log.warning(f"{config.source} line {reject['line']}: {reject['reason']}")
    words = frame["text"].str.count(r"\S+")
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(frame),
            "rejected_rows": len(rejected),
            "source": config.source,
            "words": MetadataValue.md(
                pd.DataFrame({"paragraph_id": frame["paragraph_id"], "words": words}).to_markdown(index=False)
            ),
            "rejections": markdown_table(rejected[["line", "reason"]]) if len(rejected) else MetadataValue.md("_none_"),
        }
    )


@asset(group_name="evolution_inputs", kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def gene_pools(warehouse: WarehouseResource) -> MaterializeResult:
    """Initial alternatives for each of the five prompt tags (data/evolution/gene_pools.json)."""
    path = EVOLUTION_DIR / "gene_pools.json"
    pools = json.loads(path.read_text(encoding="utf-8"))
    missing = [tag for tag in TAGS if not pools.get(tag)]
    if missing:
        raise ValueError(f"{path}: no genes for tag(s) {', '.join(missing)}")
    frame = pd.DataFrame(
        [{"tag": tag, "gene_index": i, "text": text} for tag in TAGS for i, text in enumerate(pools[tag])]
    )
    with warehouse.store(EvolutionInputStore) as store:
        store.replace_gene_pool(frame)
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(frame),
            "genes_per_tag": MetadataValue.json({t: len(pools[t]) for t in TAGS}),
        }
    )


class EraConfig(
    config_class(
        EraSettings,
        restart=(
            bool,
            Field(
                default=False,
                description="Start the era again, replacing its stored generations (needed to change an existing "
                "era's configuration).",
            ),
        ),
    )
):
    """An era's settings, and whether to start it again."""


def _cache_rows(era: str, entries: dict[str, tuple[str, dict, Completion]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "key": key,
                "model": model,
                "request": json.dumps(request),
                "text": c.text,
                "first_token_logprobs": json.dumps(c.first_token_logprobs),
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "cost_usd": c.cost_usd,
                "first_era": era,
                "created_at": utc_now(),
            }
            for key, (model, request, c) in entries.items()
        ]
    )


def _known_responses(rows: list[dict]) -> dict[str, Completion]:
    return {
        row["key"]: Completion(
            row["text"],
            0,
            0,
            json.loads(row["first_token_logprobs"] or "null"),
            row["prompt_tokens"],
            row["completion_tokens"],
            row["cost_usd"],
        )
        for row in rows
    }


def panel_weights(
    context: AssetExecutionContext, settings: EraSettings, measured: list[AgreementMetric]
) -> dict[str, float] | None:
    """The panel against its measured agreement with humans on the era's set: each judge below the
    bound or unmeasured named in the log; the judges' weights by name when the era weighs them by
    agreement (None: the seed's plain average)."""
    for flag in flag_judges(
        measured, settings.models, settings.agreement_set, settings.min_judge_agreement, settings.agreement_metric
    ):
        if flag.status != "ok":
            context.log.warning(f"judge flagged ({flag.status}): {flag.message}")
    if settings.judge_weighting == "average":
        return None
    by_model = agreement_weights(measured, settings.models, settings.agreement_set, settings.agreement_metric)
    weights = {name: by_model[model] for name, model in settings.judge_panel.items()}
    context.log.info(f"judge weights by {settings.agreement_metric} on {settings.agreement_set}: {weights}")
    return weights


@asset(
    partitions_def=era_partitions,
    group_name="prompt_evolution",
    deps=[source_paragraphs, gene_pools, judge_agreement],
    kinds={"litellm", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def evolution_era(
    context: AssetExecutionContext,
    config: EraConfig,
    warehouse: WarehouseResource,
    gateway: ModelGatewayResource,
    evaluation_model: LanguageModelResource,
) -> MaterializeResult:
    """One era of the genetic algorithm: every prompt, compression, judge verdict, fitness and API
    call (tokens, cost, cache hits), stored generation by generation with the random state to go
    on. Re-running the era resumes after its last complete generation and gives the era an
    uninterrupted run gives; a changed configuration is refused unless `restart` is set."""
    era, settings = context.partition_key, EraSettings(**config.model_dump(exclude={"restart"}))
    with warehouse.stores(EvolutionInputStore, EraStore) as (inputs, store):
        start = era_start(
            era, settings, config.restart, store.era_state(era), store.load_checkpoint(era), store.era_spending(era),
            inputs.load_paragraphs(), inputs.load_gene_pool(),
        )  # fmt: skip
    resume = start.resume
    if resume:
        context.log.info(
            f"era {era}: resuming after generation {resume.generation} (spent ${resume.spent_usd:.4f} so far)"
        )
    now = utc_now()
    era_row = pd.DataFrame(
        [
            {
                "era": era,
                "config": settings.model_dump_json(),
                "config_hash": config_hash(era, settings),
                "compression_model": settings.compression_model,
                "judge_panel": json.dumps(settings.judge_panel),
                "population_size": settings.population_size,
                "status": "running",
                "generations_done": resume.generation if resume else None,
                "started_at": now,
                "updated_at": now,
                "finished_at": None,
            }
        ]
    )
    with warehouse.store(EraStore) as store:
        judges = store.widen_quality_scores(list(settings.judge_panel))
        store.begin_era(era_row, restart=config.restart)
        cache = (
            MemoryResponseCache(_known_responses(store.load_response_cache(era_models(settings))))
            if settings.use_response_cache
            else None
        )
    with warehouse.store(EraStore) as store:
        measured = store.load_panel_agreement(settings.agreement_set, settings.agreement_metric)
    weights = panel_weights(context, settings, measured)
    client = gateway.gateway()

    def open_era_model(name: str) -> LanguageModel:
        """Any backend, local ones on evaluation_model's device and dtype, API calls through the gateway."""
        model = evaluation_model.open(name, client)
        # the cached model is the wrapped one's (every attribute but acomplete delegated)
        return cast(LanguageModel, ResponseCachedModel(model, cache)) if cache is not None else model

    totals = {"calls": 0, "cache_hits": 0, "cost_usd": 0.0, "generations": 0}

    def checkpoint_generation(record: GenerationRecord) -> None:
        frames = generation_frames(era, record, judges, utc_now())
        new = _cache_rows(era, cache.take_new()) if cache else pd.DataFrame()
        with warehouse.store(EraStore) as store:
            store.save_generation(era, record.generation, frames, judges, new, utc_now())
        calls = frames["gateway_calls"]
        totals.update(
            calls=totals["calls"] + len(calls),
            cache_hits=totals["cache_hits"] + int(calls["cached"].sum()),
            cost_usd=totals["cost_usd"] + float(calls["cost_usd"].sum()),
            generations=totals["generations"] + 1,
        )
        context.log.info(
            f"era {era} generation {record.generation}: "
            + ", ".join(f"{k}={v:.4f}" for k, v in record.statistics.items())
            + f"; {len(calls)} calls ({int(calls['cached'].sum())} from the cache), "
            f"${float(calls['cost_usd'].sum()):.4f},"
            f" era so far ${record.spent_usd:.4f}"
        )

    if start.done(settings):
        status = "complete"
    else:
        status = asyncio.run(
            run_era(
                era,
                settings,
                open_era_model,
                start.paragraphs,
                start.gene_pool,
                token_counter(settings.tokenizer),
                checkpoint_generation,
                resume,
                weights,
            )
        )
    with warehouse.store(EraStore) as store:
        store.finish_era(era, status, utc_now())
    if status == "stopped_for_budget":
        context.log.warning(
            f"era {era} stopped for its budget of ${settings.max_cost_usd}; raise max_cost_usd to resume"
        )
    return MaterializeResult(
        metadata={
            "era": era,
            "viewer": MetadataValue.url(era_link(era)),
            "status": status,
            "generations_run": totals["generations"],
            "resumed_after_generation": resume.generation if resume else -1,
            "calls": totals["calls"],
            "cache_hits": totals["cache_hits"],
            "cache_hit_rate": MetadataValue.float(totals["cache_hits"] / totals["calls"] if totals["calls"] else 0.0),
            "cost_usd": MetadataValue.float(totals["cost_usd"]),
            "judge_weights": MetadataValue.json(weights) if weights else "plain average",
        }
    )


def fitness_plot(stats: pd.DataFrame, era: str) -> str:
    """Markdown embedding a PNG plot of mean and max fitness per generation."""
    figure, axes = new_axes(f"Era {era}")
    axes.plot(stats["generation"], stats["mean_fitness"], marker="o", label="mean fitness")
    axes.plot(stats["generation"], stats["max_fitness"], marker="s", label="max fitness")
    axes.set(xlabel="generation", ylabel="fitness", ylim=(0, 1))
    axes.legend()
    return png_markdown(figure, "fitness per generation")


@asset(
    partitions_def=era_partitions,
    group_name="prompt_evolution",
    deps=[evolution_era],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
)
def era_summary(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The era's status, final mean and max fitness, generations, and its calls, tokens, cost and
    response-cache hits; its statistics per generation and a plot of its fitness."""
    era = context.partition_key
    with warehouse.store(EraAnalysisStore) as store:
        summary = store.summarize_era(era, utc_now())
        stats = store.load_generation_stats(era)
    numbers = {
        k: MetadataValue.float(float(summary[k] or 0))
        for k in ("final_mean_fitness", "final_max_fitness", "cost_usd", "cache_hit_rate")
    }
    shown = stats.drop(columns=["era"]).round(4)
    return MaterializeResult(
        metadata={
            "era": era,
            "viewer": MetadataValue.url(era_link(era)),
            "status": summary.get("status"),
            "dagster/row_count": len(stats),
            **numbers,
            "calls": int(summary.get("calls") or 0),
            "prompt_tokens": int(summary.get("prompt_tokens") or 0),
            "completion_tokens": int(summary.get("completion_tokens") or 0),
            "statistics": MetadataValue.md(shown.to_markdown(index=False)),
            "fitness_plot": MetadataValue.md(fitness_plot(stats, era)),
        }
    )


@asset(
    partitions_def=era_partitions,
    group_name="prompt_evolution",
    deps=[evolution_era],
    kinds={"scipy", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def judge_analysis(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The fitness document's research questions about the judges: how well each pair agrees
    (Pearson and Spearman, with n), which judge is harshest and which most lenient, how each
    judge's scores move over the generations, and how often a reported score is not the sum of its
    parts."""
    era = context.partition_key
    with warehouse.store(EraAnalysisStore) as store:
        verdicts = store.load_verdicts(era)
    summary, agreement, per_generation = era_logic.judge_analysis(era, verdicts)
    with warehouse.store(EraAnalysisStore) as store:
        store.replace_judge_analysis(era, summary, agreement, per_generation)
    figure, axes = new_axes(f"Era {era}: each judge's mean score")
    for name, group in per_generation.groupby("judge_name"):
        axes.plot(group["generation"], group["mean_score"], marker="o", label=name)
    axes.set(xlabel="generation", ylabel="mean score (0-10)", ylim=(0, 10))
    if per_generation.empty:  # every judge failed: no line to name
        axes.text(0.5, 0.5, "no judge returned a score", ha="center", va="center", transform=axes.transAxes)
    else:
        axes.legend()
    return MaterializeResult(
        metadata={
            "era": era,
            "dagster/row_count": len(summary),
            "judges": MetadataValue.md(summary.drop(columns=["era"]).round(4).to_markdown(index=False)),
            "agreement": MetadataValue.md(
                agreement.drop(columns=["era"]).round(4).to_markdown(index=False)
                if len(agreement)
                else "_one judge: nothing to correlate_"
            ),
            "mean_score_per_generation": MetadataValue.md(
                png_markdown(figure, "each judge's mean score per generation")
            ),
        }
    )


@asset(
    partitions_def=era_partitions,
    group_name="prompt_evolution",
    deps=[evolution_era],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
)
def pareto_front(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The era's prompts that no other prompt beats on both judged quality and compression ratio:
    pick a prompt off this front for the trade-off you want, not by fitness alone."""
    era = context.partition_key
    with warehouse.store(EraAnalysisStore) as store:
        points = store.load_evaluated_prompts(era)
    front = era_logic.pareto_front(points).assign(era=era)
    with warehouse.store(EraAnalysisStore) as store:
        store.replace_pareto_front(era, front)
    figure, axes = new_axes(f"Era {era}: quality against compression")
    axes.scatter(points["compression_ratio"], points["quality_score_avg"], s=14, alpha=0.5, label="prompts")
    ordered = front.sort_values("compression_ratio")
    axes.plot(ordered["compression_ratio"], ordered["quality_score_avg"], marker="o", color="crimson", label="front")
    axes.set(xlabel="compression ratio", ylabel="judged quality (0-10)")
    axes.legend()
    shown = front[["prompt_id", "generation", "quality_score_avg", "compression_ratio", "fitness"]].round(4)
    return MaterializeResult(
        metadata={
            "era": era,
            "dagster/row_count": len(front),
            "front": MetadataValue.md(shown.to_markdown(index=False)),
            "front_plot": MetadataValue.md(png_markdown(figure, "Pareto front")),
        }
    )
