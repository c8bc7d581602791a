"""A team's hosts started all at once on a fresh database, as docs/operations/team.md sets them up:
`eval-platform migrate` once, then every host. A host that opens Dagster's storage and finds no
tables creates them; on a fresh database, hosts doing so at once race, PostgreSQL refuses one
(`type "runs" already exists`) and that host dies at start-up."""

import os
import sys
import time

import pytest

from tests.team.team_deployment import TeamDeployment, dagster_query, start_logged, team_deployment

WORKERS = 3  # with the daemon, four hosts opening Dagster's storage at the same instant
DAEMONS = {"SCHEDULER", "SENSOR", "QUEUED_RUN_COORDINATOR"}  # deploy/team/dagster.yaml's queue among them


def test_every_host_started_at_the_same_instant_on_a_fresh_database_comes_up(tmp_path):
    # The fixture fails at once, with the worker's log, if a worker exits before it answers.
    with team_deployment(tmp_path, workers=WORKERS, daemon=True, lake=True) as team:
        with team.instance() as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            deadline = time.monotonic() + 300
            while not DAEMONS <= set(instance.get_daemon_heartbeats()):
                assert team.daemon.poll() is None, f"the daemon exited: {team.log('daemon')}"
                assert time.monotonic() < deadline, f"the daemon's heartbeats are missing: {team.log('daemon')}"
                time.sleep(0.5)
        assert all(worker.poll() is None for worker in team.workers.values())
        # Deterministic, however the start's timing falls: no host created any of Dagster's tables,
        # indexes or types (the catalog rows of a transaction after the migration), so none can race.
        created_by_hosts = dagster_query(
            team,
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            f"AND xmin::text::bigint > {team.migrated_before} ORDER BY relname",
        )
        assert created_by_hosts == []


def test_waiting_for_workers_stops_at_one_that_exited_and_shows_its_log(tmp_path):
    team = TeamDeployment(
        tmp_path,
        {**os.environ, "EVAL_CELERY_BROKER": "redis://127.0.0.1:1/0", "EVAL_CELERY_BACKEND": "redis://127.0.0.1:1/1"},
    )
    with team.stack:
        worker = start_logged(team, "worker-host-1", [sys.executable, "-c", "print('the cause, in its log'); exit(3)"])
        team.workers["host-1"] = worker
        worker.wait()
        with pytest.raises(
            RuntimeError, match=r"(?s)Celery worker host-1 exited \(3\) at start-up:.*the cause, in its log"
        ):
            team.wait_for_workers()
