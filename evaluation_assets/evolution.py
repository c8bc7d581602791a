"""Prompt evolution: paragraphs and gene pools -> an era of generations -> statistics -> era summary."""

import asyncio
import base64
import io
import json
from pathlib import Path

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from evaluation_logic.genetic import TAGS, EraConfig, Individual, run_era
from evaluation_logic.local_model import DEFAULT_LOCAL_MODEL, token_counter
from evaluation_logic.warehouse import Write, judge_json_schema, records, replace_many, utc_now, widen_quality_scores
from resources import DATA_DIR, WAREHOUSE_POOL, ModelGatewayResource, WarehouseResource

EVOLUTION_DIR = DATA_DIR / "evolution"



def read_paragraphs(path: Path) -> pd.DataFrame:
    """Source paragraphs from JSONL; a row without `paragraph_id` or `text` fails naming file and line."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
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
    with warehouse.get_connection() as conn:
        replace_many(conn, [Write("source_paragraphs", frame, {})])
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
    with warehouse.get_connection() as conn:
        replace_many(conn, [Write("gene_pool", frame, {})])
    return MaterializeResult(metadata={"dagster/row_count": len(frame),
                                       "genes_per_tag": MetadataValue.json({t: len(pools[t]) for t in TAGS})})


class EraRunConfig(Config):
    era: str = Field(default="phylo-2", description="Era name; re-running an era replaces its rows.")
    population_size: int = 5
    generations: int = Field(default=2, description="Generations after generation 0.")
    paragraph_ids: list[str] = Field(default=[], description="Paragraphs to use, in turn; empty: all.")
    compression_model: str = DEFAULT_LOCAL_MODEL
    judge_panel: dict[str, str] = Field(
        default={"smollm2": DEFAULT_LOCAL_MODEL},
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
    with warehouse.get_connection() as conn:
        paragraphs = records(conn, "SELECT paragraph_id, text FROM source_paragraphs ORDER BY paragraph_id")
        genes = records(conn, "SELECT tag, text FROM gene_pool ORDER BY tag, gene_index")
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
    with warehouse.get_connection() as conn:
        judges = widen_quality_scores(conn, list(config.judge_panel))
        generations, judge_scores = generation_rows(config.era, history, judges)
        era_row = pd.DataFrame([{
            "era": config.era, "config": config.model_dump_json(), "compression_model": config.compression_model,
            "judge_panel": json.dumps(config.judge_panel), "population_size": config.population_size,
            "started_at": started, "finished_at": utc_now(),
        }])
        replace_many(conn, [
            Write("generations", generations, {"era": config.era},
                  computed={"quality_scores": f"from_json(quality_scores_json, '{judge_json_schema(judges)}')"},
                  inputs=("quality_scores_json",)),
            Write("judge_scores", judge_scores, {"era": config.era}),
            Write("eras", era_row, {"era": config.era}),
        ])
    failures = int(judge_scores["error"].notna().sum()) if len(judge_scores) else 0
    best = generations.sort_values("fitness", ascending=False).iloc[0]
    return MaterializeResult(metadata={
        "era": config.era, "dagster/row_count": len(generations), "judge_calls": len(judge_scores),
        "judge_failures": failures, "best_fitness": float(best["fitness"]),
        "best_prompt": MetadataValue.md(f"```\n{best['prompt_text'][:2000]}\n```"),
    })


STATS_SQL = """
    SELECT g.era, g.generation, count(*) AS population, avg(fitness) AS mean_fitness,
           stddev_pop(fitness) AS std_fitness, median(fitness) AS median_fitness,
           min(fitness) AS min_fitness, max(fitness) AS max_fitness,
           count(*) FILTER (WHERE NOT carried_over) AS new_evaluations,
           coalesce(max(f.failures), 0) AS judge_failures
    FROM generations g
    LEFT JOIN (SELECT era, evaluated_generation AS generation, count(*) AS failures FROM judge_scores
               WHERE error IS NOT NULL GROUP BY ALL) f USING (era, generation)
    GROUP BY g.era, g.generation ORDER BY g.era, g.generation"""


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
    with warehouse.get_connection() as conn:
        stats = conn.execute(STATS_SQL).df()
        replace_many(conn, [Write("generation_stats", stats, {})])
        (latest,) = conn.execute("SELECT era FROM eras ORDER BY finished_at DESC LIMIT 1").fetchone()
    era_stats = stats[stats["era"] == latest]
    return MaterializeResult(metadata={
        "dagster/row_count": len(stats), "era": latest,
        "statistics": MetadataValue.md(era_stats.round(4).to_markdown(index=False)),
        "fitness_plot": MetadataValue.md(fitness_plot(era_stats, latest)),
    })


@asset(group_name="prompt_evolution", deps=[generation_stats], kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def era_summary(warehouse: WarehouseResource) -> MaterializeResult:
    """Each era's final mean and max fitness and its number of generations."""
    with warehouse.get_connection() as conn:
        conn.execute("""
            UPDATE eras SET total_generations = s.last_generation, final_mean_fitness = s.mean_fitness,
                            final_max_fitness = s.max_fitness
            FROM (SELECT era, generation AS last_generation, mean_fitness, max_fitness FROM generation_stats
                  QUALIFY row_number() OVER (PARTITION BY era ORDER BY generation DESC) = 1) s
            WHERE eras.era = s.era""")
        eras = conn.execute("""SELECT era, compression_model, population_size, total_generations,
                                      final_mean_fitness, final_max_fitness FROM eras ORDER BY era""").df()
    return MaterializeResult(metadata={"dagster/row_count": len(eras),
                                       "eras": MetadataValue.md(eras.round(4).to_markdown(index=False))})
