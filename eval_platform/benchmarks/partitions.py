"""A benchmark's inputs are partitioned by benchmark; its evaluation by benchmark x model, the model
dimension holding the roster's names (so the UI shows which model was evaluated on which benchmark).
A spec's benchmark and a harness benchmark have the same two dimensions, so their partitions read
alike (`arc_easy|<model>`, `leaderboard_bbh|<model>`)."""

from dagster import (
    DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition, StaticPartitionsDefinition,
)

from eval_platform.benchmarks.specs import BENCHMARKS

benchmark_partitions = StaticPartitionsDefinition(list(BENCHMARKS))
roster_partitions = DynamicPartitionsDefinition(name="roster_models")
evaluation_partitions = MultiPartitionsDefinition({"benchmark": benchmark_partitions, "model": roster_partitions})


def evaluation_key(benchmark: str, model: str) -> MultiPartitionKey:
    """The partition of one roster model on one benchmark, of either kind."""
    return MultiPartitionKey({"benchmark": benchmark, "model": model})


def partition_names(key: MultiPartitionKey) -> tuple[str, str]:
    """The benchmark and the roster model's name of an evaluation partition, of either kind."""
    return key.keys_by_dimension["benchmark"], key.keys_by_dimension["model"]


# lm-evaluation-harness benchmarks (harness_tasks.py): a benchmark declared in data/harness/, or any
# harness task or group added by name in the UI (its data from the launchpad), x the roster's models
harness_task_partitions = DynamicPartitionsDefinition(name="harness_tasks")
harness_evaluation_partitions = MultiPartitionsDefinition({"benchmark": harness_task_partitions,
                                                           "model": roster_partitions})
