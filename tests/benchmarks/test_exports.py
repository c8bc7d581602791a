"""Evaluations exported as inspect_ai logs (the `inspect_log` asset): read by inspect_ai's own
`read_eval_log`, in a process of its own that never imports the platform, with every sample's
scores, its prompt and reference, and the results equal to the warehouse's; opened by `inspect view`
in Chromium, which shows a document's prompt; written again, replaced and never duplicated; turned
into Every Eval Ever records by that project's own converter, which its own validator accepts.

And inspect_ai logs imported (declared in an imports folder set from the launchpad): the platform's
own export, and a log inspect_ai itself writes from the platform's answers, each matched item by
item to the platform's documents, agreeing, with 0 flipped items against the model's own evaluation;
a spoiled log refused naming the file and sample, and nothing of it lands."""

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from eval_engine import DEFAULT_LOCAL_MODEL, materialize_weights
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_evaluation, inspect_log, model_comparison
from tests.browser import chromium, page_text
from tests.evaluation import failure_message, materialize_evaluation, materialize_inputs, roster_with
from tests.peers import EEE_PYTHON, INSPECT_LOG_READER, PEER_BIN, peer_json, require_peers
from tests.processes import WAIT_S, free_port, running

MODEL = "smollm2"
REPLAY = Path(__file__).with_name("inspect_ai_replay.py")
HF_TASK = Path(__file__).with_name("inspect_ai_hf_task.py")
# a multiple-choice task and a generation with two filters, each on its first documents
EVALUATED = {"arc_easy": (5, {}), "gsm8k": (3, {"max_gen_toks": 48})}


def rows(warehouse, sql: str, params=()) -> list[tuple]:
    with warehouse.get_connection() as conn:
        return conn.execute(sql, list(params)).fetchall()


def export(warehouse, benchmark: str, roster, folder: Path):
    return materialize_evaluation(
        warehouse, benchmark, MODEL, roster, assets=[inspect_log],
        ops={"inspect_log": {"config": {"folder": str(folder)}}},
    )  # fmt: skip


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The local model's evaluations of EVALUATED, each exported to its benchmark's folder."""
    from eval_platform.resources import WarehouseResource

    root = tmp_path_factory.mktemp("exports")
    warehouse = WarehouseResource(database=str(root / "warehouse.duckdb"))
    roster = roster_with(root / "roster", MODEL, model=DEFAULT_LOCAL_MODEL)
    for benchmark, (documents, settings) in EVALUATED.items():
        assert materialize_inputs(warehouse, benchmark, documents).success
        assert materialize_evaluation(warehouse, benchmark, MODEL, roster, settings=settings).success
        assert export(warehouse, benchmark, roster, root / benchmark).success
    return root, warehouse, roster


def warehouse_samples(warehouse, benchmark: str, solver: str) -> dict[str, dict]:
    """Each document of the evaluation as the warehouse holds it: its prompt, reference and every
    metric under every filter (`<metric>,<filter>`)."""
    documents: dict[str, dict] = {}
    for task, doc_id, filter_name, prompt, target, metrics in rows(
        warehouse,
        "SELECT task, doc_id, filter, prompt, target, metrics::VARCHAR FROM samples "
        "WHERE benchmark = ? AND model = ? AND solver = ?",
        [benchmark, MODEL, solver],
    ):
        document = documents.setdefault(f"{task}:{doc_id}", {"input": prompt, "target": target, "scores": {}})
        document["scores"].update({f"{metric},{filter_name}": v for metric, v in json.loads(metrics).items()})
    return documents


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", sorted(EVALUATED))
def test_inspect_ais_own_reader_reads_every_sample_with_the_warehouses_scores(exported, benchmark):
    root, warehouse, _ = exported
    evaluations = rows(
        warehouse,
        "SELECT solver, settings_key, model_fingerprint, model_source FROM evaluations "
        "WHERE benchmark = ? AND model = ?",
        [benchmark, MODEL],
    )
    files = sorted((root / benchmark).iterdir())
    assert len(files) == len(evaluations) >= 1 and all(f.suffix == ".eval" for f in files)
    logs = [peer_json(INSPECT_LOG_READER, str(path), cwd=root) for path in files]
    by_evaluation = {(log["metadata"]["solver"], log["metadata"]["settings_key"]): log for log in logs}
    assert by_evaluation.keys() == {(solver, key) for solver, key, *_ in evaluations}
    for solver, settings_key, fingerprint, source in evaluations:
        log = by_evaluation[solver, settings_key]
        assert (log["inspect_ai"], log["status"], log["task"], log["epochs"]) == ("0.3.285", "success", benchmark, 1)
        assert source.startswith("local/") and log["model"] == "hf/" + source.removeprefix("local/")  # its hf provider
        assert (log["metadata"]["model_fingerprint"], log["metadata"]["settings_key"]) == (fingerprint, settings_key)
        expected = warehouse_samples(warehouse, benchmark, solver)
        assert len(expected) == EVALUATED[benchmark][0]
        read = {s["id"]: {"input": s["input"], "target": s["target"], "scores": s["scores"]} for s in log["samples"]}
        assert read == {key: {**document, "target": document["target"] or ""} for key, document in expected.items()}
        reduced = {name: values for name, values in log["reductions"].items()}
        assert reduced == {
            name: {key: document["scores"][name] for key, document in expected.items()}
            for name in next(iter(expected.values()))["scores"]
        }
        results = rows(
            warehouse,
            "SELECT metric, filter, value, stderr FROM results WHERE benchmark = ? AND solver = ? AND task = ?",
            [benchmark, solver, benchmark],
        )
        assert log["results"] == {
            f"{metric},{filter_name}": {metric: value, **({"stderr": stderr} if stderr is not None else {})}
            for metric, filter_name, value, stderr in results
        }


@pytest.mark.slow
def test_exporting_again_replaces_the_logs(exported):
    root, warehouse, roster = exported
    before = {path.name: path.read_bytes() for path in (root / "arc_easy").iterdir()}
    for path in (root / "arc_easy").iterdir():
        path.write_bytes(b"spoiled")
    assert export(warehouse, "arc_easy", roster, root / "arc_easy").success
    after = {path.name: path.read_bytes() for path in (root / "arc_easy").iterdir()}
    assert after.keys() == before.keys()  # the same files, none beside them (no partial file left)
    assert all(len(after[name]) == len(before[name]) and zipfile.is_zipfile(root / "arc_easy" / name) for name in after)


@pytest.mark.slow
def test_inspect_view_opens_the_log_and_shows_a_documents_prompt(exported):
    require_peers()
    root, warehouse, _ = exported
    ((prompt,),) = rows(
        warehouse, "SELECT prompt FROM samples WHERE benchmark = 'arc_easy' AND solver = 'harness' AND doc_id = 0"
    )
    question = prompt.splitlines()[0]
    port = free_port()
    view = [str(PEER_BIN / "inspect"), "view", "start", "--log-dir", str(root / "arc_easy"),
            "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with running(view, f"http://127.0.0.1:{port}/api/logs", timeout_s=WAIT_S, cwd=root,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), chromium() as browser:  # fmt: skip
        (harness,) = (root / "arc_easy").glob("arc_easy_smollm2_harness_*.eval")
        browser.get(f"http://127.0.0.1:{port}/#/logs/{harness.name}")
        text = page_text(browser, ["arc_easy:0", question, "acc,none"])
    assert "arc_easy — 5 samples" in text


@pytest.mark.slow
def test_every_eval_evers_own_converter_and_validator_accept_the_export_with_equal_scores(exported, tmp_path):
    """Every Eval Ever (Python 3.12, in its own interpreter) turns the exported ARC-Easy log into its
    records with its own inspect_ai converter; its own validator accepts them, and each sample's
    score in its instance-level records is the warehouse's."""
    require_peers(EEE_PYTHON)
    root, warehouse, _ = exported
    (log,) = (root / "arc_easy").glob("arc_easy_smollm2_harness_*.eval")
    convert = [str(EEE_PYTHON), "-I", "-m", "every_eval_ever.converters.inspect", "--log_path", str(log),
               "--output_dir", "data"]  # fmt: skip
    converted = subprocess.run(convert, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S)
    assert converted.returncode == 0, converted.stderr[-3000:]
    validate = [str(EEE_PYTHON), "-I", "-m", "every_eval_ever", "validate", "data/*/*/*/*.json*"]
    validated = subprocess.run(validate, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S)
    assert validated.returncode == 0 and "All files passed validation" in validated.stdout, validated.stdout[-3000:]
    (instances,) = (tmp_path / "data").glob("arc_easy/*/*/*_samples.jsonl")
    records = [json.loads(line) for line in instances.read_text().splitlines()]
    scores = {(r["sample_id"], r["evaluation_result_id"].split(":")[0]): r["evaluation"]["score"] for r in records}
    expected = warehouse_samples(warehouse, "arc_easy", "harness")
    assert scores == {(key, name): value for key, doc in expected.items() for name, value in doc["scores"].items()}


IMPORTED = "inspect-smollm2"


def import_log(warehouse, roster, benchmark: str, log: Path, folder: Path, name: str = IMPORTED, **run):
    """The log declared in the imports folder `folder` (the launchpad's `imports_dir`) with the
    exported model as its baseline, and imported: the run's result."""
    from eval_platform.resources import RosterResource

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump({"source": str(log), "baseline": MODEL}))
    imports = RosterResource(directory=roster.directory, imports_dir=str(folder))
    return materialize_evaluation(warehouse, benchmark, name, imports, **run), imports


def agreement(warehouse, benchmark: str, name: str) -> tuple[int, int, list[tuple]]:
    """The import's samples matched to the model's own (same task, document, filter, settings key and
    solver), those whose metrics agree, and the comparison's flipped items per metric."""
    ((matched, agreeing),) = rows(
        warehouse,
        "SELECT count(*), count(*) FILTER (i.metrics = o.metrics) FROM samples i JOIN samples o "
        "USING (benchmark, settings_key, solver, task, doc_id, filter) WHERE i.benchmark = ? AND i.model = ? "
        "AND o.model = ?",
        [benchmark, name, MODEL],
    )
    flipped = rows(
        warehouse,
        "SELECT metric, filter, items, only_a, only_b FROM comparisons WHERE benchmark = ? AND model_a = ? "
        "AND model_b = ? AND relation = 'baseline' ORDER BY metric, filter",
        [benchmark, name, MODEL],
    )
    return matched, agreeing, flipped


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", sorted(EVALUATED))
def test_an_exported_log_imported_matches_every_item_and_flips_none(exported, benchmark, tmp_path):
    root, warehouse, roster = exported
    documents = EVALUATED[benchmark][0]
    for number, log in enumerate(sorted((root / benchmark).glob("*.eval"))):
        name = f"{IMPORTED}-{benchmark}-{number}"  # one import per exported log (solver and settings key)
        result, imports = import_log(warehouse, roster, benchmark, log, tmp_path / "imports", name,
                                     assets=[benchmark_evaluation, model_comparison])  # fmt: skip
        assert result.success
        ((solver, settings_key),) = rows(
            warehouse,
            "SELECT solver, settings_key FROM evaluations WHERE benchmark = ? AND model = ?",
            [benchmark, name],
        )
        ((own,),) = rows(
            warehouse,
            "SELECT count(*) FROM samples WHERE benchmark = ? AND model = ? AND solver = ? AND settings_key = ?",
            [benchmark, MODEL, solver, settings_key],
        )
        matched, agreeing, flipped = agreement(warehouse, benchmark, name)
        assert matched == agreeing == own >= documents  # every item matched, and agreeing
        assert flipped and all((items, a, b) == (documents, 0, 0) for _, _, items, a, b in flipped), flipped
        lineage = rows(warehouse, "SELECT DISTINCT source FROM import_lineage WHERE model = ?", [name])
        assert len(lineage) == documents and all(source.startswith(f"{log}!samples/") for (source,) in lineage)
        assert rows(warehouse, "SELECT count(*) FROM import_rejections WHERE model = ?", [name]) == [(0,)]


@pytest.mark.slow
def test_a_log_inspect_ai_writes_from_the_platforms_answers_is_matched_by_prompt_and_flips_none(exported, tmp_path):
    """inspect_ai's own `eval` writes the log (zstandard-compressed, as it writes every log) from the
    platform's harness answers and scores on ARC-Easy, without the documents: each sample is matched
    by its prompt and reference alone."""
    root, warehouse, roster = exported
    own = rows(
        warehouse,
        "SELECT task, doc_id, prompt, target, filtered_responses::VARCHAR, metrics::VARCHAR, settings_key "
        "FROM samples WHERE benchmark = 'arc_easy' AND model = ? AND solver = 'harness' ORDER BY doc_id",
        [MODEL],
    )
    given = {
        "task": "arc_easy",
        "samples": [
            {"id": doc_id + 1, "input": prompt, "target": target, "completion": answer,
             "scores": {f"{metric},none": value for metric, value in json.loads(metrics).items()}}
            for _, doc_id, prompt, target, answer, metrics, _ in own
        ],
    }  # fmt: skip
    (tmp_path / "given.json").write_text(json.dumps(given))
    written = peer_json(REPLAY, str(tmp_path / "given.json"), str(tmp_path / "logs"), cwd=tmp_path)
    log = Path(written["log"].removeprefix("file://"))
    with zipfile.ZipFile(log) as logged:  # as inspect_ai writes every log: zstandard (method 93)
        assert {i.compress_type for i in logged.infolist() if i.filename.startswith("samples/")} == {93}
    result, _ = import_log(warehouse, roster, "arc_easy", log, tmp_path / "imports", "inspect-replay",
                           assets=[benchmark_evaluation], raise_on_error=False)  # fmt: skip
    assert result.success
    # another tool's log: its own solver and settings key, so the comparison pairs it by hand here
    imported = rows(
        warehouse,
        "SELECT i.doc_id, i.metrics::VARCHAR, o.metrics::VARCHAR FROM samples i JOIN samples o USING (task, doc_id) "
        "WHERE i.model = 'inspect-replay' AND o.model = ? AND o.solver = 'harness' AND o.benchmark = 'arc_easy' "
        "ORDER BY i.doc_id",
        [MODEL],
    )
    assert [doc_id for doc_id, *_ in imported] == [doc_id for _, doc_id, *_ in own]  # every item matched
    assert all(json.loads(theirs) == json.loads(ours) for _, theirs, ours in imported)  # and agreeing
    ((source, tool),) = rows(
        warehouse, "SELECT model_source, settings->>'tool' FROM evaluations WHERE model = 'inspect-replay'"
    )
    assert tool == "inspect_ai" and source.startswith("inspect_ai 0.3.285: mockllm/model") and str(log) in source


@pytest.mark.slow
def test_inspect_ai_running_the_model_itself_answers_and_scores_as_the_platform_and_flips_none(exported, tmp_path):
    """inspect_ai's own `eval`, its `hf` provider running the local model offline (float32, greedy,
    within the same budget), asks the GSM8K documents the platform's generate solver asked, with the
    same system and user turns: its log, imported, matches every item by prompt and reference, with
    the platform's answer word for word and the same scores under both filters: 0 flipped."""
    root, warehouse, roster = exported
    documents, settings = EVALUATED["gsm8k"]
    own = rows(
        warehouse,
        "SELECT s.task, s.doc_id, s.filter, s.target, s.responses->>0, s.metrics::VARCHAR, d.system_prompt, "
        "d.user_prompt FROM samples s JOIN documents d USING (benchmark, document_id) "
        "WHERE s.benchmark = 'gsm8k' AND s.model = ? AND s.solver = 'generate' ORDER BY s.doc_id, s.filter",
        [MODEL],
    )
    asked = {(task, doc_id): {"id": f"{task}:{doc_id}", "system": system, "user": user, "target": target}
             for task, doc_id, _, target, _, _, system, user in own}  # fmt: skip
    assert len(asked) == documents and len(own) == 2 * documents  # strict-match and flexible-extract
    (tmp_path / "documents.json").write_text(json.dumps({"task": "gsm8k", "documents": list(asked.values())}))
    folder, _ = materialize_weights(DEFAULT_LOCAL_MODEL)
    budget = str(settings["max_gen_toks"])
    written = peer_json(HF_TASK, str(tmp_path / "documents.json"), folder, str(tmp_path / "logs"), budget,
                        cwd=tmp_path, timeout_s=600)  # fmt: skip
    log = Path(written["log"].removeprefix("file://"))
    result, _ = import_log(warehouse, roster, "gsm8k", log, tmp_path / "imports", "inspect-hf",
                           assets=[benchmark_evaluation], raise_on_error=False)  # fmt: skip
    assert result.success, failure_message(result)
    imported = rows(
        warehouse,
        "SELECT task, doc_id, filter, responses->0->>0, metrics::VARCHAR FROM samples "
        "WHERE benchmark = 'gsm8k' AND model = 'inspect-hf' ORDER BY doc_id, filter",
    )
    assert [row[:3] for row in imported] == [row[:3] for row in own]  # every item matched, by prompt
    answers = [(theirs.strip(), ours) for (*_, theirs, _), (*_, ours, _, _, _) in zip(imported, own, strict=True)]
    assert all(theirs == ours for theirs, ours in answers), answers  # the same greedy answer
    flipped = [(item, theirs, ours) for (*item, _, theirs), (*_, ours, _, _) in zip(imported, own, strict=True)
               if json.loads(theirs) != json.loads(ours)]  # fmt: skip
    assert flipped == []
    ((source,),) = rows(warehouse, "SELECT model_source FROM evaluations WHERE model = 'inspect-hf'")
    assert source.startswith(f"inspect_ai 0.3.285: hf/{Path(folder).name}") and str(log) in source


def spoiled_copy(log: Path, target: Path, member: str | None, spoil) -> Path:
    """A copy of the log with `member` rewritten by `spoil` (its JSON text; None leaves it out), or
    the whole file cut in half (`member` None)."""
    if member is None:
        target.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
        return target
    with zipfile.ZipFile(log) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for info in source.infolist():
            data = source.read(info.filename)
            spoiled = spoil(data.decode()) if info.filename == member else data
            if spoiled is not None:  # None: the member left out
                copy.writestr(info.filename, spoiled)
    return target


def with_score(text: str, value) -> str:
    sample = json.loads(text)
    sample["scores"]["acc,none"]["value"] = value
    return json.dumps(sample)


SPOILED = {
    "cut short": (None, None, "not an inspect_ai log (a .eval zip file)"),
    "a score that is no number": ("samples/arc_easy:2_epoch_1.json",
                                  lambda text: with_score(text, "1.0; DROP TABLE samples"),
                                  "samples/arc_easy:2_epoch_1.json: score acc,none is not a number"),
    "another schema": ("samples/arc_easy:2_epoch_1.json", lambda text: json.dumps({"question": "?"}),
                       "samples/arc_easy:2_epoch_1.json: not an inspect_ai sample"),
    "a header cut short": ("header.json", lambda text: text[:40], "header.json is not readable JSON"),
    "no header (an unfinished run)": ("header.json", lambda text: None, "no header.json"),
    "another schema version": ("header.json", lambda text: text.replace('"version": 2', '"version": 1', 1),
                               "log schema version 1"),
    "a run that failed": ("header.json", lambda text: text.replace('"status": "success"', '"status": "error"', 1),
                          "its run ended with status 'error'"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(SPOILED))
def test_a_spoiled_log_is_refused_naming_file_and_sample_and_nothing_lands(exported, tmp_path, fault):
    root, warehouse, roster = exported
    member, spoil, said = SPOILED[fault]
    (log,) = (root / "arc_easy").glob("arc_easy_smollm2_harness_*.eval")
    spoiled = spoiled_copy(log, tmp_path / "spoiled.eval", member, spoil)
    before = rows(warehouse, "SELECT count(*) FROM samples WHERE model = 'spoiled'")
    result, _ = import_log(warehouse, roster, "arc_easy", spoiled, tmp_path / "imports", "spoiled",
                           raise_on_error=False)  # fmt: skip
    message = failure_message(result)
    assert str(spoiled) in message and said in message
    assert rows(warehouse, "SELECT count(*) FROM samples WHERE model = 'spoiled'") == before == [(0,)]
