"""Blind evaluation's results: unblinded ratings, wins, losses and ties per system, paired statistics,
rater agreement and the reporting sentence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import pandas as pd


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
    system, averaged over raters), and a bootstrap 95% CI of the mean difference."""
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
    else:
        result["bootstrap_ci"] = [float(differences[0]), float(differences[0])] if len(differences) else [0.0, 0.0]
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
