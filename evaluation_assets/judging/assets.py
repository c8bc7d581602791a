"""Pairwise judging: the sets (the shipped human-labelled ones, every blind-evaluation sheet's, two
roster models' generations) and the verdicts recorded elsewhere -> a panel's verdicts on the sets,
each pair in both orders -> every judge's agreement with the humans; MT-Bench's questions and eight
models' answers -> a panel's verdicts on its model pairs (and its single-answer grades) -> the
MT-Bench leaderboard."""

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from eval_platform.common.keeping import Keeping, KeptProgress
from eval_platform.common.warehouse import utc_now
from eval_platform.environment import environment
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_evaluation
from eval_platform.evaluation_assets.blind.assets import blind_eval_answers, blind_eval_questions, blind_eval_scores
from eval_platform.evaluation_assets.configs import config_class
from eval_platform.evaluation_assets.metadata import markdown_table
from eval_platform.judging.agreement import agreement_table, metric_rows
from eval_platform.judging.datasets import (
    HUMAN_EXPERTS_JUDGE,
    MT_BENCH_HUMAN_SET,
    blind_human_set,
    blind_set_name,
    generation_set,
    matching_sets,
    parse_generation_pair,
    shipped_human_sets,
    shipped_judge_prompts,
    shipped_mt_bench,
    shipped_recorded_verdicts,
)
from eval_platform.judging.grading import mean_grades, mt_bench_grade_tasks, panel_grades
from eval_platform.judging.pairwise import (
    MT_BENCH_SET,
    PairTask,
    chosen_models,
    chosen_questions,
    item_task,
    judge_kept,
    mt_bench_answer_length,
    mt_bench_pairs,
    mt_bench_tasks,
    reusable,
)
from eval_platform.judging.ratings import LeaderboardRow, battles_from_labels, battles_from_verdicts, leaderboards
from eval_platform.judging.records import JudgeVerdict
from eval_platform.judging.report import agreement_markdown, percent
from eval_platform.judging.settings import (
    AgreementSettings,
    GradingSettings,
    JudgingSetsSettings,
    LeaderboardSettings,
    MTBenchSettings,
    PanelSettings,
    ShippedData,
)
from eval_platform.judging.store import JudgingStore
from eval_platform.resources import WAREHOUSE_POOL, LanguageModelResource, ModelGatewayResource, WarehouseResource
from eval_platform.viewer.links import judging_link

HUMAN_BOARD_MIN_BATTLES = 5  # the experts judged one vicuna-13b answer that is the shipped v1.3's: no rating


class ShippedDataConfig(config_class(ShippedData)):
    """Where the shipped judging data is."""


class JudgingSetsConfig(config_class(JudgingSetsSettings)):
    """Which pairwise sets are stored."""


class PanelConfig(config_class(PanelSettings)):
    """The panel, and the stored sets it judges in both orders."""


class MTBenchConfig(config_class(MTBenchSettings)):
    """The panel, and the MT-Bench pairs it judges."""


class GradingConfig(config_class(GradingSettings)):
    """The graders, and the MT-Bench answers they grade."""


class AgreementConfig(config_class(AgreementSettings)):
    """The agreement intervals."""


class LeaderboardConfig(config_class(LeaderboardSettings)):
    """The leaderboards' intervals and baseline."""


def verdict_summary(verdicts: Sequence[JudgeVerdict]) -> MetadataValue:
    """Per judge and set: pairs, verdicts of each kind, pairs with the same verdict in both orders,
    cost, and a sampled judge's self-consistency (the mean share of its samples giving its verdict)."""
    frame = pd.DataFrame([{**v.__dict__, "self_consistency": v.self_consistency} for v in verdicts])
    if not len(frame):
        return MetadataValue.md("_no verdicts_")
    pairs = frame.groupby(["judge", "set_name", "item_id", "turn"])["verdict"].agg(
        lambda v: len(v) == 2 and v.nunique() == 1 and "unparsed" not in set(v)
    )
    rows = pd.crosstab([frame["judge"], frame["set_name"]], frame["verdict"]).assign(
        pairs=pairs.groupby(level=["judge", "set_name"]).size(),
        same_both_orders=pairs.groupby(level=["judge", "set_name"]).sum(),
        cost_usd=frame.groupby(["judge", "set_name"])["cost_usd"].sum(min_count=1),
    )
    if frame["self_consistency"].notna().any():  # a sampled judge's
        rows = rows.assign(self_consistency=frame.groupby(["judge", "set_name"])["self_consistency"].mean())
    return markdown_table(rows.reset_index())


def leaderboard_frame(rows: Sequence[LeaderboardRow]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "judge": row.judge,
                "model": row.model,
                "battles": row.battles,
                "won/lost/tied": f"{row.wins}/{row.losses}/{row.ties}",
                "win rate % [95%]": percent(row.win_rate),
                "Bradley-Terry [95%]": f"{row.rating:.0f} [{row.rating_low:.0f}, {row.rating_high:.0f}]",
                "length-controlled %": None if row.lc_win_rate is None else round(row.lc_win_rate, 1),
            }
            for row in rows
        ]
    )


def verdicts_result(verdicts: Sequence[JudgeVerdict]) -> MaterializeResult:
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(verdicts),
            "verdicts": verdict_summary(verdicts),
            "examples": verdict_examples(verdicts),
        }
    )


def verdict_examples(verdicts: Sequence[JudgeVerdict], count: int = 4) -> MetadataValue:
    """The first few verdicts with their raw text (shortened), shown as text."""
    frame = pd.DataFrame(
        [
            {
                "judge": v.judge,
                "set": v.set_name,
                "item": v.item_id,
                "turn": v.turn,
                "shown": v.order,
                "verdict": v.verdict,
                "raw": v.error or v.raw,
            }
            for v in verdicts[:count]
        ]
    )
    return markdown_table(frame)


def judged(
    context: AssetExecutionContext,
    tasks: Sequence[PairTask],
    settings: PanelSettings | MTBenchSettings,
    stored: Mapping[str, JudgeVerdict],
    keep: Callable[[Sequence[tuple[str, JudgeVerdict]]], None],
    gateway: ModelGatewayResource,
    evaluation_model: LanguageModelResource,
) -> list[JudgeVerdict]:
    """Every task judged in both orders by every judge (opened as any model is, API calls through
    the gateway): a verdict stored for the same request (`stored`, by request key) is reused, the
    others are asked and kept (`keep`) in chunks of the environment's size (EVAL_ANSWER_CHUNK
    verdicts or EVAL_ANSWER_CHUNK_S seconds) as they come, each chunk logged."""
    sizes = environment()

    def report(progress: KeptProgress) -> None:
        context.log.info(
            f"chunk {progress.chunks} kept, {progress.stored:,} of {progress.needed:,} verdicts stored "
            f"({progress.computed:,} asked, {progress.rate:.1f}/s)"
        )

    keeping: Keeping[JudgeVerdict] = Keeping(
        reusable(stored), keep, report, sizes.answer_chunk, sizes.answer_chunk_s, evaluation_model.batch_size
    )
    client, verdicts = gateway.gateway(), []
    for judge in settings.judges:
        model = evaluation_model.open(judge, client)
        verdicts += judge_kept(
            judge,
            model,
            tasks,
            keeping,
            settings.mode,
            settings.max_tokens,
            batch_size=evaluation_model.batch_size,
            sampling=settings.judge_sampling,
            samples=settings.judge_samples,
        )
    context.log.info(f"{keeping.reused:,} verdicts reused, {keeping.computed:,} asked")
    return verdicts


@asset(
    group_name="judging_inputs",
    deps=[blind_eval_scores, blind_eval_answers, blind_eval_questions, benchmark_evaluation],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
)
def judging_sets(config: JudgingSetsConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """The pairwise sets: LLMBar's five and PandaLM's test set and LLMBar's MT-Bench human pairs
    (each with its human labels and how it counts ties), every tallied blind-evaluation sheet (its
    raters' winners as labels), and the configured pairs of roster models' generated answers on a
    benchmark (unlabelled). Each replaces the stored set of its name."""
    settings = JudgingSetsSettings(**config.model_dump())
    pairs = [parse_generation_pair(pair) for pair in settings.generations]
    with warehouse.store(JudgingStore) as store:
        ratings = store.load_blind_ratings() if settings.blind_sheets else []
        generated = [(pair, store.load_generated_answers(pair[0], pair[1:])) for pair in pairs]
    sheets = sorted({rating.sheet_id for rating in ratings})
    sets = [
        *shipped_human_sets(Path(settings.folder)).values(),
        *(blind_human_set([r for r in ratings if r.sheet_id == sheet], blind_set_name(sheet)) for sheet in sheets),
        *(generation_set(*pair, answers) for pair, answers in generated),
    ]
    with warehouse.store(JudgingStore) as store:
        store.replace_judging_sets(sets, utc_now())
    described = pd.DataFrame(
        [
            {
                "set": s.name,
                "kind": s.kind,
                "items": len(s.items),
                "labelled": sum(item.gold is not None for item in s.items),
                "ties": s.tie_policy,
            }
            for s in sets
        ]
    )
    return MaterializeResult(
        metadata={"dagster/row_count": sum(len(s.items) for s in sets), "sets": markdown_table(described)}
    )


@asset(group_name="judging_inputs", deps=[judging_sets], kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def recorded_verdicts(config: ShippedDataConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """Verdicts recorded elsewhere, each a judge of its own: GPT-4's on LLMBar's five sets (both
    orders, LLMBar's Vanilla*), GPT-3.5-turbo's and PandaLM-7B's on PandaLM's test set (one order),
    checked against the stored sets' items."""
    with warehouse.store(JudgingStore) as store:
        sets = store.load_judging_sets()
    verdicts = shipped_recorded_verdicts(sets, Path(ShippedData(**config.model_dump()).folder))
    with warehouse.store(JudgingStore) as store:
        store.replace_recorded_verdicts(verdicts, utc_now())
    return verdicts_result(verdicts)


@asset(group_name="judging_inputs", kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def mt_bench_inputs(config: ShippedDataConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """MT-Bench's 80 two-turn questions (GPT-4's reference answers for math, reasoning and coding)
    and eight models' answers to both turns."""
    questions, answers = shipped_mt_bench(Path(ShippedData(**config.model_dump()).folder))
    with warehouse.store(JudgingStore) as store:
        store.replace_mt_bench_inputs(questions, answers)
    return MaterializeResult(
        metadata={
            "dagster/row_count": sum(len(by_question) for by_question in answers.values()),
            "questions": len(questions),
            "categories": MetadataValue.json(dict(Counter(q.category for q in questions))),
            "models": MetadataValue.json(sorted(answers)),
        }
    )


@asset(group_name="judging", deps=[judging_sets], kinds={"litellm", "duckdb"}, pool=WAREHOUSE_POOL)
def pairwise_verdicts(
    context: AssetExecutionContext,
    config: PanelConfig,
    warehouse: WarehouseResource,
    gateway: ModelGatewayResource,
    evaluation_model: LanguageModelResource,
) -> MaterializeResult:
    """The panel's verdicts on the chosen sets' first items, each pair in both orders (answer a
    shown first, then answer b), with MT-Bench's pair-v2 prompt: each verdict with the judge's raw
    text, the order it saw, its tokens and cost (a failed call: an unparsed verdict and its error).
    Kept as they come, in chunks (EVAL_ANSWER_CHUNK), each replacing the stored verdict of its judge,
    pair and order; a verdict stored for the same request (judge, prompt, pair and order) is reused
    unless `recompute`, so a killed run's rerun asks only what it had not kept."""
    settings = PanelSettings(**config.model_dump())
    with warehouse.store(JudgingStore) as store:
        sets = matching_sets(store.load_judging_sets(), settings.sets)
        stored = {} if settings.recompute else store.kept_judge_verdicts(settings.judges)
    prompts = shipped_judge_prompts()
    tasks = [item_task(item, prompts) for s in sets for item in s.items[: settings.items]]
    context.log.info(f"{len(tasks)} pairs of {', '.join(s.name for s in sets)}, by {', '.join(settings.judges)}")

    def keep(chunk: Sequence[tuple[str, JudgeVerdict]]) -> None:
        with warehouse.store(JudgingStore) as store:
            store.keep_judge_verdicts(chunk, utc_now())

    verdicts = judged(context, tasks, settings, stored, keep, gateway, evaluation_model)
    return verdicts_result(verdicts)


@asset(group_name="judging", deps=[mt_bench_inputs], kinds={"litellm", "duckdb"}, pool=WAREHOUSE_POOL)
def mt_bench_verdicts(
    context: AssetExecutionContext,
    config: MTBenchConfig,
    warehouse: WarehouseResource,
    gateway: ModelGatewayResource,
    evaluation_model: LanguageModelResource,
) -> MaterializeResult:
    """The panel's verdicts on MT-Bench's model pairs (every pair, or each model against the
    baseline), each in both orders, with the judge prompt FastChat picks for the question's category
    and turn (GPT-4's reference answer for math, reasoning and coding). Kept and reused as
    `pairwise_verdicts` keeps and reuses its own."""
    settings = MTBenchSettings(**config.model_dump())
    with warehouse.store(JudgingStore) as store:
        questions, answers = store.load_mt_bench_inputs()
        stored = {} if settings.recompute else store.kept_mt_bench_verdicts(settings.judges)
    models = chosen_models(answers, settings.models)
    pairs = mt_bench_pairs(models, settings.pairs, settings.baseline)  # type: ignore[arg-type]
    tasks = mt_bench_tasks(
        chosen_questions(questions, settings.questions), answers, pairs, shipped_judge_prompts(), settings.turns
    )
    context.log.info(f"{len(tasks)} MT-Bench pairs, by {', '.join(settings.judges)}")

    def keep(chunk: Sequence[tuple[str, JudgeVerdict]]) -> None:
        with warehouse.store(JudgingStore) as store:
            store.keep_mt_bench_verdicts(chunk, utc_now())

    verdicts = judged(context, tasks, settings, stored, keep, gateway, evaluation_model)
    return verdicts_result(verdicts)


@asset(group_name="mt_bench_grading", deps=[mt_bench_inputs], kinds={"litellm", "duckdb"}, pool=WAREHOUSE_POOL)
def mt_bench_grades(
    config: GradingConfig,
    warehouse: WarehouseResource,
    gateway: ModelGatewayResource,
    evaluation_model: LanguageModelResource,
) -> MaterializeResult:
    """MT-Bench's single-answer grading: each answer graded 1-10 by each judge with FastChat's
    single prompts (a judgment without a rating: no score, kept with its text). Replaces the stored
    grades of the answers it grades."""
    settings = GradingSettings(**config.model_dump())
    with warehouse.store(JudgingStore) as store:
        questions, answers = store.load_mt_bench_inputs()
    tasks = mt_bench_grade_tasks(
        chosen_questions(questions, settings.questions),
        answers,
        chosen_models(answers, settings.models),
        shipped_judge_prompts(),
        settings.turns,
    )
    client = gateway.gateway()
    grades = panel_grades(
        settings.judges, lambda judge: evaluation_model.open(judge, client), tasks, settings.max_tokens
    )
    with warehouse.store(JudgingStore) as store:
        store.save_judge_grades(grades, utc_now())
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(grades),
            "unrated": sum(g.score is None for g in grades),
            "mean_scores": markdown_table(mean_grades(grades)),
        }
    )


@asset(
    group_name="judging",
    deps=[judging_sets, recorded_verdicts, pairwise_verdicts],
    kinds={"duckdb"},
    pool=WAREHOUSE_POOL,
)
def judge_agreement(config: AgreementConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """Every judge (recorded, or a panel's) against the humans of every labelled set it judged:
    accuracy, Cohen's kappa beside the humans' own Fleiss' kappa, position consistency and bias,
    length bias beside the humans', each with its 95% interval. Replaces every stored figure."""
    settings = AgreementSettings(**config.model_dump())
    with warehouse.store(JudgingStore) as store:
        sets = store.load_judging_sets()
        verdicts = store.load_set_verdicts()
    labelled = {name: s for name, s in sets.items() if any(item.gold is not None for item in s.items)}
    rows = agreement_table(labelled, verdicts, settings.rounds)
    with warehouse.store(JudgingStore) as store:
        store.replace_judge_agreement(metric_rows(rows), utc_now())
    return MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "judge_vs_human": MetadataValue.md(
                agreement_markdown(rows[:100]) if rows else "_no verdicts on a labelled set_"
            ),
            "viewer": MetadataValue.url(judging_link(environment().viewer_base_url)),
        }
    )


@asset(
    group_name="judging",
    deps=[mt_bench_verdicts, mt_bench_inputs, judging_sets],
    kinds={"scipy", "duckdb"},
    pool=WAREHOUSE_POOL,
)
def mt_bench_leaderboard(config: LeaderboardConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """Each judge's MT-Bench leaderboard from its verdicts on the model pairs (a pair judged in both
    orders is one battle, as FastChat counts it): win rate with its interval, Bradley-Terry rating
    with its bootstrap interval, and AlpacaEval 2's length-controlled win rate against the baseline;
    and the human experts' leaderboard from their majority labels (LLMBar's MT-Bench pairs)."""
    settings = LeaderboardSettings(**config.model_dump())
    with warehouse.store(JudgingStore) as store:
        verdicts = store.load_mt_bench_verdicts()
        _, answers = store.load_mt_bench_inputs()
        human = store.load_judging_sets().get(MT_BENCH_HUMAN_SET)
    boards = {
        MT_BENCH_SET: leaderboards(
            battles_from_verdicts(verdicts),
            settings.lc_baseline,
            mt_bench_answer_length(answers),
            settings.rounds,
            settings.min_battles,
        )
    }
    if human is not None:
        boards[MT_BENCH_HUMAN_SET] = leaderboards(
            battles_from_labels(human, HUMAN_EXPERTS_JUDGE), rounds=settings.rounds, min_battles=HUMAN_BOARD_MIN_BATTLES
        )
    with warehouse.store(JudgingStore) as store:
        store.replace_judging_leaderboard(boards, settings.lc_baseline, utc_now())
    return MaterializeResult(
        metadata={
            "dagster/row_count": sum(len(rows) for rows in boards.values()),
            **{f"leaderboard_{set_name}": markdown_table(leaderboard_frame(rows)) for set_name, rows in boards.items()},
            "viewer": MetadataValue.url(judging_link(environment().viewer_base_url)),
        }
    )
