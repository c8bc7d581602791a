"""Blind evaluation's results: the filled sheets' ratings unblinded, wins, losses and ties per system,
paired statistics, rater agreement and the reporting sentence, per rater and pooled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from eval_platform.blind.sheets import AnswerKey, Problem, read_filled_sheet

RATING_COLUMNS = ["rater", "Question_ID", "system", "side", "score", "opponent_score", "outcome", "notes", "file"]


def unblind(rows: Sequence[Mapping[str, Any]], sides: Mapping[str, tuple[str, str]], rater: str) -> pd.DataFrame:
    """One row per question and system: the score that system got, whether it won, and the rater's
    notes on the question."""
    records = []
    for row in rows:
        system_a, system_b = sides[row["Question_ID"]]
        for side, system, other in (("A", system_a, "B"), ("B", system_b, "A")):
            records.append(
                {
                    "rater": rater,
                    "Question_ID": row["Question_ID"],
                    "system": system,
                    "side": side,
                    "score": row[f"Score_{side}"],
                    "opponent_score": row[f"Score_{other}"],
                    "outcome": "tie" if row["Winner"] == "Tie" else "win" if row["Winner"] == side else "loss",
                    "notes": row.get("Notes") or None,
                }
            )
    return pd.DataFrame(records)


def tally(unblinded: pd.DataFrame) -> pd.DataFrame:
    """Wins, losses, ties and average score per system (over all ratings given)."""
    counts = unblinded.pivot_table(
        index="system", columns="outcome", values="Question_ID", aggfunc="count", fill_value=0
    ).reindex(columns=["win", "loss", "tie"], fill_value=0)
    table = counts.rename(columns={"win": "wins", "loss": "losses", "tie": "ties"})
    table["ratings"] = unblinded.groupby("system").size()
    table["average_score"] = unblinded.groupby("system")["score"].mean()
    return table.reset_index()


def paired_statistics(unblinded: pd.DataFrame, systems: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """Sign test and Wilcoxon signed-rank on per-question score differences (first minus second
    system, averaged over raters), and a bootstrap 95% CI of the mean difference (none where the
    differences are fewer than two or all alike: not an interval of width zero)."""
    from scipy import stats

    first, second = systems
    per_question = unblinded.pivot_table(index="Question_ID", columns="system", values="score", aggfunc="mean")
    differences = (per_question[first] - per_question[second]).to_numpy()
    wins, losses = int((differences > 0).sum()), int((differences < 0).sum())
    result: dict[str, Any] = {
        "questions": len(differences),
        "mean_difference": float(differences.mean()),
        "first_system": first,
        "second_system": second,
        "sign_test_p": float(stats.binomtest(wins, wins + losses).pvalue) if wins + losses else 1.0,
    }
    wilcoxon: Any = stats.wilcoxon(differences) if wins + losses else None  # scipy's result types are loose
    result["wilcoxon_p"] = float(wilcoxon.pvalue) if wilcoxon is not None else 1.0
    if len(set(differences.tolist())) > 1:
        interval = stats.bootstrap(
            (differences,),
            lambda d, axis: d.mean(axis=axis),
            n_resamples=2000,
            confidence_level=0.95,
            rng=seed,
            method="percentile",
        ).confidence_interval
        result["bootstrap_ci"] = [float(interval.low), float(interval.high)]
    else:  # one difference, or all alike: a bootstrap has nothing to resample, and no interval is shown
        result["bootstrap_ci"] = [None, None]
    return result


def rater_agreement(unblinded: pd.DataFrame) -> float | None:
    """Mean pairwise quadratic-weighted Cohen's kappa over every rated answer; None for one rater."""
    from sklearn.metrics import cohen_kappa_score

    by_rater = unblinded.pivot_table(index=["Question_ID", "system"], columns="rater", values="score")
    raters = list(by_rater.columns)
    if len(raters) < 2:
        return None
    kappas = []
    for left, right in combinations(raters, 2):
        pair = by_rater[[left, right]].dropna()
        if pair[left].nunique() == 1 and pair[right].nunique() == 1:
            kappas.append(1.0 if (pair[left] == pair[right]).all() else 0.0)
        else:
            kappas.append(cohen_kappa_score(pair[left], pair[right], weights="quadratic", labels=[1, 2, 3, 4, 5]))
    return float(sum(kappas) / len(kappas))


def summary_sentence(
    table: pd.DataFrame, questions: int, subject: str = "", drivers: Mapping[str, str] | None = None
) -> str:
    """The instructions' reporting sentence, filled in (per-question wins; ties named)."""
    ranked = table.sort_values(["average_score", "wins"], ascending=False).reset_index(drop=True)
    best, other = ranked.iloc[0], ranked.iloc[1]
    scope = f"{questions} expert-curated {subject + ' ' if subject else ''}questions"
    if best["average_score"] == other["average_score"]:
        return (
            f"Blind manual evaluation on {scope} using a 5-point rubric found no difference: "
            f"{best['system']} and {other['system']} both averaged {best['average_score']:.2f}."
        )
    sentence = (
        f"Blind manual evaluation on {scope} using a 5-point rubric revealed that {best['system']} "
        f"achieved an average score of {best['average_score']:.2f} compared to "
        f"{other['average_score']:.2f}, winning {int(best['wins'])}/{int(best['ratings'])} "
        f"{'questions' if best['ratings'] == questions else 'ratings'}."
    )
    if drivers and best["system"] in drivers:
        sentence += f" This demonstrates that {drivers[best['system']]} is the primary driver of performance."
    return sentence


def agreement_with(unblinded: pd.DataFrame, rater: str) -> float | None:
    """Mean quadratic-weighted kappa between one rater (e.g. the LLM) and each other rater."""
    others = [r for r in unblinded["rater"].unique() if r != rater]
    found = [rater_agreement(unblinded[unblinded["rater"].isin([rater, other])]) for other in others]
    kappas = [kappa for kappa in found if kappa is not None]
    return float(sum(kappas) / len(kappas)) if kappas else None


@dataclass(frozen=True)
class FilledSheets:
    """The filled sheets of a folder checked against the answer key: the ratings of the sheets
    accepted (unblinded, each with its file), their files, and every problem found, by file."""

    ratings: pd.DataFrame
    accepted: list[str]
    problems: list[tuple[str, Problem]]

    def problem_rows(self) -> pd.DataFrame:
        """Each problem as a row: its file, cell and message."""
        return pd.DataFrame(
            [(file, p.cell, p.message) for file, p in self.problems], columns=["file", "cell", "problem"]
        )


def read_filled_sheets(folder: Path, key: AnswerKey) -> FilledSheets:
    """Every filled sheet in `folder` (one per rater, named by file; hidden and lock files skipped),
    checked against the answer key: a sheet with problems is not accepted."""
    ratings, accepted, problems = [], [], []
    for path in sorted(folder.glob("*")):
        if path.name.startswith((".", "~$")) or not path.is_file():
            continue
        rows, found = read_filled_sheet(path, key)
        problems += [(path.name, problem) for problem in found]
        if rows:
            accepted.append(path.name)
            ratings.append(unblind(rows, key["sides"], rater=path.stem).assign(file=path.name))
    return FilledSheets(pd.concat(ratings) if ratings else pd.DataFrame(columns=RATING_COLUMNS), accepted, problems)


def tallies(
    ratings: pd.DataFrame, systems: Sequence[str], sheet_id: str, subject: str, drivers: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tallies, outcomes) of a sheet's ratings, per rater and pooled (scope): each system's wins,
    losses, ties and average score; the reporting sentence, the paired statistics of the first
    system against the second and the raters' agreement (pooled: among all raters; a rater's: with
    the others)."""
    questions = ratings["Question_ID"].nunique()
    tables, outcomes = [], []
    scopes = {rater: group for rater, group in ratings.groupby("rater")} | {"pooled": ratings}
    for scope, group in scopes.items():
        table = tally(group)
        stats = paired_statistics(group, systems)
        # pooled: every rater's agreement; a rater's: an LLM's with the humans, a human's with everyone else
        kappa = rater_agreement(group) if scope == "pooled" else agreement_with(ratings, str(scope))
        tables.append(table.assign(sheet_id=sheet_id, scope=scope))
        outcomes.append(
            {
                "sheet_id": sheet_id,
                "scope": scope,
                "sentence": summary_sentence(table, questions, subject, drivers),
                "mean_difference": stats["mean_difference"],
                "sign_test_p": stats["sign_test_p"],
                "wilcoxon_p": stats["wilcoxon_p"],
                "ci_low": stats["bootstrap_ci"][0],
                "ci_high": stats["bootstrap_ci"][1],
                "rater_kappa": kappa,
            }
        )
    return pd.concat(tables), pd.DataFrame(outcomes)
