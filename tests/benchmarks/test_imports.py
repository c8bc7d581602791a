"""Evaluations made elsewhere, imported: lm-evaluation-harness's own command line (`lm-eval run
--output_path --log_samples`, in a process that never imports the platform) on the shipped ARC-Easy
slice, declared in an imports folder set from the launchpad, becomes an evaluation of an imported
model whose every item matches the platform's document and agrees with the platform's own
evaluation of the same model (0 flipped); a file that is not what it claims is refused naming the
file and line, and nothing of it lands."""

import html
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from eval_engine import DEFAULT_LOCAL_MODEL
from eval_platform.benchmarks.roster import RosterError, load_roster
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_evaluation, leaderboard, model_comparison
from eval_platform.resources import RosterResource
from eval_platform.viewer.links import comparison_link
from speed.harness_cli import run_cli
from speed.lm_eval_parity import harness_model_spec
from tests.conftest import DATA_BENCHMARKS
from tests.evaluation import (
    failure_message,
    materialize_configured,
    materialize_evaluation,
    materialize_inputs,
    roster_with,
)
from tests.system.test_readme import sql_statements

DOCUMENTS = 5
BASELINE = "smollm2-135m-instruct-float32"  # the guide's names: its SQL runs here
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "bring-your-results.md"
# lm-eval 0.4.13's own output of `speed/harness_cli.py` on the shipped slice (tests/data/harness_output/SOURCES.md)
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "harness_output"
HARNESS_RUN = {
    "model": harness_model_spec(),
    "tasks": ["arc_easy"],
    "data_files": {"arc_easy": {"test": str(DATA_BENCHMARKS / "arc_easy.jsonl")}},
    "limit": DOCUMENTS,
    "num_fewshot": 0,
}


def rows(warehouse, sql: str, params=()) -> list[tuple]:
    with warehouse.get_connection() as conn:
        return conn.execute(sql, list(params)).fetchall()


def declare_import(folder: Path, name: str, source: Path, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"source": str(source), **fields}))
    return path


@pytest.mark.slow
def test_the_harness_command_lines_output_imported_matches_and_agrees_with_the_platform_item_by_item(
    tmp_path, warehouse
):
    output = run_cli(HARNESS_RUN, tmp_path / "harness")
    imports = tmp_path / "imports"
    declare_import(imports, "harness-smollm2", output, baseline=BASELINE)
    roster_with(tmp_path / "roster", BASELINE, model=DEFAULT_LOCAL_MODEL, solvers=["harness"])
    roster = RosterResource(directory=str(tmp_path / "roster"), imports_dir=str(imports))  # the launchpad's
    assert roster.entry("harness-smollm2").benchmarks == ("arc_easy",)  # what its file holds
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    # imported before the platform evaluates: matched to the dataset's documents
    imported = materialize_evaluation(warehouse, "arc_easy", "harness-smollm2", roster)
    assert imported.success
    assert materialize_evaluation(warehouse, "arc_easy", BASELINE, roster, {"limit": DOCUMENTS}).success
    compared = materialize_evaluation(warehouse, "arc_easy", "harness-smollm2", roster, assets=[model_comparison])
    assert compared.success

    (samples_file,) = output.rglob("samples_arc_easy_*.jsonl")
    lines = [json.loads(line) for line in samples_file.read_text().splitlines()]
    lineage = rows(
        warehouse,
        "SELECT l.line, l.source_doc_id, l.source, s.document_id, p.document_id, s.metrics::VARCHAR, "
        "p.metrics::VARCHAR FROM import_lineage l JOIN samples s USING (benchmark, model, settings_key, solver, "
        "task, doc_id, filter) JOIN samples p ON p.benchmark = s.benchmark AND p.task = s.task AND "
        f"p.doc_id = s.doc_id AND p.model = '{BASELINE}' AND p.solver = 'harness' ORDER BY l.line",
    )
    assert [(line, theirs, source) for line, theirs, source, *_ in lineage] == [
        (number, sample["doc_id"], str(samples_file)) for number, sample in enumerate(lines, start=1)
    ]
    for *_, document, platform_document, metrics, platform_metrics in lineage:
        assert document == platform_document is not None
        assert json.loads(metrics) == json.loads(platform_metrics)  # each item agrees
    assert rows(warehouse, "SELECT count(*) FROM import_rejections") == [(0,)]
    comparisons = rows(
        warehouse,
        "SELECT metric, items, only_a, only_b, difference FROM comparisons WHERE model_a = 'harness-smollm2' "
        f"AND model_b = '{BASELINE}' ORDER BY metric",
    )
    assert comparisons == [("acc", DOCUMENTS, 0, 0, 0.0), ("acc_norm", DOCUMENTS, 0, 0, 0.0)]  # 0 flipped
    ((source, fingerprint),) = rows(
        warehouse, "SELECT model_source, model_fingerprint FROM evaluations WHERE model = 'harness-smollm2'"
    )
    (results_file,) = output.rglob("results_*.json")
    assert source.startswith("lm-evaluation-harness 0.4.13: hf pretrained=") and str(results_file) in source
    assert fingerprint.startswith("imported:")
    reported = json.loads(results_file.read_text())["results"]["arc_easy"]
    stored = dict(rows(warehouse, "SELECT metric, value FROM results WHERE model = 'harness-smollm2'"))
    assert stored == {"acc": reported["acc,none"], "acc_norm": reported["acc_norm,none"]}
    board = materialize_configured([leaderboard], {"warehouse": warehouse, "roster": roster})
    table = board.asset_materializations_for_node("leaderboard")[0].metadata["leaderboard"].value
    (line,) = [line for line in table.splitlines() if line.startswith("| harness-smollm2 ")]
    assert f"| imported: lm-evaluation-harness 0.4.13, {results_file.name} |" in line
    page = viewer_page(warehouse, comparison_link("", "arc_easy", "harness-smollm2", BASELINE))
    assert f"imported from <code>{html.escape(source)}</code>" in page  # where its numbers came from
    assert "model <code>local/smollm2-135m-instruct</code>" in page
    (guide_sql,) = sql_statements(GUIDE)  # the guide's query, on this warehouse: each item, file and line
    assert [(task, doc_id, line) for task, doc_id, _, line, *_ in rows(warehouse, guide_sql)] == [
        ("arc_easy", doc_id, line) for line, doc_id, *_ in sorted(lineage, key=lambda r: r[1])
    ]


def viewer_page(warehouse, path: str) -> str:
    """A page of the viewer's app on the warehouse, asked over HTTP in process (httpx's ASGI transport)."""
    import asyncio

    import httpx

    from eval_platform.viewer.app import build_app
    from eval_platform.viewer.warehouse import WarehouseSource

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(WarehouseSource(warehouse.database)))
        async with httpx.AsyncClient(transport=transport, base_url="http://viewer") as client:
            return await client.get(path)

    response = asyncio.run(get())
    assert response.status_code == 200, response.text[:2000]
    return response.text


@pytest.fixture
def shipped_copy(tmp_path) -> Path:
    """A copy of the shipped harness output, to spoil."""
    return Path(shutil.copytree(SHIPPED / "output", tmp_path / "output"))


def imported_roster(tmp_path, source: Path, **fields) -> RosterResource:
    declare_import(tmp_path / "imports", "imported", source, **fields)
    roster_with(tmp_path / "roster", "smollm2", model=DEFAULT_LOCAL_MODEL)
    return RosterResource(directory=str(tmp_path / "roster"), imports_dir=str(tmp_path / "imports"))


def samples_file(folder: Path) -> Path:
    (path,) = folder.rglob("samples_arc_easy_*.jsonl")
    return path


def spoil_line(path: Path, number: int, spoil) -> None:
    lines = path.read_text().splitlines()
    lines[number - 1] = spoil(lines[number - 1])
    path.write_text("\n".join(lines) + "\n")


def with_metric(line: str, value) -> str:
    sample = json.loads(line)
    sample["acc"] = value
    return json.dumps(sample)


SPOILED = {
    "cut short": (lambda line: line[: len(line) // 2], "line 3: not a JSON object"),
    "a metric that is no number": (lambda line: with_metric(line, "1.0; DROP TABLE samples"), "line 3 (doc_id 2): "
                                   "metric acc is not a number"),
    "another schema": (lambda line: json.dumps({"id": 2, "input": "a question", "scores": {}}), "line 3: not a sample"),
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(SPOILED))
def test_a_spoiled_samples_file_is_refused_naming_file_and_line_and_nothing_lands(
    tmp_path, warehouse, shipped_copy, fault
):
    spoil, said = SPOILED[fault]
    roster = imported_roster(tmp_path, shipped_copy)
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    assert materialize_evaluation(warehouse, "arc_easy", "imported", roster).success
    before = import_tables(warehouse)
    assert len(before["samples"]) == DOCUMENTS
    path = samples_file(shipped_copy)
    spoil_line(path, 3, spoil)
    result = materialize_evaluation(warehouse, "arc_easy", "imported", roster, raise_on_error=False)
    assert f"{path} {said}" in failure_message(result)
    assert import_tables(warehouse) == before  # the first import, whole


IMPORT_TABLES = ("samples", "sample_scores", "results", "evaluations", "import_lineage", "import_rejections")


def import_tables(warehouse) -> dict[str, list[tuple]]:
    """Every table an import writes, its rows without the times and runs that wrote them."""
    columns = "COLUMNS(lambda c: NOT suffix(c, '_at') AND c <> 'run_id')"
    return {table: rows(warehouse, f"SELECT {columns} FROM {table} ORDER BY ALL") for table in IMPORT_TABLES}


def test_a_file_rewritten_while_it_is_stored_is_refused_and_nothing_lands(
    tmp_path, warehouse, shipped_copy, monkeypatch
):
    """The file is read whole before anything is kept, and read again as it is stored: a line
    rewritten in between fails the store's one transaction, and the tables stay as they were."""
    import eval_platform.evaluation_assets.benchmarks.assets as assets

    roster = imported_roster(tmp_path, shipped_copy)
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    assert materialize_evaluation(warehouse, "arc_easy", "imported", roster).success
    before = import_tables(warehouse)
    path = samples_file(shipped_copy)
    read = assets.imported_evaluation

    def read_then_rewritten(*args, **kwargs):
        result = read(*args, **kwargs)
        lines = path.read_text().splitlines()
        lines[3], lines[4] = lines[4], lines[3]  # two documents swap lines
        path.write_text("\n".join(lines) + "\n")
        return result

    monkeypatch.setattr(assets, "imported_evaluation", read_then_rewritten)
    result = materialize_evaluation(warehouse, "arc_easy", "imported", roster, raise_on_error=False)
    assert f"{path} line 4: changed since it was read" in failure_message(result)
    assert import_tables(warehouse) == before


def test_a_folder_of_several_models_runs_is_refused_naming_them(tmp_path, warehouse, shipped_copy):
    (model,) = [folder for folder in shipped_copy.iterdir() if folder.is_dir()]
    shutil.copytree(model, shipped_copy / "another-model")
    roster = imported_roster(tmp_path, shipped_copy, benchmarks=["arc_easy"])
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    result = materialize_evaluation(warehouse, "arc_easy", "imported", roster, raise_on_error=False)
    models = ", ".join(sorted(["another-model", model.name]))
    assert f"{shipped_copy}: holds runs of several models ({models})" in failure_message(result)
    imported = RosterResource(directory=str(tmp_path / "roster"), imports_dir=str(tmp_path / "imports"))
    assert imported.entry("imported").benchmarks == ("arc_easy",)  # those it names, until it can be read


def test_an_item_matching_no_document_is_kept_with_its_reason(tmp_path, warehouse, shipped_copy):
    path = samples_file(shipped_copy)

    def reworded(line: str) -> str:
        sample = json.loads(line)
        sample["doc"]["question"] = "A question the warehouse does not hold?"
        return json.dumps(sample)

    spoil_line(path, 2, reworded)
    roster = imported_roster(tmp_path, shipped_copy)
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    assert materialize_evaluation(warehouse, "arc_easy", "imported", roster).success
    assert rows(warehouse, "SELECT line, source_doc_id, reason FROM import_rejections") == [
        (2, 1, "its document matches none of the warehouse's documents of its task")
    ]
    assert rows(warehouse, "SELECT stage, line FROM rejected_rows WHERE benchmark = 'arc_easy'") == [("import", 2)]
    kept = rows(warehouse, "SELECT doc_id FROM samples WHERE model = 'imported' ORDER BY doc_id")
    assert kept == [(0,), (2,), (3,), (4,)]  # the others, numbered as the warehouse numbers them


def test_a_run_on_the_documents_in_another_order_is_matched_by_content_not_position(tmp_path, warehouse, shipped_copy):
    """The harness run on the slice in reverse order: its doc_ids count its own order."""
    path = samples_file(shipped_copy)
    reordered = [json.loads(line) for line in reversed(path.read_text().splitlines())]
    path.write_text("".join(json.dumps({**sample, "doc_id": i}) + "\n" for i, sample in enumerate(reordered)))
    roster = imported_roster(tmp_path, shipped_copy)
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    assert materialize_evaluation(warehouse, "arc_easy", "imported", roster).success
    shipped = [json.loads(line) for line in samples_file(SHIPPED / "output").read_text().splitlines()]
    stored = rows(
        warehouse,
        "SELECT s.doc_id, s.metrics::VARCHAR, l.line, l.source_doc_id FROM samples s JOIN import_lineage l "
        "USING (benchmark, model, settings_key, solver, task, doc_id, filter) ORDER BY s.doc_id",
    )
    assert [(doc_id, json.loads(metrics)) for doc_id, metrics, *_ in stored] == [
        (s["doc_id"], {"acc": s["acc"], "acc_norm": s["acc_norm"]}) for s in shipped
    ]
    assert [(line, theirs) for *_, line, theirs in stored] == [(DOCUMENTS - i, DOCUMENTS - 1 - i) for i in range(5)]


def test_an_import_declaration_names_its_file_and_is_checked(tmp_path):
    imports = tmp_path / "imports"
    roster_with(tmp_path / "roster", "smollm2", model=DEFAULT_LOCAL_MODEL)
    declare_import(imports, "imported", SHIPPED / "output", baseline="nobody")
    with pytest.raises(RosterError, match=r"imported.yaml: baseline: 'nobody' is not in the roster"):
        load_roster(tmp_path / "roster", imports=imports)
    (imports / "imported.yaml").write_text(yaml.safe_dump({"source": "x", "dtype": "bfloat16"}))
    with pytest.raises(RosterError, match=r"imported.yaml: dtype: Extra inputs are not permitted"):
        load_roster(tmp_path / "roster", imports=imports)


def test_benchmark_evaluation_opens_no_model_for_an_import(tmp_path, warehouse, monkeypatch):
    """The import reads its file: the model resource is never asked to load a model."""
    from eval_platform.resources import LanguageModelResource

    def refuse(*_args, **_kwargs):
        raise AssertionError("an import opened a model")

    monkeypatch.setattr(LanguageModelResource, "load", refuse)
    roster = imported_roster(tmp_path, SHIPPED / "output")
    assert materialize_inputs(warehouse, "arc_easy", DOCUMENTS).success
    assert materialize_evaluation(warehouse, "arc_easy", "imported", roster, assets=[benchmark_evaluation]).success


def test_the_roster_sensor_evaluates_an_import_declared_and_again_when_its_files_are_rewritten(tmp_path, shipped_copy):
    from dagster import DagsterInstance, build_sensor_context

    from eval_platform.evaluation_assets.partitions import evaluation_key
    from eval_platform.schedules.sensors import roster_sensor

    instance = DagsterInstance.ephemeral()
    roster = imported_roster(tmp_path, shipped_copy)

    def tick(cursor=None):
        with build_sensor_context(instance=instance, resources={"roster": roster}, cursor=cursor) as context:
            return roster_sensor(context)

    first = tick()
    assert first.dynamic_partitions_requests[0].partition_keys == ["smollm2", "imported"]
    assert tick(first.cursor).run_requests == []
    path = samples_file(shipped_copy)
    path.write_text(path.read_text())  # the harness run again into the same folder
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    rewritten = tick(first.cursor)
    assert [r.partition_key for r in rewritten.run_requests] == [evaluation_key("arc_easy", "imported")]


def test_an_import_is_stored_under_the_warehouses_import_memory_limit(tmp_path, warehouse, shipped_copy, monkeypatch):
    """The import's one transaction runs with DuckDB's memory limit at the resource's
    `import_memory_limit` (past it, its uncommitted rows spill to disk); a limit that is no size is
    refused before any run."""
    from pydantic import ValidationError

    from eval_platform.benchmarks.store import EvaluationStore
    from eval_platform.resources import WarehouseResource

    seen = []
    save = EvaluationStore.save_import

    def recording(self, run, imported):
        seen.append(self.sql("SELECT current_setting('memory_limit')").fetchone()[0])
        return save(self, run, imported)

    monkeypatch.setattr(EvaluationStore, "save_import", recording)
    roster = imported_roster(tmp_path, shipped_copy)
    limited = WarehouseResource(database=warehouse.database, import_memory_limit="64MB")
    assert materialize_inputs(limited, "arc_easy", DOCUMENTS).success
    assert materialize_evaluation(limited, "arc_easy", "imported", roster).success
    assert seen == ["61.0 MiB"]  # 64,000,000 bytes
    with pytest.raises(ValidationError, match="import_memory_limit"):
        WarehouseResource(database=warehouse.database, import_memory_limit="64MB'; DROP TABLE samples; --")
