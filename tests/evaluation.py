"""Materialising benchmarks as the jobs do: a benchmark's inputs (benchmark_inputs), then one roster
model on it (model_evaluation, a benchmark x model partition), with the code location's resources
configured by run config, as the launchpad configures them."""

from pathlib import Path

from dagster import ConfigurableResource, DagsterInstance, materialize

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.roster import RosterEntry, write_entry
from eval_platform.benchmarks.solvers.harness import rows_requests
from eval_platform.common.ingestion import load_rows
from eval_platform.common.models import LoglikelihoodRequest
from eval_platform.definitions import defs
from eval_platform.environment import environment
from eval_platform.evaluation_assets.benchmarks.assets import (
    benchmark_documents,
    benchmark_evaluation,
    benchmark_fewshot_rows,
    benchmark_raw_rows,
)
from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
from eval_platform.resources import RosterResource

INPUTS = [benchmark_raw_rows, benchmark_fewshot_rows, benchmark_documents]
EVALUATION = [benchmark_evaluation]


def roster_with(folder: Path, name: str, **fields) -> RosterResource:
    """The roster in `folder`, with the entry `name` (re)written with `fields`; an entry without a
    model is the evaluation_model resource's."""
    write_entry(folder, RosterEntry(name=name, **fields))
    return RosterResource(directory=str(folder))


def launchpad(**resources: ConfigurableResource | None) -> dict:
    """The resources' settings as launchpad run config: each field that differs from its default."""
    config = {}
    for name, resource in resources.items():
        if resource is not None:
            fields = type(resource).model_fields.items()
            config[name] = {
                "config": {
                    field: getattr(resource, field)
                    for field, info in fields
                    if getattr(resource, field) != info.get_default(call_default_factory=True)
                    and not hasattr(getattr(resource, field), "get_resource_definition")  # a resource it depends on
                }
            }
    return config


def materialize_configured(assets, settings: dict[str, ConfigurableResource | None], ops: dict | None = None, **kwargs):
    """Materialise `assets` with the code location's resources, `settings` given as the launchpad
    gives them (run config), and the op config `ops`."""
    return materialize(
        assets, resources=defs().resources, run_config={"resources": launchpad(**settings), "ops": ops or {}}, **kwargs
    )


def with_partitions(instance: DagsterInstance | None, benchmark: str, *models: str) -> DagsterInstance:
    """The instance (an ephemeral one by default) with the benchmark and the roster models in their
    dimensions, as the roster sensor and the main command add them."""
    instance = instance or DagsterInstance.ephemeral()
    for dimension, keys in ((benchmark_partitions, [benchmark]), (roster_partitions, list(models))):
        missing = [key for key in keys if key not in instance.get_dynamic_partitions(dimension.name)]
        if missing:
            instance.add_dynamic_partitions(dimension.name, missing)
    return instance


def materialize_inputs(
    warehouse,
    benchmark: str,
    limit: int | None = None,
    source=None,
    assets=INPUTS,
    instance=None,
    raise_on_error: bool = True,
):
    config = {"limit": limit, **({"file": str(source)} if source else {})}
    return materialize_configured(
        assets,
        {"warehouse": warehouse},
        {"benchmark_raw_rows": {"config": config}},
        partition_key=benchmark,
        instance=with_partitions(instance, benchmark),
        raise_on_error=raise_on_error,
    )


def materialize_evaluation(
    warehouse,
    benchmark: str,
    name: str,
    roster: RosterResource,
    settings: dict | None = None,
    evaluation_model=None,
    gateway=None,
    assets=EVALUATION,
    instance=None,
    raise_on_error: bool = True,
    ops: dict | None = None,
):
    """Materialise `assets` for the roster model `name` on `benchmark` (its partition added first),
    with the evaluation's launchpad config `settings` and the op config `ops`."""
    instance = with_partitions(instance, benchmark, name)
    ops = {
        **({"benchmark_evaluation": {"config": settings}} if settings and benchmark_evaluation in assets else {}),
        **(ops or {}),
    }
    settings = {"warehouse": warehouse, "roster": roster, "gateway": gateway, "evaluation_model": evaluation_model}
    return materialize_configured(
        assets,
        settings,
        ops,
        partition_key=evaluation_key(benchmark, name),
        instance=instance,
        raise_on_error=raise_on_error,
    )


def materialize_benchmark(
    warehouse, benchmark: str, roster: RosterResource, name: str, limit: int | None = None, **evaluation
):
    """A benchmark's inputs (its first `limit` rows), then the roster model on it: the evaluation's result."""
    assert materialize_inputs(warehouse, benchmark, limit).success
    return materialize_evaluation(warehouse, benchmark, name, roster, **evaluation)


def dataset_requests(name: str, rows: int) -> list[LoglikelihoodRequest]:
    """The harness's requests (the declared shots) for a declared dataset's first rows, as the
    `harness` solver would ask them."""
    benchmark = declared_benchmarks(environment().benchmarks_dir)[name]
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    built = rows_requests(benchmark, load_rows(benchmark.dataset.file, None, None, rows).rows)
    return [LoglikelihoodRequest(c, k) for requests, _ in built.values() for c, k in requests]


def failure_message(result) -> str:
    """The run's one step failure: the error its asset raised."""
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    return failure.step_failure_data.error.cause.message
