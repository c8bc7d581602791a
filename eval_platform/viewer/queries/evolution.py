"""The prompt-evolution pages' reads: the eras, an era's generations and their candidates, and one
candidate with its compressed text, every judge's rubric scores and comments, its fitness and its
ancestry (the `prompt_ancestry` view)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from eval_platform.viewer.warehouse import Connection, fetch, fetch_one

CANDIDATES_SHOWN = 500  # of one generation (a population is tens)


@dataclass(frozen=True)
class EraRow:
    era: str
    status: str
    population_size: int
    generations_done: int | None
    compression_model: str
    judge_panel: str  # JSON: judge name -> model
    started_at: datetime | None
    finished_at: datetime | None
    final_mean_fitness: float | None
    final_max_fitness: float | None
    calls: int | None
    cost_usd: float | None


@dataclass(frozen=True)
class GenerationRow:
    generation: int
    population: int
    mean_fitness: float | None
    median_fitness: float | None
    max_fitness: float | None
    new_evaluations: int | None
    judge_failures: int | None
    calls: int | None
    cost_usd: float | None


@dataclass(frozen=True)
class CandidateRow:
    prompt_id: str
    operator: str
    parents: list[str]
    carried_over: bool
    evaluated_generation: int
    fitness: float | None
    quality_score_avg: float | None
    compression_ratio: float | None
    compressed_words: int | None
    original_words: int | None
    compressed_start: str | None
    compression_error: str | None


@dataclass(frozen=True)
class Candidate:
    """A prompt as first evaluated: its genes, its compression of the paragraph and its fitness."""

    prompt_id: str
    generation: int
    operator: str
    parents: list[str]
    role: str | None
    compression_target: str | None
    fidelity: str | None
    constraints: str | None
    output: str | None
    prompt_text: str | None
    paragraph_id: str | None
    original_text: str | None
    compressed_text: str | None
    compression_error: str | None
    original_words: int | None
    compressed_words: int | None
    compression_ratio: float | None
    word_compression_ratio: float | None
    original_tokens: int | None
    compressed_tokens: int | None
    token_compression_ratio: float | None
    quality_score_avg: float | None
    raw_fitness: float | None
    survival_factor: int | None
    fitness: float | None


@dataclass(frozen=True)
class Verdict:
    judge_name: str
    judge_model: str
    faithfulness: float | None
    clarity: float | None
    readability: float | None
    score: float | None
    reported_score: float | None
    score_mismatch: bool | None
    comments: str | None
    error: str | None
    judge_duration_ms: int | None


@dataclass(frozen=True)
class Ancestor:
    ancestor_id: str
    depth: int
    ancestor_operator: str
    generation: int | None  # where it was first evaluated
    fitness: float | None


@dataclass(frozen=True)
class Appearance:
    generation: int
    carried_over: bool
    fitness: float | None


def eras(conn: Connection) -> list[EraRow]:
    return fetch(
        conn,
        """SELECT e.era, e.status, e.population_size, e.generations_done, e.compression_model,
                  e.judge_panel::VARCHAR AS judge_panel, e.started_at, e.finished_at, s.final_mean_fitness,
                  s.final_max_fitness, s.calls, s.cost_usd
           FROM eras e LEFT JOIN era_summaries s USING (era) ORDER BY e.started_at DESC NULLS LAST, e.era""",
        [],
        EraRow,
    )


def era(conn: Connection, name: str) -> EraRow | None:
    return next((row for row in eras(conn) if row.era == name), None)


def generations(conn: Connection, name: str) -> list[GenerationRow]:
    return fetch(
        conn,
        """SELECT generation, population, mean_fitness, median_fitness, max_fitness, new_evaluations, judge_failures,
                  calls, cost_usd
           FROM generation_stats WHERE era = $era ORDER BY generation""",
        {"era": name},
        GenerationRow,
    )


def candidates(conn: Connection, name: str, generation: int) -> list[CandidateRow]:
    """A generation's population, fittest first."""
    return fetch(
        conn,
        """SELECT prompt_id, operator, parents, carried_over, evaluated_generation, fitness, quality_score_avg,
                  compression_ratio, compressed_words, original_words, left(compressed_text, 160) AS compressed_start,
                  compression_error
           FROM generations WHERE era = $era AND generation = $generation
           ORDER BY fitness DESC NULLS LAST, prompt_id LIMIT $limit""",
        {"era": name, "generation": generation, "limit": CANDIDATES_SHOWN},
        CandidateRow,
    )


def candidate(conn: Connection, name: str, prompt_id: str) -> Candidate | None:
    """The prompt where it was evaluated (not a carried-over copy)."""
    return fetch_one(
        conn,
        """SELECT prompt_id, generation, operator, parents, role, compression_target, fidelity, constraints, output,
                  prompt_text, paragraph_id, original_text, compressed_text, compression_error, original_words,
                  compressed_words, compression_ratio, word_compression_ratio, original_tokens, compressed_tokens,
                  token_compression_ratio, quality_score_avg, raw_fitness, survival_factor, fitness
           FROM generations WHERE era = $era AND prompt_id = $prompt_id
           ORDER BY carried_over, generation LIMIT 1""",
        {"era": name, "prompt_id": prompt_id},
        Candidate,
    )


def verdicts(conn: Connection, name: str, prompt_id: str) -> list[Verdict]:
    """Every judge's verdict on the prompt's compression: rubric scores, comments, or its error."""
    return fetch(
        conn,
        """SELECT judge_name, judge_model, faithfulness, clarity, readability, score, reported_score, score_mismatch,
                  comments, error, judge_duration_ms
           FROM judge_scores WHERE era = $era AND prompt_id = $prompt_id ORDER BY judge_name""",
        {"era": name, "prompt_id": prompt_id},
        Verdict,
    )


def ancestry(conn: Connection, name: str, prompt_id: str) -> list[Ancestor]:
    """The prompt's ancestors, nearest first, each with the generation it was evaluated in and its fitness."""
    return fetch(
        conn,
        """WITH evaluated AS (SELECT prompt_id, min(generation) AS generation, any_value(fitness) AS fitness
                             FROM generations WHERE era = $era AND NOT carried_over GROUP BY prompt_id)
           SELECT a.ancestor_id, min(a.depth) AS depth, any_value(a.ancestor_operator) AS ancestor_operator,
                  any_value(e.generation) AS generation, any_value(e.fitness) AS fitness
           FROM prompt_ancestry a LEFT JOIN evaluated e ON e.prompt_id = a.ancestor_id
           WHERE a.era = $era AND a.prompt_id = $prompt_id AND a.depth > 0
           GROUP BY a.ancestor_id ORDER BY depth, a.ancestor_id""",
        {"era": name, "prompt_id": prompt_id},
        Ancestor,
    )


def appearances(conn: Connection, name: str, prompt_id: str) -> list[Appearance]:
    """The generations whose population holds the prompt."""
    return fetch(
        conn,
        """SELECT generation, carried_over, fitness FROM generations WHERE era = $era AND prompt_id = $prompt_id
           ORDER BY generation""",
        {"era": name, "prompt_id": prompt_id},
        Appearance,
    )
