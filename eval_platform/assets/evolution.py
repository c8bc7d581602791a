"""Prompt evolution: paragraphs and gene pools -> an era of generations -> statistics -> era summary."""

import asyncio
import base64
import io
import json
from pathlib import Path

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from eval_platform.core.genetic import TAGS, EraConfig, Individual, run_era, statistics_rows
from eval_platform.core.models.local import DEFAULT_LOCAL_MODEL, token_counter
from eval_platform.resources import DATA_DIR, WAREHOUSE_POOL, ModelGatewayResource, WarehouseResource
from eval_platform.stores import EvolutionStore
from eval_platform.stores.warehouse import utc_now

EVOLUTION_DIR = DATA_DIR / "evolution"
# The offline panel: the local model judging by digit probabilities.
OFFLINE_JUDGE_PANEL = {"smollm2": DEFAULT_LOCAL_MODEL}


def read_paragraphs(path: Path) -> pd.DataFrame:
    """Source paragraphs from JSONL; a row without `paragraph_id` or `text` fails naming file and line."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):  # not splitlines(): U+2028 is text
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: invalid JSON ({error.msg})") from error
        missing = [key for key in ("paragraph_id", "text") if not str(row.get(key) or "").strip()]
        if missing:
            raise ValueError(f"{path}:{number}: missing {', '.join(missing)}")
        rows.append({"paragraph_id": row["paragraph_id"], "title": row.get("title"), "text": row["text"].strip()})
    return pd.DataFrame(rows)


@asset(group_name="prompt_evolution", kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def source_paragraphs(warehouse: WarehouseResource) -> MaterializeResult:
    """The paragraphs candidate prompts compress (data/evolution/paragraphs.jsonl)."""
    frame = read_paragraphs(EVOLUTION_DIR / "paragraphs.jsonl")
    with warehouse.store(EvolutionStore) as store:
        store.replace_source_paragraphs(frame)
    words = frame["text"].str.split().str.len()
    return MaterializeResult(metadata={
        "dagster/row_count": len(frame), "words": MetadataValue.md(
            pd.DataFrame({"paragraph_id": frame["paragraph_id"], "words": words}).to_markdown(index=False)),
    })


@asset(group_name="prompt_evolution", kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def gene_pools(warehouse: WarehouseResource) -> MaterializeResult:
    """Initial alternatives for each of the five prompt tags (data/evolution/gene_pools.json)."""
    path = EVOLUTION_DIR / "gene_pools.json"
    pools = json.loads(path.read_text(encoding="utf-8"))
    missing = [tag for tag in TAGS if not pools.get(tag)]
    if missing:
        raise ValueError(f"{path}: no genes for tag(s) {', '.join(missing)}")
    frame = pd.DataFrame([{"tag": tag, "gene_index": i, "text": text}
                          for tag in TAGS for i, text in enumerate(pools[tag])])
    with warehouse.store(EvolutionStore) as store:
        store.replace_gene_pool(frame)
    return MaterializeResult(metadata={"dagster/row_count": len(frame),
                                       "genes_per_tag": MetadataValue.json({t: len(pools[t]) for t in TAGS})})


class EraRunConfig(Config):
    era: str = Field(default="phylo-2", description="Era name; re-running an era replaces its rows.")
    population_size: int = 5
    generations: int = Field(default=2, description="Generations after generation 0.")
    paragraph_ids: list[str] = Field(default=[], description="Paragraphs to use, in turn; empty: all.")
    compression_model: str = DEFAULT_LOCAL_MODEL
    judge_panel: dict[str, str] = Field(
        default=OFFLINE_JUDGE_PANEL,
        description='Judge name -> model, e.g. {"openai": "openai/gpt-4o-mini", '
                    '"claude": "anthropic/claude-3-5-sonnet-20241022", "gemini": "gemini/gemini-1.5-flash"}.',
    )
    mutation_model: str | None = Field(default=None, description="Model that rewrites a tag; None: gene pool.")
    use_token_metric: bool = False
    tokenizer: str = Field(default=DEFAULT_LOCAL_MODEL, description="Tokenizer for token counts.")
    seed: int = 7
    compression_max_tokens: int = 64


def generation_rows(era: str, history: list[list[Individual]], judges: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows for `generations` (every individual of every generation) and `judge_scores` (one per
    judge per evaluated prompt)."""
    rows, judge_rows = [], []
    for generation, population in enumerate(history):
        for ind in population:
            e = ind.evaluation
            carried = e["evaluated_generation"] != generation
            rows.append({
                "era": era, "generation": generation, "prompt_id": ind.prompt_id, "operator": ind.operator,
                "parents": ind.parents, "carried_over": carried, "evaluated_generation": e["evaluated_generation"],
                **ind.genome, "prompt_text": e["prompt_text"], "paragraph_id": e["paragraph_id"],
                **{k: e[k] for k in ("original_text", "compressed_text", "compression_error", "original_words",
                                     "compressed_words", "compression_ratio", "word_compression_ratio",
                                     "original_tokens", "compressed_tokens", "token_compression_ratio",
                                     "quality_score_avg", "raw_fitness", "survival_factor", "fitness")},
                "quality_scores_json": json.dumps({j: e["quality_scores"].get(j) for j in judges}),
            })
            if not carried:
                for name, d in e["judge_details"].items():
                    judge_rows.append({
                        "era": era, "prompt_id": ind.prompt_id, "evaluated_generation": generation,
                        "judge_name": name, "judge_model": d["model"],
                        **{k: d.get(k) for k in ("faithfulness", "clarity", "readability", "score",
                                                 "reported_score", "score_mismatch", "comments", "error",
                                                 "judge_duration_ms")},
                    })
    return pd.DataFrame(rows), pd.DataFrame(judge_rows)


@asset(group_name="prompt_evolution", deps=[source_paragraphs, gene_pools], kinds={"litellm", "duckdb"},
       pool=WAREHOUSE_POOL)
def evolution_era(
    context: AssetExecutionContext, config: EraRunConfig, warehouse: WarehouseResource, gateway: ModelGatewayResource
) -> MaterializeResult:
    """One era of the genetic algorithm: every prompt, compression, judge score and fitness."""
    with warehouse.store(EvolutionStore) as store:
        paragraphs = store.load_paragraphs()
        genes = store.load_gene_pool()
    if config.paragraph_ids:
        known = {p["paragraph_id"]: p for p in paragraphs}
        unknown = [pid for pid in config.paragraph_ids if pid not in known]
        if unknown:
            raise ValueError(f"Unknown paragraph_ids {unknown}; known: {sorted(known)}")
        paragraphs = [known[pid] for pid in config.paragraph_ids]
    pool = {tag: [g["text"] for g in genes if g["tag"] == tag] for tag in TAGS}
    era_config = EraConfig(
        era=config.era, population_size=config.population_size, generations=config.generations,
        compression_model=config.compression_model, judge_panel=config.judge_panel, seed=config.seed,
        use_token_metric=config.use_token_metric, mutation_model=config.mutation_model,
        compression_max_tokens=config.compression_max_tokens,
    )

    def log_generation(generation, population, stats):
        context.log.info(
            f"era {config.era} generation {generation}: " + ", ".join(f"{k}={v:.4f}" for k, v in stats.items()))

    started = utc_now()
    history = asyncio.run(run_era(era_config, gateway.gateway(), paragraphs, pool, token_counter(config.tokenizer),
                                  on_generation=log_generation))
    with warehouse.store(EvolutionStore) as store:
        judges = store.widen_quality_scores(list(config.judge_panel))
        generations, judge_scores = generation_rows(config.era, history, judges)
        era_row = pd.DataFrame([{
            "era": config.era, "config": config.model_dump_json(), "compression_model": config.compression_model,
            "judge_panel": json.dumps(config.judge_panel), "population_size": config.population_size,
            "started_at": started, "finished_at": utc_now(),
        }])
        store.replace_era(config.era, generations, judge_scores, era_row, judges)
    failures = int(judge_scores["error"].notna().sum()) if len(judge_scores) else 0
    best = generations.sort_values("fitness", ascending=False).iloc[0]
    return MaterializeResult(metadata={
        "era": config.era, "dagster/row_count": len(generations), "judge_calls": len(judge_scores),
        "judge_failures": failures, "best_fitness": float(best["fitness"]),
        "best_prompt": MetadataValue.md(f"```\n{best['prompt_text'][:2000]}\n```"),
    })


def fitness_plot(stats: pd.DataFrame, era: str) -> str:
    """Markdown embedding a PNG plot of mean and max fitness per generation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.2), dpi=100)
    axes.plot(stats["generation"], stats["mean_fitness"], marker="o", label="mean fitness")
    axes.plot(stats["generation"], stats["max_fitness"], marker="s", label="max fitness")
    axes.set(xlabel="generation", ylabel="fitness", title=f"Era {era}", ylim=(0, 1))
    axes.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return f"![fitness per generation](data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()})"


@asset(group_name="prompt_evolution", deps=[evolution_era], kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def generation_stats(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """Mean, std, median, min and max fitness per era and generation, from the generations table."""
    with warehouse.store(EvolutionStore) as store:
        stats = statistics_rows(store.load_generation_outcomes())
        store.replace_generation_stats(stats)
        latest = store.latest_era()
    era_stats = stats[stats["era"] == latest]
    return MaterializeResult(metadata={
        "dagster/row_count": len(stats), "era": latest,
        "statistics": MetadataValue.md(era_stats.round(4).to_markdown(index=False)),
        "fitness_plot": MetadataValue.md(fitness_plot(era_stats, latest)),
    })


@asset(group_name="prompt_evolution", deps=[generation_stats, evolution_era], kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def era_summary(warehouse: WarehouseResource) -> MaterializeResult:
    """Each era's final mean and max fitness and its number of generations."""
    with warehouse.store(EvolutionStore) as store:
        eras = store.summarize_eras()
    return MaterializeResult(metadata={"dagster/row_count": len(eras),
                                       "eras": MetadataValue.md(eras.round(4).to_markdown(index=False))})
