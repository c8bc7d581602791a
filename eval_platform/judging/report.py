"""The judge-against-human report on the shipped sets (`speed/judge_agreement.py` prints it, and
docs/judging.md shows it): every recorded judge on every human-labelled set, the humans' own
agreement, the figures the LLMBar and PandaLM authors publish beside ours, and the leaderboard the
MT-Bench human experts' verdicts give the models they judged.

The published figures, and where they are:
- LLMBar (Zeng et al., 2023): GPT-4's average accuracy over the two orders (Acc.) and positional
  agreement rate (Agr.) per set. The repository keeps the paper's results as
  `Dataset/LLMBar/<set>/evaluators/GPT-4/<strategy>/statistics.json` ("correct_average" is Acc.,
  "equal" is Agr., its README says); read at princeton-nlp/LLMBar @caa7bee7. The repository's
  `Vanilla` strategy, whose verdicts are shipped, is the paper's Vanilla* (Vanilla + Rules); the
  paper's Vanilla is the repository's `Vanilla_NoRules`, whose verdicts are not shipped.
- PandaLM (Wang et al., 2023): the README's "ChatGPT VS PandaLM" table (WeOpenML/PandaLM @6fdac72,
  2023-06-09; later replaced by a pointer to the paper): accuracy and macro precision, recall and F1
  against the annotators' majority, for the two judges whose verdicts are shipped; the README's
  annotators' Cohen's kappas and label distribution; and the paper's abstract, which gives
  PandaLM-7B's F1 as 93.75% of GPT-3.5's and 88.28% of GPT-4's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from eval_platform.common.intervals import BOOTSTRAP_ROUNDS, SEED, Estimate, proportion
from eval_platform.judging.agreement import (
    JudgeAgreement,
    agreement_table,
    classification_scores,
    human_ceiling,
    pairwise_cohen_kappas,
)
from eval_platform.judging.datasets import (
    DATA_JUDGING,
    GPT4_LLMBAR_JUDGE,
    GPT35_PANDALM_JUDGE,
    LLMBAR_SETS,
    MT_BENCH_HUMAN_SET,
    PANDALM7B_JUDGE,
    PANDALM_SET,
    shipped_human_sets,
    shipped_recorded_verdicts,
)
from eval_platform.judging.ratings import LeaderboardRow, battles_from_labels, leaderboard
from eval_platform.judging.records import HumanSet, JudgeVerdict

LLMBAR_SOURCE = "LLMBar (Zeng et al. 2023), GPT-4; the repository's statistics.json (princeton-nlp/LLMBar @caa7bee7)"
# set -> (average accuracy %, positional agreement %), as statistics.json holds them.
LLMBAR_PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {
    "Vanilla*": {  # the repository's GPT-4/Vanilla: the shipped verdicts
        "llmbar_natural": (95.5, 95.0),
        "llmbar_neighbor": (78.73134328358209, 93.28358208955224),
        "llmbar_gptinst": (86.41304347826086, 94.56521739130434),
        "llmbar_gptout": (77.6595744680851, 93.61702127659575),
        "llmbar_manual": (80.43478260869566, 82.6086956521739),
    },
    "Vanilla": {  # the repository's GPT-4/Vanilla_NoRules: verdicts not shipped
        "llmbar_natural": (93.5, 97.0),
        "llmbar_neighbor": (64.17910447761194, 89.55223880597015),
        "llmbar_gptinst": (76.63043478260869, 90.21739130434783),
        "llmbar_gptout": (76.59574468085107, 87.2340425531915),
        "llmbar_manual": (75.0, 89.13043478260869),
    },
}
PANDALM_README_SOURCE = "PandaLM README (WeOpenML/PandaLM @6fdac72, 2023-06-09), against the annotators' majority"
# judge -> (accuracy, macro precision, macro recall, macro F1), in percent.
PANDALM_README: dict[str, tuple[float, float, float, float]] = {
    GPT35_PANDALM_JUDGE: (71.07, 58.79, 57.36, 57.55),
    PANDALM7B_JUDGE: (66.77, 57.38, 57.50, 57.43),
}
PANDALM_README_KAPPAS = {(0, 1): 0.85, (0, 2): 0.88, (1, 2): 0.86}  # annotators #1-#2, #1-#3, #2-#3
PANDALM_README_LABELS = {"tie": 105, "a": 422, "b": 472}
PANDALM_PAPER_F1_RATIO = 93.75  # PandaLM-7B's F1 as a share of GPT-3.5's (the paper's abstract)
LABEL_NAMES = ("a", "b", "tie")


@dataclass(frozen=True)
class PublishedFigure:
    source: str
    judge: str
    set_name: str
    metric: str
    published: float
    ours: float
    how: str  # how ours is computed, where it takes a convention to match

    @property
    def matches(self) -> bool:
        return abs(self.published - self.ours) < 0.005 + 1e-9 * abs(self.published)


@dataclass(frozen=True)
class HumanSetSummary:
    set_name: str
    description: str
    items: int
    labelled: int  # items with a gold label (a majority)
    labels_per_item: int
    tie_policy: str
    fleiss: Estimate
    pairwise_cohen: dict[tuple[int, int], float]
    human_first_wins: Estimate  # decisive labels for answer a (the first in the set's order)
    human_longer_wins: Estimate


@dataclass(frozen=True)
class ShippedReport:
    sets: list[HumanSetSummary]
    agreement: list[JudgeAgreement]
    figures: list[PublishedFigure]
    human_leaderboard: list[LeaderboardRow]  # the MT-Bench experts' majority verdicts as battles


def summarise_set(human_set: HumanSet, rounds: int = BOOTSTRAP_ROUNDS, seed: int = SEED) -> HumanSetSummary:
    sizes = [len(item.labels) for item in human_set.items]
    per_item = max(set(sizes), key=sizes.count) if sizes else 0
    labelled = [item for item in human_set.items if item.gold is not None]
    decisive = [item for item in labelled if item.gold in ("a", "b")]
    different = [item for item in decisive if item.longer != "tie"]
    ratings = [item.labels for item in human_set.items if len(item.labels) == per_item]
    return HumanSetSummary(
        set_name=human_set.name,
        description=human_set.description,
        items=len(human_set.items),
        labelled=len(labelled),
        labels_per_item=per_item or 1,
        tie_policy=human_set.tie_policy,
        fleiss=human_ceiling(human_set, rounds, seed),
        pairwise_cohen=pairwise_cohen_kappas(ratings) if per_item >= 2 else {},
        human_first_wins=proportion([float(i.gold == "a") for i in decisive], [1] * len(decisive), rounds, seed),
        human_longer_wins=proportion(
            [float(i.gold == i.longer) for i in different], [1] * len(different), rounds, seed
        ),
    )


def paper_figures(
    sets: Mapping[str, HumanSet], verdicts: Sequence[JudgeVerdict], agreement: Sequence[JudgeAgreement]
) -> list[PublishedFigure]:
    """Our figures beside the published ones, each computed as its source computes it."""
    figures = _llmbar_figures({(row.judge, row.set_name): row for row in agreement})
    pandalm = sets.get(PANDALM_SET)
    return figures if pandalm is None else figures + _pandalm_figures(pandalm, verdicts)


def _llmbar_figures(rows: Mapping[tuple[str, str], JudgeAgreement]) -> list[PublishedFigure]:
    """GPT-4's accuracy and positional agreement on each LLMBar set, beside the paper's (Vanilla*)."""
    figures = []
    for name in LLMBAR_SETS:
        row = rows.get((GPT4_LLMBAR_JUDGE, name))
        if row is None or row.accuracy.value is None or row.position_consistency.value is None:
            continue
        accuracy, positional = LLMBAR_PUBLISHED["Vanilla*"][name]
        how = "mean accuracy over the two orders; same verdict in both orders"
        figures += [
            PublishedFigure(
                LLMBAR_SOURCE, GPT4_LLMBAR_JUDGE, name, "Acc. (Vanilla*)", accuracy, row.accuracy.value * 100, how
            ),
            PublishedFigure(
                LLMBAR_SOURCE,
                GPT4_LLMBAR_JUDGE,
                name,
                "Agr. (Vanilla*)",
                positional,
                row.position_consistency.value * 100,
                how,
            ),
        ]
    return figures


def _pandalm_figures(pandalm: HumanSet, verdicts: Sequence[JudgeVerdict]) -> list[PublishedFigure]:
    """The judges' scores against PandaLM's majority labels, the annotators' kappas, the label counts
    and the paper's F1 ratio, beside PandaLM's README and paper."""
    figures, scores = [], {}
    for judge, published in PANDALM_README.items():
        found = [v for v in verdicts if v.judge == judge and v.set_name == PANDALM_SET]
        if not found:
            continue
        # PandaLM's README counted GPT-3.5's unparsed answers ("garbage") as ties; so does this row.
        pairs = [
            ("tie" if v.verdict == "unparsed" else v.verdict, pandalm.by_id[v.item_id].gold)
            for v in found
            if pandalm.by_id[v.item_id].gold is not None
        ]
        scores[judge] = ours = classification_scores(pairs, LABEL_NAMES)  # type: ignore[arg-type]
        how = "against the majority; unparsed counted as a tie; macro over 1, 2, tie"
        for metric, value, mine in zip(
            ("accuracy", "precision", "recall", "F1"),
            published,
            (ours.accuracy, ours.precision, ours.recall, ours.f1),
            strict=True,
        ):
            figures.append(PublishedFigure(PANDALM_README_SOURCE, judge, PANDALM_SET, metric, value, mine * 100, how))
    kappas = pairwise_cohen_kappas([item.labels for item in pandalm.items])
    for (i, j), published in PANDALM_README_KAPPAS.items():
        figures.append(
            PublishedFigure(
                PANDALM_README_SOURCE,
                f"annotator {i + 1} vs {j + 1}",
                PANDALM_SET,
                "Cohen's kappa",
                published,
                round(kappas[(i, j)], 2),
                "rounded to 2 places as published",
            )
        )
    for label, published in PANDALM_README_LABELS.items():
        count = sum(item.gold == label for item in pandalm.items)
        figures.append(
            PublishedFigure(
                PANDALM_README_SOURCE, "majority label", PANDALM_SET, f"items labelled {label}", published, count, ""
            )
        )
    if GPT35_PANDALM_JUDGE in scores and PANDALM7B_JUDGE in scores:
        figures.append(
            PublishedFigure(
                "PandaLM paper (arXiv:2306.05087), abstract",
                PANDALM7B_JUDGE,
                PANDALM_SET,
                "F1 as % of GPT-3.5's",
                PANDALM_PAPER_F1_RATIO,
                scores[PANDALM7B_JUDGE].f1 / scores[GPT35_PANDALM_JUDGE].f1 * 100,
                "the released verdicts' F1s (README convention)",
            )
        )
    return figures


def shipped_report(
    root: Path = DATA_JUDGING,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    more_verdicts: Sequence[JudgeVerdict] = (),
) -> ShippedReport:
    """The report on the shipped sets: the recorded judges, and any other judge's verdicts on them."""
    sets = shipped_human_sets(root)
    verdicts = shipped_recorded_verdicts(sets, root)
    agreement = agreement_table(sets, [*verdicts, *more_verdicts], rounds, seed)
    battles = battles_from_labels(sets[MT_BENCH_HUMAN_SET], judge="human experts (majority)")
    return ShippedReport(
        sets=[summarise_set(human_set, rounds, seed) for human_set in sets.values()],
        agreement=agreement,
        figures=paper_figures(sets, verdicts, agreement),
        human_leaderboard=leaderboard(battles, rounds=rounds, seed=seed, min_battles=5),
    )


# --- Markdown -----------------------------------------------------------------------------------


def percent(e: Estimate) -> str:
    if e.value is None:
        return "-"
    interval = f" [{e.low * 100:.1f}, {e.high * 100:.1f}]" if e.low is not None and e.high is not None else ""
    return f"{e.value * 100:.1f}{interval}"


def kappa(e: Estimate) -> str:
    if e.value is None:
        return "-"
    interval = f" [{e.low:.2f}, {e.high:.2f}]" if e.low is not None and e.high is not None else ""
    return f"{e.value:.3f}{interval}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def agreement_markdown(rows: Sequence[JudgeAgreement]) -> str:
    return table(
        [
            "judge",
            "set",
            "items",
            "verdicts",
            "unparsed",
            "accuracy %",
            "Cohen's κ",
            "humans' Fleiss κ",
            "same verdict both orders %",
            "first shown wins % (humans)",
            "longer wins % (humans)",
        ],
        [
            [
                row.judge,
                row.set_name,
                str(row.items),
                str(row.verdicts),
                str(row.unparsed),
                percent(row.accuracy),
                kappa(row.kappa),
                kappa(row.human_kappa),
                percent(row.position_consistency),
                f"{percent(row.first_wins)} ({percent(replace(row.human_first_wins, low=None, high=None))})",
                f"{percent(row.longer_wins)} ({percent(replace(row.human_longer_wins, low=None, high=None))})",
            ]
            for row in rows
        ],
    )


def sets_markdown(rows: Sequence[HumanSetSummary]) -> str:
    return table(
        [
            "set",
            "items",
            "with a label",
            "labels per item",
            "ties",
            "humans' Fleiss κ",
            "annotators' Cohen κ",
            "answer a picked %",
            "longer picked %",
        ],
        [
            [
                row.set_name,
                str(row.items),
                str(row.labelled),
                str(row.labels_per_item),
                row.tie_policy,
                kappa(row.fleiss),
                ", ".join(f"#{i + 1}-#{j + 1} {k:.3f}" for (i, j), k in row.pairwise_cohen.items()) or "-",
                percent(row.human_first_wins),
                percent(row.human_longer_wins),
            ]
            for row in rows
        ],
    )


def figures_markdown(rows: Sequence[PublishedFigure]) -> str:
    return table(
        ["source", "judge", "set", "figure", "published", "ours", "same"],
        [
            [
                row.source.split(" (")[0],
                row.judge,
                row.set_name,
                row.metric,
                f"{row.published:g}",
                f"{row.ours:.2f}".rstrip("0").rstrip("."),
                "yes" if row.matches else "no",
            ]
            for row in rows
        ],
    )


def leaderboard_markdown(rows: Sequence[LeaderboardRow]) -> str:
    return table(
        ["model", "battles", "won", "lost", "tied", "win rate % [95%]", "Bradley-Terry [95%]"],
        [
            [
                row.model,
                str(row.battles),
                str(row.wins),
                str(row.losses),
                str(row.ties),
                percent(row.win_rate),
                f"{row.rating:.0f} [{row.rating_low:.0f}, {row.rating_high:.0f}]",
            ]
            for row in rows
        ],
    )


def render(report: ShippedReport) -> str:
    return "\n\n".join(
        [
            "## Judges against humans",
            agreement_markdown(report.agreement),
            "## The human-labelled sets",
            sets_markdown(report.sets),
            "## Beside the published figures",
            figures_markdown(report.figures),
            "## MT-Bench: the human experts' verdicts as a leaderboard (LLMBar's 200 pairs, models named)",
            leaderboard_markdown(report.human_leaderboard),
        ]
    )
