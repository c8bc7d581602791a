"""Tasks whose metric executes the model's code (humaneval_64): each program runs in the sandbox (a
process of its own with CPU, wall-clock, memory and file limits, no network, no processes), only
where the user opts in as lm-evaluation-harness requires, and the harness's own metric scores
HumanEval through it. The expected verdicts come from HumanEval itself (its canonical solutions
pass its tests) and from programs whose fate is plain by reading them."""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
from dagster import DagsterInstance

from eval_platform.benchmarks.code_sandbox import PASSED, TIMED_OUT, Limits, network_isolation, run_program
from eval_platform.benchmarks.declarations import EvaluationSettings
from eval_platform.benchmarks.harness import HarnessRun, HarnessTaskError, build_tasks, each_answer_scored
from eval_platform.benchmarks.roster import RosterEntry, write_entry
from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
from eval_platform.resources import WarehouseResource
from tests.benchmarks.test_harness_tasks import launchpad
from tests.conftest import DATA_BENCHMARKS

CODE = DATA_BENCHMARKS / "code"
TASK = "humaneval_64"
HUMANEVAL = {TASK: {"test": str(CODE / "humaneval.jsonl")}}
PROBLEMS = [json.loads(line) for line in (CODE / "humaneval.jsonl").read_text().splitlines()]


def checked(problem, body):
    """A HumanEval program as its harness task builds it: the prompt, the body, the tests, the check."""
    return f"{problem['prompt']}{body}\n{problem['test']}\ncheck({problem['entry_point']})"


def test_humanevals_own_solutions_pass_and_a_body_that_returns_nothing_fails():
    for problem in PROBLEMS:
        assert run_program(checked(problem, problem["canonical_solution"])) == PASSED, problem["task_id"]
        assert run_program(checked(problem, "    return None\n")).startswith("failed: "), problem["task_id"]


def test_a_program_passes_only_when_it_runs_to_its_end():
    assert run_program("assert sum([1, 2]) == 3") == PASSED
    assert run_program("assert 1 == 2, 'wrong'") == "failed: AssertionError: wrong"
    assert run_program("import sys\nsys.exit(0)\nassert False") == "failed: SystemExit: 0"
    assert run_program("import os\nos._exit(0)\nassert False") == "failed: no verdict"  # left before any verdict
    assert run_program("print('passed')\nassert False") == "failed: AssertionError: "  # its output goes nowhere


def test_a_program_past_its_seconds_is_stopped_with_every_process_it_started(tmp_path):
    assert run_program("while True:\n    pass", Limits(seconds=1)) == TIMED_OUT  # its CPU seconds
    pid_file = tmp_path / "pid"
    ignores_sigterm = (
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)"
    )
    assert run_program(ignores_sigterm, Limits(seconds=1)) == TIMED_OUT  # asleep: the wall clock
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_program_gets_no_more_memory_and_file_than_its_limits():
    assert run_program("block = bytearray(600 << 20)", Limits(memory_bytes=256 << 20)) == "failed: MemoryError: "
    assert run_program("block = bytearray(100 << 20)", Limits(memory_bytes=256 << 20)) == PASSED
    written = run_program("open('big', 'wb').write(b'x' * (4 << 20))", Limits(file_bytes=1 << 20))
    assert written == "failed: OSError: [Errno 27] File too large"


def test_a_program_reaches_no_network_and_starts_no_process():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)"
        assert run_program(program) == "failed: PermissionError: the sandbox refuses socket.getaddrinfo"
        opened = f"import socket\nsocket.socket().connect(('127.0.0.1', {port}))"
        assert run_program(opened) == "failed: PermissionError: the sandbox refuses socket.__new__"
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing ever knocked
            server.accept()
    assert run_program("import subprocess\nsubprocess.run(['true'])").endswith("refuses subprocess.Popen")
    assert run_program("import os\nos.fork()").endswith("refuses os.fork")
    assert run_program("import ctypes\nctypes.CDLL(None)").endswith("refuses ctypes.dlopen")


def test_where_the_kernel_allows_it_a_program_has_no_network_even_past_the_audit_hook():
    prefix = network_isolation()
    if not prefix:
        pytest.skip("this kernel refuses an unprivileged network namespace: the audit hook alone keeps the network out")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        connect = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)"
        alone = subprocess.run([*prefix, sys.executable, "-c", connect], capture_output=True, text=True, timeout=60)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert alone.returncode != 0 and "Network is unreachable" in alone.stderr  # its own loopback, and that down


@pytest.fixture
def opted_in(monkeypatch):
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")


def test_humaneval_is_refused_until_both_opt_ins_are_given(monkeypatch):
    monkeypatch.delenv("HF_ALLOW_CODE_EVAL", raising=False)
    confirmed = EvaluationSettings(task=TASK, data_files=HUMANEVAL, confirm_run_unsafe_code=True)
    with pytest.raises(HarnessTaskError, match="with HF_ALLOW_CODE_EVAL=1 in the environment; the code then"):
        build_tasks(HarnessRun((TASK,), confirmed))
    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")
    unconfirmed = EvaluationSettings(task=TASK, data_files=HUMANEVAL)
    with pytest.raises(HarnessTaskError, match=r"with confirm_run_unsafe_code: true \(in the declaration or the"):
        build_tasks(HarnessRun((TASK,), unconfirmed))


def test_a_task_that_runs_code_with_an_executor_of_its_own_is_refused_even_opted_in(tmp_path, opted_in):
    (tmp_path / "runs_code.yaml").write_text(
        "task: runs_code\ndataset_path: json\noutput_type: generate_until\ntest_split: test\nunsafe_code: true\n"
        'doc_to_text: "{{prompt}}"\ndoc_to_target: "{{answer}}"\ngeneration_kwargs: {until: ["\\n"]}\n'
        "metric_list: [{metric: exact_match}]\n"
    )
    (tmp_path / "rows.jsonl").write_text('{"prompt": "def f():", "answer": "  return 1"}\n')
    settings = EvaluationSettings(
        task="runs_code",
        include_path=(str(tmp_path),),
        data_files={"runs_code": {"test": str(tmp_path / "rows.jsonl")}},
        confirm_run_unsafe_code=True,
    )
    with pytest.raises(HarnessTaskError, match="runs_code executes the model's code with an executor of its own"):
        build_tasks(HarnessRun(("runs_code",), settings, include_defaults=False))


def test_the_harness_scores_humaneval_by_its_own_metric_through_the_sandbox(opted_in):
    """humaneval_64's own filter and pass_at_k on four answers, one of them the canonical solution:
    by hand, pass@2 = 1 - C(3, 2) / C(4, 2) = 0.5 and pass@4 = 1; each answer alone passes or not."""
    settings = EvaluationSettings(task=TASK, data_files=HUMANEVAL, repeats=4, limit=1, confirm_run_unsafe_code=True)
    (task,) = build_tasks(HarnessRun((TASK,), settings))
    doc = task.test_docs()[0]
    answers = [doc["canonical_solution"], "    return None\n", "    pass\n", "    return []\n"]
    (ensemble,) = task._filters
    predictions = [answers]
    for step in (make() for make in ensemble.filters):  # the task's own create_test filter
        predictions = step.apply(predictions, [doc])
    task._metric_fn_kwargs["pass_at_k"]["k"] = [2, 4]  # humaneval_64's sizes, those four answers have
    assert task.process_results(doc, [list(predictions)[0]]) == {"pass@2": 0.5, "pass@4": 1.0}
    taken, scored = each_answer_scored(task, doc, "create_test", answers)
    assert scored == [{"pass@1": 1.0}, {"pass@1": 0.0}, {"pass@1": 0.0}, {"pass@1": 0.0}]
    assert taken[0] == doc["prompt"] + doc["canonical_solution"]  # what the filter made of it: the program


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The shipped humaneval_64 declaration and its data copied into a benchmarks folder, as its
    comment says to; a roster of one."""
    benchmarks = tmp_path / "benchmarks"
    shutil.copytree(CODE, benchmarks)
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(benchmarks))
    write_entry(tmp_path / "roster", RosterEntry(name="smollm2", model="local/smollm2-135m-instruct"))
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2"])
    instance.add_dynamic_partitions(benchmark_partitions.name, [TASK])
    return tmp_path, instance


@pytest.mark.slow
def test_humaneval_64_runs_from_the_launchpad_only_opted_in_its_samples_scored_as_a_plain_run_says(
    project, monkeypatch
):
    from eval_platform.definitions import defs

    root, instance = project
    settings = {"limit": 2, "repeats": 2, "max_gen_toks": 48}
    job = defs().resolve_job_def("model_evaluation")

    def materialise(config):
        ops = {"benchmark_evaluation": {"config": config}}
        return job.execute_in_process(
            partition_key=evaluation_key(TASK, "smollm2"),
            instance=instance,
            run_config=launchpad(root / "warehouse.duckdb", root / "roster", ops),
            raise_on_error=False,
        )

    monkeypatch.delenv("HF_ALLOW_CODE_EVAL", raising=False)
    refused = materialise({**settings, "confirm_run_unsafe_code": True})
    failure = next(event for event in refused.all_events if event.event_type_value == "STEP_FAILURE")
    assert not refused.success and "HF_ALLOW_CODE_EVAL=1 in the environment" in str(failure.event_specific_data)

    monkeypatch.setenv("HF_ALLOW_CODE_EVAL", "1")
    assert materialise({**settings, "confirm_run_unsafe_code": True}).success
    warehouse = WarehouseResource(database=str(root / "warehouse.duckdb"))
    with warehouse.get_connection() as conn:
        scores = conn.execute(
            "SELECT s.doc_id, s.sample, s.value, a.response FROM sample_scores s "
            "JOIN answers a ON a.request_key = s.request_key WHERE s.metric = 'pass@1' ORDER BY s.doc_id, s.sample"
        ).fetchall()
        results = dict(conn.execute("SELECT metric, value FROM results WHERE task = ?", [TASK]).fetchall())
    assert [(doc, sample) for doc, sample, _, _ in scores] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for doc, _, value, response in scores:  # each answer run again by a plain interpreter, no sandbox
        program = checked(PROBLEMS[doc], json.loads(response))
        plain = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60, check=False)
        assert value == float(plain.returncode == 0)
    passed = [sum(value for d, _, value, _ in scores if d == doc) for doc in (0, 1)]
    assert results["pass@2"] == pytest.approx(sum(p > 0 for p in passed) / 2)  # the harness's own pass@2
    assert results["pass@1 pass@2"] == results["pass@2"]  # our reduction of the same samples
