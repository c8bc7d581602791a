"""From verdicts to a leaderboard: battles, win rates with intervals, Bradley-Terry ratings with
bootstrap intervals (as Chatbot Arena publishes them) and AlpacaEval 2's length-controlled win rate.

Battles. A pair judged in both orders is one battle, as FastChat's `show_result.py` counts it: the
winner when both orders agree, a tie when the first order says tie or the two disagree; a pair with
an unparsed verdict is dropped (FastChat drops "error" rows). `combine="each_order"` makes each
verdict a battle of its own instead (as Arena-Hard counts its two games).

Win rate. FastChat's `win_rate_adjusted`: (wins + ties / 2) / battles, with a bootstrap interval
over the model's battles.

Bradley-Terry. Chatbot Arena's maximum-likelihood Elo (`compute_elo_mle_with_tie` in FastChat's
`elo_analysis.py`): P(a beats b) = 1 / (1 + 10^((R_b - R_a) / 400)), a tie counted as half a win
and half a loss, fitted by L-BFGS on the battles' outcomes; R = 1000 + 400 * theta / ln(10), theta
the natural-log strength (the ratings average 1000 unless one model is anchored). The
interval is the 2.5 and 97.5 percentiles over bootstrap rounds, each redrawing the battles with
replacement (Arena's multinomial redraw of the distinct outcomes' counts).

Length-controlled win rate. AlpacaEval 2's GLM (`metrics/glm_winrate.py`, "length_controlled_v1"):
the judge's preference for the model over the baseline on each instruction (1 model, 0 baseline,
0.5 tie) is fitted by a logistic regression without intercept on
    tanh(std_delta_len) + instruction_difficulty + not_gamed_baseline
(std_delta_len: the baseline's answer length minus the model's, in characters, over its standard
deviation across the instructions; not_gamed_baseline: a constant 1, the model's own strength),
L1-penalised, its C chosen by 5-fold cross-validation grouped by instruction on the log loss of the
soft preferences (each instruction entered twice, labels 1 and 0 weighted by the preference and its
complement); the length-controlled win rate is the mean predicted preference with the length
difference set to 0, times 100. Two of AlpacaEval's inputs are files on the Hugging Face hub and
are not used here: `instruction_difficulty.csv` (a per-instruction difficulty fitted on AlpacaEval's
805 instructions and its leaderboard models) is replaced by nothing by default (the term is
dropped: the win rate is then the logistic of the model's strength), or by a difficulty fitted on
this roster's own battles against the same baseline (`roster_instruction_difficulty`); and
`df_gamed.csv` (the baseline's answers prompted to be verbose and concise, added with weight 0.2 to
regularise towards the baseline) is left out, so nothing pulls the fit towards the baseline.
A model whose name is the baseline's gets 50, as AlpacaEval returns by construction.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np

from eval_platform.common.intervals import BOOTSTRAP_ROUNDS, SEED, Estimate, proportion, resample_counts
from eval_platform.judging.records import HumanSet, JudgeVerdict

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

Winner = Literal["model_a", "model_b", "tie"]
SCALE, BASE, INIT_RATING = 400.0, 10.0, 1000.0


@dataclass(frozen=True)
class Battle:
    """One pair's outcome, as Chatbot Arena's battles table has it."""

    model_a: str
    model_b: str
    winner: Winner
    item_id: str
    judge: str
    turn: int = 1


def battles_from_verdicts(
    verdicts: Sequence[JudgeVerdict], combine: Literal["fastchat", "each_order"] = "fastchat"
) -> list[Battle]:
    """The battles of verdicts whose items name both models (see the module's docstring)."""
    outcome: dict[str, Winner] = {"a": "model_a", "b": "model_b", "tie": "tie"}
    groups: dict[tuple[str, str, str, int], list[JudgeVerdict]] = {}
    for verdict in verdicts:
        if verdict.model_a and verdict.model_b:
            groups.setdefault((verdict.judge, verdict.set_name, verdict.item_id, verdict.turn), []).append(verdict)
    battles = []
    for (judge, _, item_id, turn), group in groups.items():
        first = group[0]
        if combine == "each_order":
            battles += [
                Battle(v.model_a, v.model_b, outcome[v.verdict], item_id, judge, turn)  # type: ignore[arg-type]
                for v in group
                if v.verdict != "unparsed"
            ]
            continue
        if any(v.verdict == "unparsed" for v in group):
            continue
        by_order = {v.order: v.verdict for v in group}
        g1 = by_order.get("as_is", by_order.get("swapped"))
        g2 = by_order.get("swapped", g1)
        winner: Winner = "tie" if g1 == "tie" or g1 != g2 else outcome[g1]  # type: ignore[index]
        battles.append(Battle(first.model_a, first.model_b, winner, item_id, judge, turn))  # type: ignore[arg-type]
    return battles


def battles_from_labels(human_set: HumanSet, judge: str = "human") -> list[Battle]:
    """A human-labelled set's gold labels as battles, where both models are known."""
    outcome: dict[str, Winner] = {"a": "model_a", "b": "model_b", "tie": "tie"}
    return [
        Battle(item.model_a, item.model_b, outcome[item.gold], item.item_id, judge)
        for item in human_set.items
        if item.model_a and item.model_b and item.gold is not None
    ]


# --- win rates ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WinRate:
    model: str
    battles: int
    wins: int
    losses: int
    ties: int
    win_rate: Estimate  # (wins + ties / 2) / battles


def win_rates(
    battles: Sequence[Battle], opponent: str | None = None, rounds: int = BOOTSTRAP_ROUNDS, seed: int = SEED
) -> list[WinRate]:
    """Each model's wins, losses and ties over its battles (against `opponent` only, when given;
    the opponent itself is then left out), best first."""
    scores: dict[str, list[float]] = {}
    for battle in battles:
        for model, other, side in (
            (battle.model_a, battle.model_b, "model_a"),
            (battle.model_b, battle.model_a, "model_b"),
        ):
            if opponent is not None and (other != opponent or model == opponent):
                continue
            score = 0.5 if battle.winner == "tie" else float(battle.winner == side)
            scores.setdefault(model, []).append(score)
    rows = [
        WinRate(
            model=model,
            battles=len(values),
            wins=sum(v == 1.0 for v in values),
            losses=sum(v == 0.0 for v in values),
            ties=sum(v == 0.5 for v in values),
            win_rate=proportion(values, [1] * len(values), rounds, seed, method="bootstrap"),
        )
        for model, values in scores.items()
    ]
    return sorted(rows, key=lambda row: (-(row.win_rate.value or 0.0), row.model))


# --- Bradley-Terry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rating:
    model: str
    rating: float  # the maximum-likelihood rating on every battle
    low: float  # 2.5th percentile over bootstrap rounds
    high: float  # 97.5th percentile
    battles: int


def _outcome_table(battles: Sequence[Battle], models: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (model a, model b, outcome) rows and how often each occurs (outcome 1: a won,
    0.5: a tie, 0: b won)."""
    index = {model: i for i, model in enumerate(models)}
    score = {"model_a": 1.0, "tie": 0.5, "model_b": 0.0}
    rows = np.array([(index[b.model_a], index[b.model_b], score[b.winner]) for b in battles])
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    return distinct[:, :2].astype(int), distinct[:, 2], counts.astype(float)


def _fit_bt(matchups: np.ndarray, outcomes: np.ndarray, weights: np.ndarray, n_models: int) -> np.ndarray:
    """Natural-scale strengths maximising the weighted Bradley-Terry likelihood (ties as half)."""
    from scipy.optimize import minimize
    from scipy.special import expit

    alpha = math.log(BASE)

    def loss_and_grad(ratings: np.ndarray) -> tuple[float, np.ndarray]:
        logits = alpha * (ratings[matchups[:, 0]] - ratings[matchups[:, 1]])
        probs = expit(logits)
        eps = 1e-12
        loss = -float(((np.log(probs + eps) * outcomes + np.log(1.0 - probs + eps) * (1.0 - outcomes)) * weights).sum())
        grads = -alpha * (outcomes - probs) * weights
        gradient = np.zeros(n_models)
        np.add.at(gradient, matchups[:, 0], grads)
        np.add.at(gradient, matchups[:, 1], -grads)
        return loss, gradient

    result = minimize(
        loss_and_grad,
        np.zeros(n_models),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 100, "gtol": 1e-6},
    )
    return result.x


def bradley_terry(
    battles: Sequence[Battle],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    anchor: tuple[str, float] | None = None,
) -> list[Rating]:
    """Chatbot Arena's Bradley-Terry ratings (see the module's docstring), best first. `anchor`
    (model, rating) shifts every rating so that model has that rating (Arena anchors
    mixtral-8x7b-instruct-v0.1 at 1114); by default the ratings average 1000."""
    if not battles:
        return []
    models = sorted({b.model_a for b in battles} | {b.model_b for b in battles})
    matchups, outcomes, counts = _outcome_table(battles, models)
    total = counts.sum()
    strengths = _fit_bt(matchups, outcomes, counts / total, len(models))
    redraws = np.random.default_rng(seed).multinomial(int(total), counts / total, size=rounds) if rounds else []
    boot = np.array([_fit_bt(matchups, outcomes, w / total, len(models)) for w in redraws]).reshape(-1, len(models))

    def scaled(values: np.ndarray) -> np.ndarray:
        ratings = INIT_RATING + SCALE * values  # values in log10-odds: 400 points per factor of 10
        if anchor is not None and anchor[0] in models:
            ratings = ratings + anchor[1] - ratings[..., [models.index(anchor[0])]]
        return ratings

    point = scaled(strengths[None, :])[0]
    bounds = np.percentile(scaled(boot), [2.5, 97.5], axis=0) if len(boot) else np.vstack([point, point])
    played = {model: sum(model in (b.model_a, b.model_b) for b in battles) for model in models}
    rows = [
        Rating(model, float(point[i]), float(bounds[0][i]), float(bounds[1][i]), played[model])
        for i, model in enumerate(models)
    ]
    return sorted(rows, key=lambda row: -row.rating)


# --- length-controlled win rate -----------------------------------------------------------------


@dataclass(frozen=True)
class Preference:
    """The judge's preference for the model over the baseline on one instruction."""

    instruction_id: str
    preference: float  # 1: the model's answer, 0: the baseline's, 0.5: a tie
    model_length: int  # characters
    baseline_length: int


@dataclass(frozen=True)
class LengthControlled:
    model: str
    baseline: str
    n: int
    win_rate: float  # the raw win rate, in percent (ties as half)
    standard_error: float  # of the raw win rate, in percent
    lc_win_rate: float  # in percent
    lc_low: float | None  # bootstrap percentile interval over instructions (None without rounds)
    lc_high: float | None
    weights: dict[str, float]  # the GLM's coefficients


class LogisticOptions(TypedDict):
    """scikit-learn's LogisticRegression options besides its penalty."""

    C: float
    solver: str
    fit_intercept: bool
    random_state: int


def _l1_logistic(c: float) -> LogisticRegression:
    """scikit-learn's L1 logistic regression without intercept (liblinear), as AlpacaEval fits it;
    `penalty` is deprecated from scikit-learn 1.8, where `l1_ratio=1` says the same."""
    from sklearn.linear_model import LogisticRegression

    options: LogisticOptions = {"C": c, "solver": "liblinear", "fit_intercept": False, "random_state": 123}
    if inspect.signature(LogisticRegression).parameters["penalty"].default == "deprecated":
        return LogisticRegression(l1_ratio=1.0, **options)
    return LogisticRegression(penalty="l1", **options)


def _soft_log_loss(p: np.ndarray, predicted: np.ndarray) -> float:
    predicted = np.clip(predicted, 1e-15, 1 - 1e-15)
    return -float(np.mean(p * np.log(predicted) + (1 - p) * np.log(1 - predicted)))


def fit_preference_glm(
    features: np.ndarray, preferences: np.ndarray, n_splits: int = 5, cs: Sequence[float] | None = None
) -> np.ndarray:
    """AlpacaEval's `fit_LogisticRegressionCV` with probabilities as labels: each row twice (label
    1 weighted by the preference, label 0 by its complement), the C of 10 values from 1e-4 to 1e4
    with the best mean log loss over folds grouped by row, then a fit on every row with that C.
    Returns the coefficients."""
    from sklearn.model_selection import GroupKFold

    n = len(preferences)
    x = np.vstack([features, features])
    y = np.concatenate([np.ones(n), np.zeros(n)])
    weight = np.concatenate([preferences, 1 - preferences])
    groups = np.concatenate([np.arange(n), np.arange(n)])
    cs = list(cs) if cs is not None else list(np.logspace(-4, 4, 10))
    if len(np.unique(y[weight > 0])) < 2:  # every preference 1 (or 0): no second class to fit against
        weight = np.clip(weight, 1e-6, None)
    best_c = cs[-1]
    if n_splits > 1 and n >= n_splits:
        losses = np.zeros(len(cs))
        for train, test in GroupKFold(n_splits=n_splits).split(x, y, groups):
            for position, c in enumerate(cs):
                model = _l1_logistic(c).fit(x[train], y[train], sample_weight=weight[train])
                losses[position] += _soft_log_loss(
                    np.concatenate([preferences, preferences])[test], model.predict_proba(x[test])[:, 1]
                )
        best_c = cs[int(np.argmin(losses))]
    return _l1_logistic(best_c).fit(x, y, sample_weight=weight).coef_[0]


def _design(
    preferences: Sequence[Preference], difficulty: Mapping[str, float] | None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    delta = np.array([p.baseline_length - p.model_length for p in preferences], dtype=float)
    spread = delta.std(ddof=1) if len(delta) > 1 else 0.0
    std_delta = delta / spread if spread > 0 else np.zeros_like(delta)
    columns = [np.tanh(std_delta)]
    names = ["np.tanh(std_delta_len)"]
    if difficulty is not None:
        columns.append(np.array([difficulty[p.instruction_id] for p in preferences]))
        names.append("instruction_difficulty")
    columns.append(np.ones(len(preferences)))
    names.append("not_gamed_baseline.astype(float)")
    return np.column_stack(columns), np.array([p.preference for p in preferences], dtype=float), names


def _lc(features: np.ndarray, preferences: np.ndarray) -> tuple[float, np.ndarray]:
    coefficients = fit_preference_glm(features, preferences)
    test = features.copy()
    test[:, 0] = 0.0  # no length difference
    return float(np.mean(1 / (1 + np.exp(-(test @ coefficients)))) * 100), coefficients


def length_controlled_win_rate(
    model: str,
    baseline: str,
    preferences: Sequence[Preference],
    instruction_difficulty: Mapping[str, float] | None = None,
    rounds: int = 0,
    seed: int = SEED,
) -> LengthControlled:
    """AlpacaEval 2's length-controlled win rate of `model` against `baseline` (see the module's
    docstring), with a bootstrap interval over instructions when `rounds` > 0."""
    if not preferences:
        raise ValueError(f"no preferences of {model} against {baseline}")
    values = np.array([p.preference for p in preferences], dtype=float)
    raw = float(values.mean() * 100)
    error = float(values.std(ddof=1) / math.sqrt(len(values)) * 100) if len(values) > 1 else 0.0
    if model == baseline:
        names = ["np.tanh(std_delta_len)", "not_gamed_baseline.astype(float)"]
        return LengthControlled(model, baseline, len(values), raw, error, 50.0, 50.0, 50.0, dict.fromkeys(names, 0.0))
    features, targets, names = _design(preferences, instruction_difficulty)
    lc, coefficients = _lc(features, targets)
    low = high = None
    if rounds:
        draws = []
        for counts in resample_counts(len(preferences), rounds, seed):
            chosen = np.repeat(np.arange(len(preferences)), counts)
            sample = [preferences[int(i)] for i in chosen]
            draws.append(_lc(*_design(sample, instruction_difficulty)[:2])[0])
        low, high = (float(v) for v in np.percentile(draws, [2.5, 97.5]))
    return LengthControlled(
        model, baseline, len(values), raw, error, lc, low, high, dict(zip(names, map(float, coefficients), strict=True))
    )


def preferences_against(
    battles: Sequence[Battle], model: str, baseline: str, length: Callable[[Battle, str], int]
) -> list[Preference]:
    """The battles between `model` and `baseline` as the model's preferences; `length(battle,
    name)` is the length of that model's answer in the battle."""
    found = []
    for battle in battles:
        if {battle.model_a, battle.model_b} != {model, baseline}:
            continue
        side = "model_a" if battle.model_a == model else "model_b"
        preference = 0.5 if battle.winner == "tie" else float(battle.winner == side)
        found.append(
            Preference(f"{battle.item_id}#{battle.turn}", preference, length(battle, model), length(battle, baseline))
        )
    return found


def roster_instruction_difficulty(preferences: Mapping[str, Sequence[Preference]], c: float = 1.0) -> dict[str, float]:
    """A stand-in for AlpacaEval's instruction difficulty fitted on this roster: a logistic model of
    every model's preference against the same baseline with one strength per model and one term per
    instruction (L2-penalised with `c`; soft labels as in `fit_preference_glm`); an instruction's
    difficulty is its term (higher: the baseline loses it more often)."""
    from sklearn.linear_model import LogisticRegression

    models = sorted(preferences)
    instructions = sorted({p.instruction_id for rows in preferences.values() for p in rows})
    m_index = {m: i for i, m in enumerate(models)}
    i_index = {name: len(models) + i for i, name in enumerate(instructions)}
    rows, targets = [], []
    for model, found in preferences.items():
        for p in found:
            row = np.zeros(len(models) + len(instructions))
            row[m_index[model]] = 1.0
            row[i_index[p.instruction_id]] = 1.0
            rows.append(row)
            targets.append(p.preference)
    x = np.vstack(rows + rows)
    p = np.array(targets)
    y = np.concatenate([np.ones(len(p)), np.zeros(len(p))])
    fitted = LogisticRegression(C=c, fit_intercept=False, max_iter=1000).fit(
        x, y, sample_weight=np.concatenate([p, 1 - p])
    )
    return {name: float(fitted.coef_[0][i_index[name]]) for name in instructions}


# --- the leaderboard ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardRow:
    judge: str
    model: str
    battles: int
    wins: int
    losses: int
    ties: int
    win_rate: Estimate  # against every opponent, ties as half
    rating: float  # Bradley-Terry
    rating_low: float
    rating_high: float
    lc_win_rate: float | None  # against the baseline, when one is given
    lc_low: float | None
    lc_high: float | None


def drop_sparse(battles: Sequence[Battle], min_battles: int) -> list[Battle]:
    """The battles left once every model with fewer than `min_battles` battles is removed (again
    until none is left: removing one can leave another short). A model with one or two battles,
    all won, has no finite maximum-likelihood rating, and its runaway rating shifts the others'."""
    kept = list(battles)
    while True:
        played: dict[str, int] = {}
        for battle in kept:
            for model in (battle.model_a, battle.model_b):
                played[model] = played.get(model, 0) + 1
        sparse = {model for model, count in played.items() if count < min_battles}
        if not sparse:
            return kept
        kept = [b for b in kept if b.model_a not in sparse and b.model_b not in sparse]


def leaderboard(
    battles: Sequence[Battle],
    baseline: str | None = None,
    length: Callable[[Battle, str], int] | None = None,
    rounds: int = BOOTSTRAP_ROUNDS,
    lc_rounds: int = 0,
    seed: int = SEED,
    min_battles: int = 1,
) -> list[LeaderboardRow]:
    """One judge's leaderboard from its battles: each model's win rate over all its battles with
    its interval, its Bradley-Terry rating with its interval, and (given a baseline and the
    answers' lengths) its length-controlled win rate against the baseline; by rating. Models with
    fewer than `min_battles` battles are left out (`drop_sparse`)."""
    battles = drop_sparse(battles, min_battles)
    judges = {b.judge for b in battles}
    if len(judges) != 1:
        raise ValueError(f"a leaderboard is one judge's, got {sorted(judges)}")
    judge = judges.pop()
    rates = {row.model: row for row in win_rates(battles, rounds=rounds, seed=seed)}
    rows = []
    for rating in bradley_terry(battles, rounds, seed):
        lc = None
        if baseline is not None and length is not None and rating.model != baseline:
            found = preferences_against(battles, rating.model, baseline, length)
            lc = (
                length_controlled_win_rate(rating.model, baseline, found, rounds=lc_rounds, seed=seed)
                if found
                else None
            )
        rate = rates[rating.model]
        rows.append(
            LeaderboardRow(
                judge,
                rating.model,
                rate.battles,
                rate.wins,
                rate.losses,
                rate.ties,
                rate.win_rate,
                rating.rating,
                rating.low,
                rating.high,
                lc.lc_win_rate if lc else None,
                lc.lc_low if lc else None,
                lc.lc_high if lc else None,
            )
        )
    return rows


def leaderboards(
    battles: Sequence[Battle],
    baseline: str | None = None,
    length: Callable[[Battle, str], int] | None = None,
    rounds: int = BOOTSTRAP_ROUNDS,
    min_battles: int = 1,
    seed: int = SEED,
) -> list[LeaderboardRow]:
    """Each judge's `leaderboard` (judges by name); a judge left with no battles once sparse models
    are removed has none."""
    by_judge: dict[str, list[Battle]] = {}
    for battle in battles:
        by_judge.setdefault(battle.judge, []).append(battle)
    rows = []
    for judge in sorted(by_judge):
        if drop_sparse(by_judge[judge], min_battles):
            rows += leaderboard(by_judge[judge], baseline, length, rounds, seed=seed, min_battles=min_battles)
    return rows
