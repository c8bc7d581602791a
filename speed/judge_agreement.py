"""The judge-against-human table for the shipped sets, and MT-Bench leaderboards.

    python speed/judge_agreement.py                         # the tables of docs/judging.md
    python speed/judge_agreement.py --rounds 200            # fewer bootstrap rounds (faster, rougher intervals)
    python speed/judge_agreement.py --verdicts verdicts.jsonl --baseline gpt-3.5-turbo
    python speed/judge_agreement.py --judge local/smollm2-135m-instruct --judge-items 100 --save-verdicts v.jsonl

Offline, from `data/judging/` only (no model is called): every recorded judge (GPT-4 on LLMBar's
five sets under LLMBar's Vanilla*, GPT-3.5-turbo and PandaLM-7B on PandaLM's test set) on every
human-labelled set it judged, with accuracy, Cohen's kappa, the humans' Fleiss kappa, position
consistency and bias, and length bias, each with its 95% interval; the human-labelled sets
themselves; our figures beside the LLMBar and PandaLM authors' published ones; and the leaderboard
the MT-Bench human experts' majority verdicts give the models they judged.

`--judge` adds a model of the platform's (any name `open_model` takes; a small local model judges by
its next-letter probabilities) as a judge of the first `--judge-items` items of `--judge-sets`, both
orders, MT-Bench's pair-v2 prompt, and its rows to the table.

FastChat's recorded GPT-4 pairwise judgments of MT-Bench are not shipped, so the MT-Bench pairwise
leaderboard over the eight shipped models needs verdicts from a judge run here: `--verdicts` reads
them (one `JudgeVerdict` per line, as `write_verdicts_jsonl` writes them, e.g. from
`judge_pairs(...)` on `mt_bench_tasks(...)`) and prints each judge's leaderboard: win rate, Bradley-
Terry rating and, with `--baseline`, the length-controlled win rate against that model.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.common.intervals import BOOTSTRAP_ROUNDS  # noqa: E402
from eval_platform.judging.datasets import (  # noqa: E402
    DATA_JUDGING,
    read_verdicts_jsonl,
    shipped_human_sets,
    shipped_judge_prompts,
    shipped_mt_bench,
    write_verdicts_jsonl,
)
from eval_platform.judging.pairwise import item_task, judge_pairs, mt_bench_answer_length  # noqa: E402
from eval_platform.judging.ratings import battles_from_verdicts, leaderboard  # noqa: E402
from eval_platform.judging.records import JudgeVerdict  # noqa: E402
from eval_platform.judging.report import leaderboard_markdown, percent, render, shipped_report, table  # noqa: E402


def mt_bench_leaderboards(verdicts: list[JudgeVerdict], baseline: str | None, rounds: int, lc_rounds: int) -> str:
    """Each judge's MT-Bench leaderboard from its stored pairwise verdicts."""
    _, answers = shipped_mt_bench()
    length = mt_bench_answer_length(answers)

    parts = []
    for judge in sorted({v.judge for v in verdicts if v.set_name == "mt_bench"}):
        battles = battles_from_verdicts([v for v in verdicts if v.judge == judge and v.set_name == "mt_bench"])
        rows = leaderboard(battles, baseline, length if baseline else None, rounds, lc_rounds)
        parts.append(f"## MT-Bench pairwise leaderboard, judged by {judge}")
        parts.append(leaderboard_markdown(rows))
        if baseline:
            parts.append(
                table(
                    ["model", f"length-controlled win rate vs {baseline} %"],
                    [
                        [
                            row.model,
                            f"{row.lc_win_rate:.1f}"
                            + (f" [{row.lc_low:.1f}, {row.lc_high:.1f}]" if row.lc_low else ""),
                        ]
                        for row in rows
                        if row.lc_win_rate is not None
                    ],
                )
            )
        parts.append(
            f"win rate over {len(battles)} battles: {', '.join(f'{r.model} {percent(r.win_rate)}' for r in rows)}"
        )
    return "\n\n".join(parts)


def judge_shipped_sets(model_name: str, root: Path, set_names: list[str], items: int) -> list[JudgeVerdict]:
    """A model's verdicts, both orders, on the first `items` items of each named human-labelled set."""
    from eval_platform.common.models import open_model

    sets = shipped_human_sets(root)
    prompts = shipped_judge_prompts(root)
    tasks = [item_task(item, prompts) for name in set_names for item in sets[name].items[:items]]
    return asyncio.run(judge_pairs(model_name, open_model(model_name), tasks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA_JUDGING, help="the judging data (default data/judging)")
    parser.add_argument("--rounds", type=int, default=BOOTSTRAP_ROUNDS, help="bootstrap rounds for the intervals")
    parser.add_argument("--verdicts", type=Path, help="stored MT-Bench pairwise verdicts (JSONL) for the leaderboard")
    parser.add_argument("--baseline", help="the model the length-controlled win rate is against")
    parser.add_argument("--lc-rounds", type=int, default=0, help="bootstrap rounds for the length-controlled interval")
    parser.add_argument("--judge", help="also judge with this model (e.g. local/smollm2-135m-instruct)")
    parser.add_argument("--judge-sets", nargs="+", default=["llmbar_natural"], help="the sets it judges")
    parser.add_argument("--judge-items", type=int, default=20, help="the first N items of each set")
    parser.add_argument("--save-verdicts", type=Path, help="write the judge's verdicts here (JSONL)")
    args = parser.parse_args()
    start = time.perf_counter()
    more = judge_shipped_sets(args.judge, args.data, args.judge_sets, args.judge_items) if args.judge else []
    if more and args.save_verdicts:
        write_verdicts_jsonl(more, args.save_verdicts)
    print(render(shipped_report(args.data, args.rounds, more_verdicts=more)))
    if args.verdicts:
        print()
        print(mt_bench_leaderboards(read_verdicts_jsonl(args.verdicts), args.baseline, args.rounds, args.lc_rounds))
    else:
        print(
            "\nNo MT-Bench pairwise verdicts given (FastChat's recorded GPT-4 judgments are not shipped): "
            "run a judge with judge_pairs(mt_bench_tasks(...)) and pass its verdicts with --verdicts."
        )
    print(f"\n({args.rounds} bootstrap rounds; {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
