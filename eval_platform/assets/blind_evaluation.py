"""Blind human evaluation: questions and answers -> scoring sheet and key -> filled sheets -> tally."""

import asyncio
from pathlib import Path

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from eval_platform.core import blind
from eval_platform.core.gateway import chat
from eval_platform.core.models import open_model
from eval_platform.resources import BLIND_EVAL_DIR, WAREHOUSE_POOL, ModelGatewayResource, WarehouseResource
from eval_platform.stores import BlindStore
from eval_platform.stores.warehouse import utc_now

SHEET_FILE, KEY_FILE, RUBRIC_FILE = "blind_evaluation_scoring_sheet.xlsx", "blind_evaluation_answer_key.xlsx", "rubric.json"


class BlindFilesConfig(Config):
    folder: str = Field(default=str(BLIND_EVAL_DIR),
                        description="Folder with questions, answers/, rubric.json, issued/, filled/.")


class AnsweringSystem(Config):
    name: str
    model: str = Field(description="Gateway model string, e.g. anthropic/claude-3-5-sonnet-20241022.")
    system_prompt: str | None = None
    reference_files: list[str] = Field(default=[], description="Text files placed in the system's context.")


class BlindAnswersConfig(BlindFilesConfig):
    systems: list[AnsweringSystem] = Field(
        default=[], description="Two systems that answer through the gateway; empty: read answers/<system>.csv|jsonl|xlsx.")


def _questions_file(folder: Path) -> Path:
    for suffix in (".csv", ".jsonl", ".xlsx"):
        if (folder / f"questions{suffix}").exists():
            return folder / f"questions{suffix}"
    raise blind.BlindEvaluationInputError(f"{folder}: no questions.csv, questions.jsonl or questions.xlsx")


@asset(group_name="blind_evaluation", kinds={"duckdb"}, pool=WAREHOUSE_POOL)
def blind_eval_questions(config: BlindFilesConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """The question set: Question_ID, Question, Ground_Truth."""
    frame = blind.read_table(_questions_file(Path(config.folder)), ["Question_ID", "Question", "Ground_Truth"])
    with warehouse.store(BlindStore) as store:
        store.replace_questions(frame)
    return MaterializeResult(metadata={"dagster/row_count": len(frame),
                                       "preview": MetadataValue.md(frame.head(5).to_markdown(index=False))})


async def _generate_answers(gateway, systems: list[AnsweringSystem], questions: list[dict]) -> list[dict]:
    async def answer(system: AnsweringSystem, question: dict) -> dict:
        references = "\n\n".join(Path(p).read_text(encoding="utf-8") for p in system.reference_files)
        user = (f"Reference documents:\n{references}\n\nQuestion: " if references else "") + question["Question"]
        completion = await gateway.acomplete(system.model, chat(system.system_prompt, user), max_tokens=400)
        return {"system": system.name, "Question_ID": question["Question_ID"], "answer": completion.text.strip(),
                "source": system.model}

    return list(await asyncio.gather(*(answer(s, q) for s in systems for q in questions)))


@asset(group_name="blind_evaluation", deps=[blind_eval_questions], kinds={"litellm", "duckdb"}, pool=WAREHOUSE_POOL)
def blind_eval_answers(config: BlindAnswersConfig, warehouse: WarehouseResource,
                       gateway: ModelGatewayResource) -> MaterializeResult:
    """Each system's answer to each question, from answers/ files or generated through the gateway."""
    with warehouse.store(BlindStore) as store:
        questions = store.load_questions().to_dict("records")
    if config.systems:
        rows = asyncio.run(_generate_answers(gateway.gateway(), config.systems, questions))
    else:
        rows = []
        for path in sorted((Path(config.folder) / "answers").glob("*.*")):
            table = blind.read_table(path, ["Question_ID", "Answer"])
            rows += [{"system": path.stem, "Question_ID": r["Question_ID"], "answer": r["Answer"], "source": str(path)}
                     for r in table.to_dict("records")]
    frame = pd.DataFrame(rows, columns=["system", "Question_ID", "answer", "source"])
    with warehouse.store(BlindStore) as store:
        store.replace_answers(frame)
    return MaterializeResult(metadata={"dagster/row_count": len(frame),
                                       "systems": MetadataValue.json(sorted(frame["system"].unique().tolist()))})


class BlindSheetConfig(BlindFilesConfig):
    seed: int = Field(default=20240601, description="Draws which system is A per question; recorded in the key.")


@asset(group_name="blind_evaluation", deps=[blind_eval_questions, blind_eval_answers], kinds={"excel", "duckdb"},
       pool=WAREHOUSE_POOL)
def blind_eval_sheet(config: BlindSheetConfig, warehouse: WarehouseResource) -> MaterializeResult:
    """The blind scoring sheet for raters and the separate answer key, in issued/."""
    with warehouse.store(BlindStore) as store:
        questions = store.load_questions()
        answers = store.load_answers()
    systems = sorted(answers)
    sides = blind.assign_sides(questions["Question_ID"].tolist(), systems, config.seed)
    rows = blind.issued_rows(questions, answers, sides)
    sheet_id = blind.sheet_id_for(rows, config.seed)
    issued = Path(config.folder) / "issued"
    rubric = blind.Rubric.from_file(Path(config.folder) / RUBRIC_FILE)
    sheet_path = blind.write_scoring_sheet(issued / SHEET_FILE, rows, rubric)
    key_path = blind.write_answer_key(issued / KEY_FILE, rows, sides, config.seed, sheet_id)
    issue = pd.DataFrame([{"sheet_id": sheet_id, "seed": config.seed, "systems": systems, "sheet_path": str(sheet_path),
                           "key_path": str(key_path), "issued_at": utc_now()}])
    key = pd.DataFrame([{"sheet_id": sheet_id, "Question_ID": q, "system_a": a, "system_b": b}
                        for q, (a, b) in sides.items()])
    with warehouse.store(BlindStore) as store:
        store.save_issue(sheet_id, issue, key)
    preview = pd.DataFrame(rows)[["Question_ID", "Question", "Answer_A", "Answer_B"]]
    return MaterializeResult(metadata={
        "sheet_id": sheet_id, "scoring_sheet": MetadataValue.path(str(sheet_path)),
        "answer_key": MetadataValue.path(str(key_path)), "dagster/row_count": len(rows),
        "preview": MetadataValue.md(preview.map(lambda t: str(t)[:80]).to_markdown(index=False)),
    })


class LlmRaterConfig(BlindFilesConfig):
    model: str = Field(default="local/smollm2-135m-instruct", description="Gateway model string of the LLM rater.")


@asset(group_name="blind_evaluation", deps=[blind_eval_sheet], kinds={"litellm", "excel"})
def blind_eval_llm_rating(config: LlmRaterConfig, gateway: ModelGatewayResource) -> MaterializeResult:
    """An LLM rater scoring the issued sheet with the same rubric; its filled sheet goes to filled/
    as `llm-<model>.xlsx`, to be checked, tallied and compared with the human raters like any other."""
    folder = Path(config.folder)
    target = folder / "filled" / f"llm-{config.model.replace('/', '_')}.xlsx"
    blind.llm_rater_fill(folder / "issued" / SHEET_FILE, target, open_model(config.model, gateway.gateway()),
                         blind.Rubric.from_file(folder / RUBRIC_FILE))
    return MaterializeResult(metadata={"filled_sheet": MetadataValue.path(str(target)), "model": config.model})


def latest_issue(store: BlindStore) -> dict:
    issue = store.latest_issue()
    if issue is None:
        raise blind.BlindEvaluationInputError("No scoring sheet has been issued yet: materialise blind_eval_sheet")
    return issue


@asset(group_name="blind_evaluation", deps=[blind_eval_sheet], kinds={"excel", "duckdb"}, pool=WAREHOUSE_POOL)
def blind_eval_scores(context: AssetExecutionContext, config: BlindFilesConfig,
                      warehouse: WarehouseResource) -> MaterializeResult:
    """Scores from every filled sheet in filled/ (one per rater, named by file), checked against the
    issued sheet. A sheet with problems is not tallied; each problem is kept with its cell."""
    with warehouse.store(BlindStore) as store:
        issue = latest_issue(store)
    key = blind.read_answer_key(Path(issue["key_path"]))
    scores, problems, accepted = [], [], []
    for path in sorted((Path(config.folder) / "filled").glob("*")):
        if path.name.startswith((".", "~$")) or not path.is_file():
            continue
        rows, found = blind.read_filled_sheet(path, key)
        for problem in found:
            problems.append({"file": path.name, "cell": problem.cell, "problem": problem.message})
            context.log.warning(f"{path.name}: {problem}")
        if rows:
            accepted.append(path.name)
            scores.append(blind.unblind(rows, key["sides"], rater=path.stem).assign(file=path.name))
    frame = pd.concat(scores) if scores else pd.DataFrame(columns=[
        "rater", "Question_ID", "system", "side", "score", "opponent_score", "outcome", "file"])
    problem_frame = pd.DataFrame(problems, columns=["file", "cell", "problem"]).assign(checked_at=utc_now())
    with warehouse.store(BlindStore) as store:
        store.replace_ratings(issue["sheet_id"], frame.assign(sheet_id=issue["sheet_id"]), problem_frame)
    return MaterializeResult(metadata={
        "accepted_sheets": MetadataValue.json(accepted), "rejected_sheets": len({p["file"] for p in problems}),
        "problems": MetadataValue.md(problem_frame[["file", "cell", "problem"]].to_markdown(index=False)
                                     if problems else "_none_"),
        "dagster/row_count": len(frame),
    })


class BlindTallyConfig(Config):
    subject: str = Field(default="Kenyan legal", description="Fills the sentence: '... N expert-curated <subject> questions'.")
    drivers: dict[str, str] = Field(default={}, description="System -> what its win would demonstrate, "
                                                            "e.g. {'SAC-RAG': 'domain adaptation'}.")


@asset(group_name="blind_evaluation", deps=[blind_eval_sheet, blind_eval_scores], kinds={"scipy", "duckdb"},
       pool=WAREHOUSE_POOL)
def blind_eval_tally(context: AssetExecutionContext, config: BlindTallyConfig,
                     warehouse: WarehouseResource) -> MaterializeResult:
    """Wins, losses, ties and average scores per system, per rater and pooled; sign test, Wilcoxon,
    bootstrap CI of the mean difference, rater agreement, and the instructions' sentence filled in."""
    with warehouse.store(BlindStore) as store:
        issue = latest_issue(store)
        scores = store.load_ratings(issue["sheet_id"])
    if scores.empty:
        raise blind.BlindEvaluationInputError("No accepted filled sheet to tally: see blind_eval_scores' problems")
    questions = scores["Question_ID"].nunique()
    tallies, results = [], []
    scopes = {rater: group for rater, group in scores.groupby("rater")} | {"pooled": scores}
    for scope, group in scopes.items():
        table = blind.tally(group)
        stats = blind.paired_statistics(group, issue["systems"])
        if scope == "pooled":
            kappa = blind.rater_agreement(group)
        else:  # an LLM rater's agreement with the humans; a human's with everyone else
            kappa = blind.agreement_with(scores, scope)
        sentence = blind.summary_sentence(table, questions, config.subject, config.drivers)
        tallies.append(table.assign(sheet_id=issue["sheet_id"], scope=scope))
        results.append({"sheet_id": issue["sheet_id"], "scope": scope, "sentence": sentence,
                        "mean_difference": stats["mean_difference"], "sign_test_p": stats["sign_test_p"],
                        "wilcoxon_p": stats["wilcoxon_p"], "ci_low": stats["bootstrap_ci"][0],
                        "ci_high": stats["bootstrap_ci"][1], "rater_kappa": kappa})
    tally_frame, result_frame = pd.concat(tallies), pd.DataFrame(results)
    with warehouse.store(BlindStore) as store:
        store.replace_tally(issue["sheet_id"], tally_frame, result_frame)
    pooled = result_frame[result_frame["scope"] == "pooled"].iloc[0]
    context.log.info(pooled["sentence"])
    return MaterializeResult(metadata={
        "sentence": pooled["sentence"], "raters": scores["rater"].nunique(),
        "tally": MetadataValue.md(tally_frame.round(3).to_markdown(index=False)),
        "statistics": MetadataValue.md(result_frame.drop(columns=["sentence"]).round(4).to_markdown(index=False)),
        "difference_of_means": f"{pooled['mean_difference']:+.2f} ({issue['systems'][0]} - {issue['systems'][1]})",
    })
