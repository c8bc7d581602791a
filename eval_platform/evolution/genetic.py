"""Prompt evolution: the five-tag genome, the fitness document's prompt assembly, GA operators and
an era loop that can stop (after any generation: a crash, or its cost budget) and resume exactly.

Per generation: the top 20% (elite) are kept unchanged and not re-evaluated; 20% are mutations
(one tag rewritten); on odd generations 8% are immigrants (fresh random prompts); the rest are
tag-wise crossovers. Parents are drawn by roulette wheel on fitness. The era is seeded, so the
same configuration gives the same era.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field

from eval_platform.common.gateway import CallRecord, call_record, describe_error
from eval_platform.common.judges import sampled
from eval_platform.common.models import DEFAULT_LOCAL_MODEL, Chat, LanguageModel
from eval_platform.common.panels import JudgePanel
from eval_platform.evolution.fitness import calculate_fitness
from eval_platform.evolution.judging import PanelJudge, judge_compression, panel_judge

TAGS = ("role", "compression_target", "fidelity", "constraints", "output")
ELITE_FRACTION = 0.2
MUTATION_FRACTION = 0.2
IMMIGRATION_FRACTION = 0.08


def build_compression_prompt(genome: Mapping[str, str], paragraph_text: str) -> str:
    """The fitness document's compression prompt: the five tags, then the original text."""
    tags = "\n\n".join(genome[tag] for tag in TAGS)
    return f"{tags}\n\nOriginal Text:\n{paragraph_text}"


@dataclass
class Individual:
    prompt_id: str
    genome: dict[str, str]
    operator: str  # initial, crossover, mutation or immigration
    parents: list[str] = field(default_factory=list)
    evaluation: dict[str, Any] | None = None
    calls: list[CallRecord] = field(default_factory=list)  # the API calls made for it (mutation, evaluation)

    @property
    def fitness(self) -> float:
        return self.evaluation["fitness"] if self.evaluation else 0.0


class EraSettings(JudgePanel):
    """An era's settings, declared once: an era file's fields (data/evolution/eras/), the era
    asset's launchpad config and what the genetic algorithm runs with; its judge panel's fields
    (the panel, and how far its judges are trusted) are `JudgePanel`'s."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    population_size: int = Field(default=5, gt=0)
    generations: int = Field(default=2, ge=0, description="Generations after generation 0; raise it to extend an era.")
    paragraph_ids: tuple[str, ...] = Field(default=(), description="Paragraphs to use, in turn; empty: all.")
    compression_model: str = Field(default=DEFAULT_LOCAL_MODEL, description="The model that compresses.")
    mutation_model: str | None = Field(default=None, description="Model that rewrites a tag; None: the gene pool.")
    use_token_metric: bool = Field(default=False, description="Compression measured in tokens, not words.")
    tokenizer: str = Field(default=DEFAULT_LOCAL_MODEL, description="Tokenizer for token counts.")
    seed: int = 7
    compression_max_tokens: int = Field(default=64, gt=0)
    max_cost_usd: float | None = Field(
        default=None,
        description="Stop after the generation that brings the era's API cost to this; raise it to resume.",
    )
    use_response_cache: bool = Field(default=True, description="Answer identical temperature-0 calls from DuckDB.")


# What an era's results depend on (its configuration's digest, `eras.config_hash`): not its budget (it
# can be raised to resume), its length (an era of N generations is the start of one of more), the
# paragraphs' choice and order or the tokenizer (checked apart), nor whether the response cache answers.
HASHED_SETTINGS = ("population_size", "compression_model", "judge_panel", "seed", "use_token_metric",
                   "mutation_model", "compression_max_tokens")  # fmt: skip
# Hashed too where the panel is weighted (so the digest of an era on the plain average is unchanged).
WEIGHTING_SETTINGS = ("judge_weighting", "agreement_set", "agreement_metric")
# Hashed too where the judges sample (so the digest of an era of greedy judges is unchanged).
JUDGE_SAMPLING_SETTINGS = ("judge_temperature", "judge_top_p", "judge_top_k", "judge_min_p", "judge_samples",
                           "judge_seed")  # fmt: skip


def hashed_settings(settings: EraSettings) -> tuple[str, ...]:
    """The settings an era's results depend on (`judge_modes` where any judge is named, so the digest
    of an era whose judges ask their models' own way is unchanged)."""
    weighting = WEIGHTING_SETTINGS if settings.judge_weighting != "average" else ()
    sampling = JUDGE_SAMPLING_SETTINGS if settings.judge_sampling is not None else ()
    return HASHED_SETTINGS + weighting + sampling + (("judge_modes",) if settings.judge_modes else ())


def _prompt_id(generation: int, index: int, genome: Mapping[str, str]) -> str:
    digest = hashlib.sha256("\x1f".join(genome[t] for t in TAGS).encode()).hexdigest()[:8]
    return f"g{generation:03d}-{index:03d}-{digest}"


def random_genome(rng: random.Random, gene_pool: Mapping[str, Sequence[str]]) -> dict[str, str]:
    return {tag: rng.choice(list(gene_pool[tag])) for tag in TAGS}


def roulette(rng: random.Random, population: Sequence[Individual], k: int) -> list[Individual]:
    """k parents drawn with probability proportional to fitness (uniform if all are 0)."""
    weights = [ind.fitness for ind in population]
    return rng.choices(population, weights=weights if sum(weights) > 0 else None, k=k)


def crossover(rng: random.Random, first: Individual, second: Individual) -> dict[str, str]:
    """Each tag from one parent or the other."""
    return {tag: (first if rng.random() < 0.5 else second).genome[tag] for tag in TAGS}


def operator_counts(population_size: int, generation: int) -> dict[str, int]:
    elite = max(1, round(ELITE_FRACTION * population_size))
    immigration = max(1, round(IMMIGRATION_FRACTION * population_size)) if generation % 2 == 1 else 0
    mutation = round(MUTATION_FRACTION * population_size)
    crossover_count = population_size - elite - immigration - mutation
    if crossover_count < 0:
        raise ValueError(f"population_size {population_size} is too small for elite, mutation and immigration")
    return {"elite": elite, "mutation": mutation, "immigration": immigration, "crossover": crossover_count}


MutateTag = Callable[[str, str], Awaitable[tuple[str, CallRecord]]]  # (tag, text) -> (new text, its call)


async def next_generation(
    rng: random.Random,
    population: Sequence[Individual],
    generation: int,
    gene_pool: Mapping[str, Sequence[str]],
    mutate_tag: MutateTag | None = None,
) -> list[Individual]:
    """The next population: elite carried over as they are, then new unevaluated individuals."""
    counts = operator_counts(len(population), generation)
    ranked = sorted(population, key=lambda ind: (-ind.fitness, ind.prompt_id))
    children: list[Individual] = list(ranked[: counts["elite"]])
    planned: list[tuple[str, dict[str, str], list[str]]] = []
    for _ in range(counts["crossover"]):
        first, second = roulette(rng, population, 2)
        planned.append(("crossover", crossover(rng, first, second), [first.prompt_id, second.prompt_id]))
    mutations = []
    for _ in range(counts["mutation"]):
        (parent,) = roulette(rng, population, 1)
        tag = rng.choice(TAGS)
        alternatives = [g for g in gene_pool[tag] if g != parent.genome[tag]] or list(gene_pool[tag])
        mutations.append((parent, tag, rng.choice(alternatives)))
    for _ in range(counts["immigration"]):
        planned.append(("immigration", random_genome(rng, gene_pool), []))
    mutation_calls: list[list[CallRecord]] = [[] for _ in mutations]
    if mutate_tag is not None:
        results = await asyncio.gather(*(mutate_tag(tag, parent.genome[tag]) for parent, tag, _ in mutations))
        rewritten = [text for text, _ in results]
        mutation_calls = [[call] for _, call in results]
    else:
        rewritten = [from_pool for _, _, from_pool in mutations]
    calls = [[] for _ in planned]
    for (parent, tag, _), text, made in zip(mutations, rewritten, mutation_calls, strict=False):
        planned.append(("mutation", {**parent.genome, tag: text}, [parent.prompt_id]))
        calls.append(made)
    for (operator, genome, parents), made in zip(planned, calls, strict=False):
        children.append(
            Individual(_prompt_id(generation, len(children), genome), genome, operator, parents, calls=list(made))
        )
    return children


async def evaluate_prompt_fitness(
    compressor: LanguageModel,
    judges: Mapping[str, PanelJudge],
    genome: Mapping[str, str],
    paragraph_text: str,
    config: EraSettings,
    count_tokens: Callable[[str], int],
    judge_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Compress with the era's model, judge with every judge in parallel, compute the fitness (the
    panel's plain average, or weighted by `judge_weights`). Returns the fitness document's
    evaluation dictionary."""
    prompt_text = build_compression_prompt(genome, paragraph_text)
    try:
        completion = await compressor.acomplete(Chat("", prompt_text), max_tokens=config.compression_max_tokens)
        compressed_text, compression_error = completion.text.strip(), None
    except Exception as error:  # a failed compression is an empty one: fitness 0
        completion, compressed_text, compression_error = None, "", describe_error(error)
    calls = [call_record("compression", config.compression_model, completion, compression_error)]
    if compressed_text:
        verdicts = await asyncio.gather(
            *(
                judge_compression(
                    name, judge, paragraph_text, compressed_text, config.judge_sampling, config.judge_samples
                )
                for name, judge in judges.items()
            )
        )
    else:
        verdicts = [
            {
                "judge_model": name,
                "model": judge.model.name,
                "score": None,
                "error": "no compressed text to judge",
                "judge_duration_ms": 0,
            }
            for name, judge in judges.items()
        ]
    judge_details = {v["judge_model"]: v for v in verdicts}
    calls += [call for v in verdicts for call in v.pop("calls", [])]
    quality_scores = {name: v["score"] for name, v in judge_details.items()}
    metrics = calculate_fitness(
        paragraph_text, compressed_text, quality_scores, config.use_token_metric, count_tokens, judge_weights
    )
    return {
        "prompt_text": prompt_text,
        "original_text": paragraph_text,
        "compressed_text": compressed_text,
        "compression_error": compression_error,
        **metrics,
        "quality_scores": quality_scores,
        "judge_details": judge_details,
        "calls": calls,
    }


def generation_statistics(fitnesses: Sequence[float]) -> dict[str, float]:
    """Mean, population standard deviation, median, min and max of one generation's fitness."""
    values = np.array(fitnesses, dtype=float)
    return {
        "population": len(values),
        "mean_fitness": float(values.mean()),
        "std_fitness": float(values.std()),
        "median_fitness": float(np.median(values)),
        "min_fitness": float(values.min()),
        "max_fitness": float(values.max()),
    }


def statistics_rows(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Rows of `generation_stats` from each generation's fitness values and counts."""
    return pd.DataFrame(
        [
            {
                "era": row.era,
                "generation": row.generation,
                **generation_statistics(cast(Sequence[float], row.fitnesses)),
                "new_evaluations": row.new_evaluations,
                "judge_failures": row.judge_failures,
            }
            for row in outcomes.itertuples()
        ],
        columns=[
            "era",
            "generation",
            "population",
            "mean_fitness",
            "std_fitness",
            "median_fitness",
            "min_fitness",
            "max_fitness",
            "new_evaluations",
            "judge_failures",
        ],
    )


@dataclass(frozen=True)
class Checkpoint:
    """Where a stopped era continues: its last complete generation's population, the random
    generator's state after it, and what the era has cost so far."""

    generation: int
    population: list[Individual]
    rng_state: tuple[object, ...]  # random.Random's state
    spent_usd: float = 0.0


class GenerationCall(CallRecord):
    """A call of a generation, with the individual it was made for."""

    prompt_id: str


@dataclass(frozen=True)
class GenerationRecord:
    """One complete generation: what a checkpoint stores."""

    generation: int
    population: list[Individual]
    statistics: dict[str, float]
    calls: list[GenerationCall]  # the calls of this generation: mutations and evaluations, with prompt ids
    rng_state: tuple[object, ...]  # random.Random's state
    spent_usd: float  # the era's cost up to and including this generation


def generation_calls(population: Sequence[Individual], generation: int) -> list[GenerationCall]:
    """The calls made in a generation: for the individuals it created and evaluated (not the elite)."""
    return [
        {**call, "prompt_id": ind.prompt_id}
        for ind in population
        if ind.evaluation and ind.evaluation["evaluated_generation"] == generation
        for call in ind.calls
    ]


def era_models(config: EraSettings) -> list[str]:
    """Every model an era calls: its compression model, judges and mutation model."""
    return sorted({config.compression_model, *config.judge_panel.values(), *filter(None, [config.mutation_model])})


def _first_population(
    rng: random.Random, config: EraSettings, gene_pool: Mapping[str, Sequence[str]], resume: Checkpoint | None
) -> tuple[list[Individual], int, float]:
    """The population the era starts from, its first generation and what it has spent: random
    genomes from the gene pool at generation 0, else the checkpoint's (its random state restored)."""
    if resume is None:
        population = [
            Individual(_prompt_id(0, i, genome), genome, "initial")
            for i, genome in enumerate(random_genome(rng, gene_pool) for _ in range(config.population_size))
        ]
        return population, 0, 0.0
    rng.setstate(resume.rng_state)
    return list(resume.population), resume.generation + 1, resume.spent_usd


async def run_era(
    era: str,
    config: EraSettings,
    open_model: Callable[[str], LanguageModel],
    paragraphs: Sequence[Mapping[str, str]],
    gene_pool: Mapping[str, Sequence[str]],
    count_tokens: Callable[[str], int],
    on_generation: Callable[[GenerationRecord], None] = lambda record: None,
    resume: Checkpoint | None = None,
    judge_weights: Mapping[str, float] | None = None,
) -> str:
    """Run the era's generations (0..config.generations) from the start or after a checkpoint,
    handing each complete generation to `on_generation`; each individual is evaluated once
    (generation g on paragraph g mod len(paragraphs)), elite keep their evaluation. Returns
    `complete`, or `stopped_for_budget` when a generation brought the cost to `max_cost_usd`.
    Models are opened by name with `open_model`, so any backend can compress, judge or mutate;
    the panel's scores are averaged plainly, or weighted by `judge_weights` (by judge name)."""
    rng = random.Random(f"{config.seed}:{era}")
    models = {name: open_model(name) for name in era_models(config)}
    judges = {
        name: panel_judge(models[model], config.judge_modes.get(name)) for name, model in config.judge_panel.items()
    }
    if config.judge_sampling is not None:  # every judge can be sampled, or the era stops before any call
        for judge in judges.values():
            sampled(judge.asking)
    mutate_tag = _llm_mutation(models[config.mutation_model]) if config.mutation_model else None
    population, first, spent = _first_population(rng, config, gene_pool, resume)
    compressor = models[config.compression_model]
    for generation in range(first, config.generations + 1):
        if generation:
            population = await next_generation(rng, population, generation, gene_pool, mutate_tag)
        paragraph = paragraphs[generation % len(paragraphs)]
        pending = [ind for ind in population if ind.evaluation is None]
        evaluations = await asyncio.gather(
            *(
                evaluate_prompt_fitness(
                    compressor, judges, ind.genome, paragraph["text"], config, count_tokens, judge_weights
                )
                for ind in pending
            )
        )
        for ind, evaluation in zip(pending, evaluations, strict=False):
            ind.calls += evaluation.pop("calls")
            ind.evaluation = {
                **evaluation,
                "paragraph_id": paragraph["paragraph_id"],
                "evaluated_generation": generation,
            }
        calls = generation_calls(population, generation)
        spent += sum(call["cost_usd"] or 0.0 for call in calls)
        statistics = generation_statistics([ind.fitness for ind in population])
        on_generation(GenerationRecord(generation, list(population), statistics, calls, rng.getstate(), spent))
        if config.max_cost_usd is not None and spent >= config.max_cost_usd and generation < config.generations:
            return "stopped_for_budget"
    return "complete"


def _llm_mutation(model: LanguageModel) -> MutateTag:
    async def mutate(tag: str, text: str) -> tuple[str, CallRecord]:
        instruction = (
            f"Rewrite this '{tag}' instruction of a text-compression prompt so it may work better. "
            f"Keep its purpose; reply with the rewritten instruction only.\n\n{text}"
        )
        try:
            completion = await model.acomplete(Chat("", instruction), max_tokens=120)
        except Exception as error:  # a failed rewrite keeps the tag as it was
            return text, call_record("mutation", model.name, None, describe_error(error))
        return completion.text.strip() or text, call_record("mutation", model.name, completion)

    return mutate
