"""One planner: the main command runs what the nightly schedule, the sensors and the eager automation
conditions request in production, materialised both ways and compared run by run."""

import os
import shutil
import sys
from datetime import datetime
from pathlib import Path

import duckdb
from dagster import (
    AssetKey,
    DagsterInstance,
    RunsFilter,
    build_run_status_sensor_context,
    build_schedule_context,
    build_sensor_context,
    evaluate_automation_conditions,
)

from tests.conftest import PROJECT_ROOT
from tests.processes import run_to_end

BENCHMARK, LIMIT = "arc_easy", 2
# What a run is, for the comparison: its job, partition and the tags its request gave it.
RUN_TAGS = ("dagster/partition",)


def runs_in_order(instance: DagsterInstance) -> list[tuple[str, str | None]]:
    records = instance.get_run_records(RunsFilter(), ascending=True)
    return [(r.dagster_run.job_name, r.dagster_run.tags.get("dagster/partition")) for r in records]


def results(database: Path) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute("SELECT benchmark, model, metric, round(value, 9), n FROM results ORDER BY ALL").fetchall()


def test_the_command_runs_what_the_schedule_sensors_and_automation_request(tmp_path):
    from eval_platform.definitions import defs
    from eval_platform.resources import RosterResource
    from eval_platform.schedules.sensors import roster_evaluation_sensor

    # Through the main command, in a process of its own
    command_home, command_db = tmp_path / "command", tmp_path / "command.duckdb"
    command_home.mkdir()
    environment = {**os.environ, "DAGSTER_HOME": str(command_home), "EVAL_WAREHOUSE": str(command_db)}
    command = [str(Path(sys.executable).with_name("eval-platform")), "run", "--benchmarks", BENCHMARK]
    returncode, output = run_to_end([*command, "--limit", str(LIMIT)], 900, cwd=PROJECT_ROOT, env=environment)
    assert returncode == 0, output[-3000:]

    # Through production's triggers: the schedule's tick, each run as the daemon launches it, the
    # run-status sensor on each success, then the automation conditions' tick
    sensor_db = tmp_path / "sensors.duckdb"
    warehouse = {"resources": {"warehouse": {"config": {"database": str(sensor_db)}}}}
    limits = {
        "benchmark_inputs": {"benchmark_raw_rows": {"config": {"limit": LIMIT}}},
        "model_evaluation": {"benchmark_evaluation": {"config": {"limit": LIMIT}}},
    }
    roster = RosterResource()
    (tmp_path / "sensors").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "sensors")) as instance:
        with build_schedule_context(instance, scheduled_execution_time=datetime(2026, 11, 28, 2),
                                    resources={"roster": roster}) as tick:  # fmt: skip
            nightly = defs().resolve_schedule_def("nightly_benchmark_refresh")(tick)
        pending = [r for r in nightly if r.partition_key == BENCHMARK]
        before = evaluate_automation_conditions(defs=defs(), instance=instance)  # the automation sensor's last tick
        while pending:
            request = pending.pop(0)
            result = defs().resolve_job_def(request.job_name).execute_in_process(
                partition_key=request.partition_key, instance=instance, tags=dict(request.tags),
                run_config={**warehouse, "ops": limits[request.job_name]},
            )  # fmt: skip
            assert result.success
            if request.job_name == "benchmark_inputs":
                with build_run_status_sensor_context(
                    sensor_name="roster_evaluation_sensor", dagster_instance=instance,
                    dagster_run=result.dagster_run, dagster_event=result.get_run_success_event(),
                    resources={"roster": roster},
                ) as context:  # fmt: skip
                    pending += roster_evaluation_sensor(context)
        automation = evaluate_automation_conditions(defs=defs(), instance=instance, cursor=before.cursor)
        requested = {key: automation.get_num_requested(AssetKey(key)) for key in ("protocol_scores", "leaderboard")}
        # what score_protocols materialises, and nothing else, though most of the grid is missing
        assert before.total_requested == 0 and requested == {"protocol_scores": 1, "leaderboard": 1}
        assert automation.total_requested == 2
        ran_by_sensors = runs_in_order(instance)

    with DagsterInstance.local_temp(str(command_home)) as instance:
        ran_by_command = runs_in_order(instance)
    evaluations = [(job, partition) for job, partition in ran_by_sensors if job == "model_evaluation"]
    assert len(evaluations) == 2  # both roster entries, the bfloat16 one after its float32 baseline
    assert ran_by_command == [*ran_by_sensors, ("score_protocols", None)]
    assert results(command_db) == results(sensor_db) != []


def test_the_demos_sensor_steps_request_what_their_sensors_request(tmp_path):
    """The era and tally steps ask the planner as era_config_sensor and the filled-sheet sensor do."""
    from eval_platform.cli.demo import DEMO
    from eval_platform.resources import RosterResource
    from eval_platform.schedules.planner import Planner
    from eval_platform.schedules.sensors import era_sensor, filled_sheet_sensor

    eras, blind = tmp_path / "eras", tmp_path / "blind"
    eras.mkdir()
    shutil.copy(PROJECT_ROOT / "data" / "evolution" / "eras" / "phylo-2.json", eras / "phylo-2.json")
    (eras / "second.json").write_text('{"generations": 1}')
    (blind / "filled").mkdir(parents=True)
    (blind / "filled" / "rater.xlsx").write_bytes(b"a filled sheet")
    by_title = {step.trigger: step for step in DEMO}
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        planner = Planner(instance, RosterResource(), eras, blind)
        resources = {"roster": RosterResource()}
        with build_sensor_context(instance=instance, resources=resources) as context:
            era_tick = era_sensor(eras, name="test_eras")(context)
        with build_sensor_context(instance=instance, resources=resources) as context:
            sheet_tick = filled_sheet_sensor(blind, name="test_sheets")(context)
        demo_eras = by_title["era_config_sensor"].requests(planner)
        demo_tally = by_title["blind_eval_filled_sheet_sensor"].requests(planner)

    def described(requests) -> list[tuple]:
        return [(r.job_name, r.partition_key, r.run_config, dict(r.tags)) for r in requests]

    assert [r.partition_key for r in demo_eras] == ["phylo-2", "second"]
    assert described(demo_eras) == [(job or "prompt_evolution_era", *rest) for job, *rest in
                                    described(era_tick.run_requests)]  # fmt: skip
    assert described(demo_tally) == [("blind_evaluation_tally", *described([sheet_tick])[0][1:])]
    assert demo_tally[0].tags == {"filled_sheets": "rater.xlsx"}


def test_the_demos_sampled_step_asks_for_samples_from_the_launchpad_beside_the_commands_limits(tmp_path):
    """The main command's sampled evaluation: one run of the first entry compared with no baseline,
    its launchpad config asking for samples, with the command's limits merged into it, not over it."""
    from eval_platform.cli.demo import DEMO, SAMPLED_DEMO, sampled
    from eval_platform.cli.main import RunOptions
    from eval_platform.cli.runner import Overrides
    from eval_platform.resources import RosterResource
    from eval_platform.schedules.planner import Planner

    step = next(step for step in DEMO if step.requests == sampled)
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        (request,) = step.requests(Planner(instance, RosterResource(), tmp_path, tmp_path))
    assert request.job_name == "model_evaluation"
    assert dict(request.partition_key.keys_by_dimension) == {
        "benchmark": "gsm8k_cot",
        "model": "smollm2-135m-instruct-float32",
    }
    overrides: Overrides = RunOptions(limit=5, max_gen_toks=96).overrides(None)
    config = overrides.run_config(request)["ops"]["benchmark_evaluation"]["config"]
    assert config == {**SAMPLED_DEMO, "limit": 5, "max_gen_toks": 96} and SAMPLED_DEMO["repeats"] == 4
