"""Prompt evolution: paragraphs and gene pools -> an era (one partition per era), checkpointed
generation by generation -> its summary, its judges' analysis and its Pareto front."""

from collections.abc import Sequence

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from eval_platform.common.ingestion import DataFileError, load_rows
from eval_platform.common.plots import new_axes, png_markdown
from eval_platform.common.warehouse import utc_now
from eval_platform.environment import DATA_DIR, environment
from eval_platform.evaluation_assets.configs import config_class
from eval_platform.evaluation_assets.judging.assets import judge_agreement
from eval_platform.evaluation_assets.metadata import markdown_table
from eval_platform.evaluation_assets.partitions import era_partitions
from eval_platform.evolution import eras as era_logic
from eval_platform.evolution.eras import era_start, paragraph_records
from eval_platform.evolution.genetic import TAGS, EraSettings, era_models
from eval_platform.evolution.runs import EraProgress, EraRun, SaveGeneration, era_row, panel_weights
from eval_platform.evolution.store import EraAnalysisStore, EraStore, EvolutionInputStore
from eval_platform.resources import WAREHOUSE_POOL, LanguageModelResource, ModelGatewayResource, WarehouseResource
from eval_platform.viewer.links import era_link

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
    pools = era_logic.gene_pool_file(EVOLUTION_DIR / "gene_pools.json")
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


def generation_saver(warehouse: WarehouseResource, era: str, judges: Sequence[str]) -> SaveGeneration:
    """What stores each complete generation of the era's run (its checkpoint's rows and the responses
    it added to the cache), in one transaction."""

    def save(generation: int, frames: dict[str, pd.DataFrame], cached: pd.DataFrame) -> None:
        with warehouse.store(EraStore) as store:
            store.save_generation(era, generation, frames, judges, cached, utc_now())

    return save


def era_metadata(run: EraRun, progress: EraProgress) -> dict[str, MetadataValue | str | int]:
    """The era run's metadata: its status, the generations it ran, their calls, cache hits and cost."""
    resume = run.start.resume
    return {
        "era": run.era,
        "viewer": MetadataValue.url(era_link(environment().viewer_base_url, run.era)),
        "status": progress.status,
        "generations_run": progress.generations,
        "resumed_after_generation": resume.generation if resume else -1,
        "calls": progress.calls,
        "cache_hits": progress.cache_hits,
        "cache_hit_rate": MetadataValue.float(progress.cache_hit_rate),
        "cost_usd": MetadataValue.float(progress.cost_usd),
        "judge_weights": MetadataValue.json(run.weights) if run.weights else "plain average",
    }


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
    with warehouse.store(EraStore) as store:
        judges = store.widen_quality_scores(list(settings.judge_panel))
        store.begin_era(era_row(era, settings, start, utc_now()), restart=config.restart)
        responses = store.load_response_cache(era_models(settings)) if settings.use_response_cache else None
    with warehouse.store(EraStore) as store:
        measured = store.load_panel_agreement(settings.agreement_set, settings.agreement_metric)
    run = EraRun(era, settings, start, judges, panel_weights(settings, measured, context.log), responses)
    client = gateway.gateway()
    progress = run.run(
        lambda name: evaluation_model.open(name, client),
        generation_saver(warehouse, era, judges),
        utc_now,
        context.log,
        evaluation_model.settings().model_cache_dir,
    )
    with warehouse.store(EraStore) as store:
        store.finish_era(era, progress.status, utc_now())
    return MaterializeResult(metadata=era_metadata(run, progress))


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
            "viewer": MetadataValue.url(era_link(environment().viewer_base_url, era)),
            "status": summary.get("status"),
            "dagster/row_count": len(stats),
            **numbers,
            "calls": int(summary.get("calls") or 0),
            "prompt_tokens": int(summary.get("prompt_tokens") or 0),
            "completion_tokens": int(summary.get("completion_tokens") or 0),
            "judge_temperature": MetadataValue.float(float(summary.get("judge_temperature") or 0)),
            "fitness_gradient": gradient_value(summary.get("fitness_gradient")),
            "statistics": MetadataValue.md(shown.to_markdown(index=False)),
            "fitness_plot": MetadataValue.md(fitness_plot(stats, era)),
        }
    )


@asset(
    partitions_def=era_partitions,
    group_name="prompt_evolution",
    deps=[evolution_era, era_summary],
    kinds={"scipy", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def judge_analysis(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """The fitness document's research questions about the judges: how well each pair agrees
    (Pearson and Spearman, with n), which judge is harshest and which most lenient, how each
    judge's scores move over the generations, how often a reported score is not the sum of its
    parts, how far a sampled judge's scores of one compression spread (its self-consistency), the
    era's fitness gradient at its judges' temperature, and the ranking each judge alone and each
    set of judges would have given (from the stored verdicts, no call)."""
    era = context.partition_key
    with warehouse.store(EraAnalysisStore) as store:
        verdicts, prompts = store.load_verdicts(era), store.load_evaluated_prompts(era)
        era_row = store.load_era_summary(era)
    summary, agreement, per_generation = era_logic.judge_analysis(era, verdicts)
    subsets = era_logic.judge_subset_rankings(era, verdicts, prompts)
    with warehouse.store(EraAnalysisStore) as store:
        store.replace_judge_analysis(era, summary, agreement, per_generation, subsets)
    return MaterializeResult(
        metadata={
            "era": era,
            "dagster/row_count": len(summary),
            "judges": MetadataValue.md(era_table(summary)),
            "agreement": MetadataValue.md(
                era_table(agreement) if len(agreement) else "_one judge: nothing to correlate_"
            ),
            "mean_score_per_generation": MetadataValue.md(judge_score_plot(per_generation, era)),
            "single_and_multi_judge_rankings": MetadataValue.md(era_table(subsets)),
            "judge_temperature": MetadataValue.float(float(era_row.get("judge_temperature") or 0)),
            "fitness_gradient": gradient_value(era_row.get("fitness_gradient")),
        }
    )


def gradient_value(gradient: float | None) -> MetadataValue:
    """An era's fitness gradient per generation; none for an era of one generation (no slope)."""
    return MetadataValue.text("none: one generation") if gradient is None else MetadataValue.float(gradient)


def era_table(frame: pd.DataFrame) -> str:
    """One era's rows as a Markdown table (without the era column)."""
    return frame.drop(columns=["era"]).round(4).to_markdown(index=False)


def judge_score_plot(per_generation: pd.DataFrame, era: str) -> str:
    """Markdown embedding a PNG: each judge's mean score per generation."""
    figure, axes = new_axes(f"Era {era}: each judge's mean score")
    for name, group in per_generation.groupby("judge_name"):
        axes.plot(group["generation"], group["mean_score"], marker="o", label=name)
    axes.set(xlabel="generation", ylabel="mean score (0-10)", ylim=(0, 10))
    if per_generation.empty:  # every judge failed: no line to name
        axes.text(0.5, 0.5, "no judge returned a score", ha="center", va="center", transform=axes.transAxes)
    else:
        axes.legend()
    return png_markdown(figure, "each judge's mean score per generation")


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
