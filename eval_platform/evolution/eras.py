"""What an era stores and learns: the rows of a generation's checkpoint, the population rebuilt from
one, the judges' agreement and leniency (the fitness document's research questions), and the
quality-vs-compression Pareto front."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
from pydantic import ValidationError

from eval_platform.common.ingestion import KEPT_CHARS, DataFileError, LoadedRows
from eval_platform.evolution.fitness import fitness_score
from eval_platform.evolution.genetic import TAGS, Checkpoint, EraSettings, GenerationRecord, Individual, hashed_settings

if TYPE_CHECKING:
    from eval_platform.evolution.store.eras import EraRow

EVALUATION_FIELDS = (
    "prompt_text",
    "paragraph_id",
    "original_text",
    "compressed_text",
    "compression_error",
    "original_words",
    "compressed_words",
    "compression_ratio",
    "word_compression_ratio",
    "original_tokens",
    "compressed_tokens",
    "token_compression_ratio",
    "quality_score_avg",
    "raw_fitness",
    "survival_factor",
    "fitness",
)
JUDGE_FIELDS = (
    "faithfulness",
    "clarity",
    "readability",
    "score",
    "reported_score",
    "score_mismatch",
    "comments",
    "error",
    "judge_duration_ms",
    "sampled_scores",
)


class SourceParagraph(TypedDict):
    """A paragraph of a paragraphs file, as `source_paragraphs` keeps it."""

    paragraph_id: str
    title: object  # as the file gives it (None where it has none)
    text: str


class RejectedLine(TypedDict):
    """A line of a paragraphs file that is no paragraph, as `paragraph_rejections` keeps it."""

    line: int | None
    row_json: str
    reason: str


def paragraph_records(loaded: LoadedRows) -> tuple[list[SourceParagraph], list[RejectedLine]]:
    """(paragraphs, rejections) from the rows of a paragraphs file: a row needs a `paragraph_id`
    and a `text`, and an id once; every rejection keeps its line and reason."""
    paragraphs, rejections, seen = [], [], {}
    for (_, row), line in zip(loaded.rows, loaded.lines, strict=False):
        missing = [key for key in ("paragraph_id", "text") if not str(row.get(key) or "").strip()]
        reason = (
            f"missing {', '.join(missing)}"
            if missing
            else f"paragraph_id {row['paragraph_id']!r} repeated (first at line {seen[str(row['paragraph_id'])]})"
            if str(row["paragraph_id"]) in seen
            else None
        )
        if reason:
            rejections.append(
                {"line": line, "row_json": json.dumps(row, ensure_ascii=False)[:KEPT_CHARS], "reason": reason}
            )
            continue
        seen[str(row["paragraph_id"])] = line
        paragraphs.append(
            {"paragraph_id": str(row["paragraph_id"]), "title": row.get("title"), "text": str(row["text"]).strip()}
        )
    rejections += [{"line": r.line, "row_json": r.text, "reason": r.reason} for r in loaded.rejected]
    return paragraphs, sorted(rejections, key=lambda r: r["line"] or 0)


def config_hash(era: str, settings: EraSettings) -> str:
    """The digest of what an era's results depend on (`hashed_settings`), and its name."""
    fields = {"era": era, **{name: getattr(settings, name) for name in hashed_settings(settings)}}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=dict).encode()).hexdigest()[:16]


class EraConfigurationChanged(ValueError):
    """An era re-run with another configuration than the one its stored generations came from."""


@dataclass(frozen=True)
class EraStart:
    """How an era run begins: after its stored checkpoint (None: from generation 0), on which
    paragraphs, from which gene pool."""

    resume: Checkpoint | None
    paragraphs: list[dict[str, str]]
    gene_pool: dict[str, list[str]]

    def done(self, settings: EraSettings) -> bool:
        """Whether the era already has all its generations."""
        return self.resume is not None and self.resume.generation >= settings.generations


def era_start(
    era: str,
    settings: EraSettings,
    restart: bool,
    state: EraRow | None,
    checkpoint: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None,
    spent_usd: float,
    paragraphs: Sequence[Mapping[str, str]],
    genes: Sequence[Mapping[str, str]],
) -> EraStart:
    """Where an era run starts, from what the warehouse holds of it (`state`: its row of `eras`,
    `checkpoint`: its last complete generation, `spent_usd`: its cost so far): after that
    generation, unless `restart`; a stored era whose configuration differs is refused, naming what
    changed, unless `restart`. The paragraphs are those `paragraph_ids` names, in that order."""
    if state and state["config_hash"] != config_hash(era, settings) and not restart:
        old = json.loads(state["config"])
        changed = [key for key, value in settings.model_dump(mode="json").items()
                   if key in hashed_settings(settings) and old.get(key) != value]  # fmt: skip
        raise EraConfigurationChanged(
            f"Era {era!r} was run with another configuration (changed: {', '.join(changed) or 'its version'}); "
            "set restart: true to start it again (its stored generations are replaced), or name a new era."
        )
    resume = None
    if state and checkpoint and not restart:
        stored, rows = checkpoint
        resume = Checkpoint(stored["generation"], population_from_rows(rows), rng_state(stored["rng_state"]), spent_usd)
    chosen = list(paragraphs)
    if settings.paragraph_ids:
        known = {p["paragraph_id"]: p for p in paragraphs}
        unknown = [pid for pid in settings.paragraph_ids if pid not in known]
        if unknown:
            raise ValueError(f"Unknown paragraph_ids {unknown}; known: {sorted(known)}")
        chosen = [known[pid] for pid in settings.paragraph_ids]
    pool = {tag: [g["text"] for g in genes if g["tag"] == tag] for tag in TAGS}
    return EraStart(resume, [dict(p) for p in chosen], pool)


# A generation's gateway calls, as `gateway_calls` keeps them
CALL_COLUMNS = [
    "era", "generation", "prompt_id", "purpose", "judge_name", "model", "prompt_tokens", "completion_tokens",
    "cost_usd", "cached", "attempts", "duration_ms", "error",
]  # fmt: skip


def _individual_rows(
    era: str, record: GenerationRecord, judges: Sequence[str]
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """A complete generation's individuals (`generations`), and the judges' scores of those
    evaluated in it (`judge_scores`)."""
    rows, judge_rows = [], []
    for ind in record.population:
        e = ind.evaluation
        assert e is not None, f"{ind.prompt_id} of a complete generation is not evaluated"
        carried = e["evaluated_generation"] != record.generation
        rows.append(
            {
                "era": era,
                "generation": record.generation,
                "prompt_id": ind.prompt_id,
                "operator": ind.operator,
                "parents": ind.parents,
                "carried_over": carried,
                "evaluated_generation": e["evaluated_generation"],
                **ind.genome,
                **{k: e[k] for k in EVALUATION_FIELDS},
                "quality_scores_json": json.dumps({j: e["quality_scores"].get(j) for j in judges}),
            }
        )
        if not carried:
            judge_rows += [
                {
                    "era": era,
                    "prompt_id": ind.prompt_id,
                    "evaluated_generation": record.generation,
                    "judge_name": name,
                    "judge_model": d["model"],
                    **{k: d.get(k) for k in JUDGE_FIELDS},
                }
                for name, d in e["judge_details"].items()
            ]
    return rows, judge_rows


def generation_frames(
    era: str, record: GenerationRecord, judges: Sequence[str], at: datetime
) -> dict[str, pd.DataFrame]:
    """The rows one complete generation adds: `generations` (every individual), `judge_scores`
    (those evaluated in it), `generation_stats`, `gateway_calls` and `era_checkpoints`."""
    rows, judge_rows = _individual_rows(era, record, judges)
    calls = pd.DataFrame(
        [{"era": era, "generation": record.generation, **call} for call in record.calls], columns=CALL_COLUMNS
    )
    usage = {
        "calls": len(calls),
        "prompt_tokens": calls["prompt_tokens"].sum(min_count=1),
        "completion_tokens": calls["completion_tokens"].sum(min_count=1),
        "cost_usd": calls["cost_usd"].sum(min_count=1),
        "cache_hits": int(calls["cached"].sum()),
    }
    stats = {
        "era": era,
        "generation": record.generation,
        **record.statistics,
        "new_evaluations": sum(not r["carried_over"] for r in rows),
        "judge_failures": sum(r["error"] is not None for r in judge_rows),
        **usage,
    }
    checkpoint = {
        "era": era,
        "generation": record.generation,
        "population": [i.prompt_id for i in record.population],
        "rng_state": json.dumps(record.rng_state),
        "spent_usd": record.spent_usd,
        "completed_at": at,
    }
    return {
        "generations": pd.DataFrame(rows),
        "judge_scores": pd.DataFrame(judge_rows),
        "generation_stats": pd.DataFrame([stats]),
        "gateway_calls": calls.astype({"cached": bool}),
        "era_checkpoints": pd.DataFrame([checkpoint]),
    }


def rng_state(stored: str) -> tuple[object, ...]:
    """random.Random's state from its JSON form (lists back to tuples)."""
    version, internal, gauss = json.loads(stored)
    return version, tuple(internal), gauss


def population_from_rows(rows: Sequence[Mapping[str, Any]]) -> list[Individual]:
    """A checkpointed generation's individuals, evaluated as they were."""
    population = []
    for row in rows:
        evaluation = {
            **{k: row[k] for k in EVALUATION_FIELDS},
            "evaluated_generation": row["evaluated_generation"],
            "quality_scores": dict(row["quality_scores"] or {}),
            "judge_details": {},
        }
        population.append(
            Individual(
                row["prompt_id"], {tag: row[tag] for tag in TAGS}, row["operator"], list(row["parents"]), evaluation
            )
        )
    return population


def sample_spread(samples: pd.Series) -> float | None:
    """A sampled judge's self-consistency: the mean, over the compressions it judged, of the
    (population) standard deviation of its k scores of one compression (0: the same score every
    time); None for a judge asked once a compression."""
    answered = [
        [float(score) for score in scores if score is not None and score is not np.ma.masked and score == score]
        for scores in samples
        if isinstance(scores, list | np.ndarray)  # NULL for a judge asked once; a failed sample's NULL left out
    ]
    spreads = [float(np.std(scores)) for scores in answered if len(scores) > 1]
    return float(np.mean(spreads)) if spreads else None


def judge_subset_rankings(era: str, verdicts: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    """The seed's single- against multi-judge ablation, from the stored verdicts (no call): for each
    judge alone, each pair of judges and the whole panel, every evaluated prompt's fitness recomputed from their plain
    average (`fitness_score`, on the prompt's stored compression ratio and survival factor; 0 where none
    of them scored it), the prompt it ranks first and whether that is the panel's, and Kendall's tau
    between its ranking and the panel's (the stored fitness)."""
    from scipy.stats import kendalltau

    judges = sorted(verdicts["judge_name"].unique())
    ids = list(prompts["prompt_id"])
    scores = verdicts.pivot_table(index="prompt_id", columns="judge_name", values="score").reindex(
        index=ids, columns=judges
    )
    panel = pd.Series(prompts["fitness"].to_numpy(dtype=float), index=ids)
    rows = []
    for size in sorted({1, 2, len(judges)} & set(range(1, len(judges) + 1))):  # alone, in pairs, the whole panel
        for subset in combinations(judges, size):
            quality = scores[list(subset)].mean(axis=1, skipna=True)
            recomputed = pd.Series(
                [
                    0.0 if pd.isna(q) else fitness_score(float(q), float(ratio), int(survival))[1]
                    for q, ratio, survival in zip(
                        quality, prompts["compression_ratio"], prompts["survival_factor"], strict=True
                    )
                ],
                index=ids,
                dtype=float,
            )
            best = str(recomputed.idxmax()) if ids else None
            varied = recomputed.nunique() > 1 and panel.nunique() > 1
            rows.append(
                {
                    "era": era,
                    "judges": "+".join(subset),
                    "size": size,
                    "prompts": len(ids),
                    "best_prompt": best,
                    "same_best": best == str(panel.idxmax()) if ids else None,
                    "kendall_tau": float(kendalltau(recomputed, panel).statistic) if varied else None,  # type: ignore[attr-defined]
                }
            )
    return pd.DataFrame(rows, columns=["era", "judges", "size", "prompts", "best_prompt", "same_best", "kendall_tau"])


def judge_analysis(era: str, verdicts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, agreement, per generation) of an era's judges: each judge's verdicts, failures,
    mean and std score, share of verdicts whose reported `score` is not the sum of its parts (failures),
    the spread of a sampled judge's k scores of one compression (`sample_spread`), and rank from
    harshest; Pearson and Spearman correlations between every two judges on the
    prompts both scored; each judge's mean and std score per generation."""
    scored = verdicts[verdicts["score"].notna()]
    return _judge_summary(era, verdicts), _judge_agreement(era, scored), _judge_generations(era, scored)


def _judge_summary(era: str, verdicts: pd.DataFrame) -> pd.DataFrame:
    """Each judge's verdicts, failures, mean and std score, mismatch share, sample spread and rank."""
    summary = []
    for (name, model), group in verdicts.groupby(["judge_name", "judge_model"]):
        ok = group[group["score"].notna()]
        summary.append(
            {
                "era": era,
                "judge_name": name,
                "judge_model": model,
                "verdicts": len(group),
                "failures": int(group["error"].notna().sum()),
                "mean_score": ok["score"].mean() if len(ok) else None,
                "std_score": ok["score"].std(ddof=0) if len(ok) else None,
                "mismatch_share": float(group["score_mismatch"].fillna(False).astype(bool).mean()),
                "sample_spread": sample_spread(group["sampled_scores"]),
            }
        )
    columns = ["era", "judge_name", "judge_model", "verdicts", "failures", "mean_score", "std_score"]
    summary = pd.DataFrame(summary, columns=[*columns, "mismatch_share", "sample_spread"])
    ranked = summary[summary["mean_score"].notna()].sort_values(["mean_score", "judge_name"])
    ranks = {name: rank for rank, name in enumerate(ranked["judge_name"], start=1)}
    summary["leniency_rank"] = summary["judge_name"].map(ranks)
    summary["leniency"] = [
        ("harshest" if ranks.get(n) == 1 else "most lenient" if ranks.get(n) == len(ranks) else "")
        if len(ranks) > 1
        else ""
        for n in summary["judge_name"]
    ]
    return summary


def _judge_agreement(era: str, scored: pd.DataFrame) -> pd.DataFrame:
    """Pearson and Spearman correlations between every two judges on the prompts both scored."""
    table = scored.pivot_table(index="prompt_id", columns="judge_name", values="score")
    agreement = []
    for first, second in combinations(sorted(table.columns), 2):
        pair = table[[first, second]].dropna()
        varied = len(pair) > 2 and pair[first].nunique() > 1 and pair[second].nunique() > 1
        agreement.append(
            {
                "era": era,
                "judge_a": first,
                "judge_b": second,
                "n": len(pair),
                "pearson": float(pair[first].corr(pair[second], method="pearson")) if varied else None,
                "spearman": float(pair[first].corr(pair[second], method="spearman")) if varied else None,
            }
        )
    return pd.DataFrame(agreement, columns=["era", "judge_a", "judge_b", "n", "pearson", "spearman"])


def _judge_generations(era: str, scored: pd.DataFrame) -> pd.DataFrame:
    """Each judge's mean and std score per generation."""
    return (
        scored.groupby(["judge_name", "generation"])["score"]
        .agg(n="count", mean_score="mean", std_score=lambda v: float(np.std(v)))
        .reset_index()
        .assign(era=era)
    )


def pareto_front(points: pd.DataFrame) -> pd.DataFrame:
    """The prompts no other prompt beats on both quality and compression ratio (at least as good on
    both, better on one); highest quality first."""
    candidates = points[points["quality_score_avg"].notna() & points["compression_ratio"].notna()]
    quality, ratio = candidates["quality_score_avg"].to_numpy(), candidates["compression_ratio"].to_numpy()
    front = [
        i
        for i in range(len(candidates))
        if not ((quality >= quality[i]) & (ratio >= ratio[i]) & ((quality > quality[i]) | (ratio > ratio[i]))).any()
    ]
    chosen = candidates.iloc[front].drop(columns=["survival_factor"])
    return chosen.sort_values(["quality_score_avg", "compression_ratio"], ascending=False)


def era_files(folder: Path) -> dict[str, Path]:
    """Each era's configuration file in `folder`, by era name (the file's stem)."""
    return {path.stem: path for path in sorted(Path(folder).glob("*.json"))}


def era_run_config(path: Path) -> dict[str, dict[str, dict[str, object]]]:
    """The run config of an era from its configuration file: an era's settings (`EraSettings`'s
    fields, and `restart`) as a JSON object; any other file is refused naming it and the line or
    the field at fault."""
    config = json_file(path)
    if not isinstance(config, dict):
        raise DataFileError(f"{path}: an era's settings are a JSON object, not a {type(config).__name__}")
    if not isinstance(config.get("restart", False), bool):
        raise DataFileError(f"{path}: restart: true or false, not {config['restart']!r}")
    try:
        EraSettings.model_validate({key: value for key, value in config.items() if key != "restart"})
    except ValidationError as error:
        first = error.errors()[0]
        raise DataFileError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from error
    return {"ops": {"evolution_era": {"config": config}}}


def json_file(path: Path) -> object:
    """A JSON file's value; one that is not JSON is refused naming the file, line and column."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataFileError(f"{path}: not JSON: {error.msg} at line {error.lineno}, column {error.colno}") from error
    except (OSError, UnicodeDecodeError) as error:
        raise DataFileError(f"{path}: cannot be read: {error}") from error


def gene_pool_file(path: Path) -> dict[str, list[str]]:
    """The gene pools of a file (`data/evolution/gene_pools.json`): for each of the five prompt
    tags, its alternatives, each a non-empty text. A file with a tag missing or empty, a tag
    the prompt does not have, or a gene that is not text is refused naming the file and the tag."""
    pools = json_file(path)
    if not isinstance(pools, dict):
        raise DataFileError(f"{path}: gene pools are a JSON object of tag: [texts], not a {type(pools).__name__}")
    unknown = sorted(set(pools) - set(TAGS))
    if unknown:
        raise DataFileError(f"{path}: no prompt tag named {', '.join(unknown)} (the tags: {', '.join(TAGS)})")
    missing = [tag for tag in TAGS if not pools.get(tag)]
    if missing:
        raise DataFileError(f"{path}: no genes for tag(s) {', '.join(missing)}")
    for tag in TAGS:
        genes = pools[tag]
        if not isinstance(genes, list):
            raise DataFileError(f"{path}: {tag}: a list of texts, not a {type(genes).__name__}")
        for index, gene in enumerate(genes):
            if not isinstance(gene, str) or not gene.strip():
                raise DataFileError(f"{path}: {tag}: gene {index} is not a non-empty text: {str(gene)[:60]!r}")
    return {tag: list(pools[tag]) for tag in TAGS}
