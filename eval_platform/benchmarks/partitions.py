"""Every benchmark, of either kind, is a key of one dynamic benchmark dimension: a spec's inputs are
partitioned by it, and every evaluation by benchmark x model, so one job (`model_evaluation`)
evaluates a roster model on a spec's benchmark or on a harness benchmark, whichever the name is.
The benchmark dimension holds the specs' names and the harness benchmarks' (declared in
data/harness/, or any harness task added by name in the UI, its data from the launchpad); the model
dimension the roster's names (so the UI shows which model was evaluated on which benchmark). Keys
read `<benchmark>|<model>` (`arc_easy|smollm2`, `leaderboard_bbh|smollm2`)."""

from dagster import DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

benchmark_partitions = DynamicPartitionsDefinition(name="benchmarks")
roster_partitions = DynamicPartitionsDefinition(name="roster_models")
evaluation_partitions = MultiPartitionsDefinition({"benchmark": benchmark_partitions, "model": roster_partitions})


def evaluation_key(benchmark: str, model: str) -> MultiPartitionKey:
    """The partition of one roster model on one benchmark, of either kind."""
    return MultiPartitionKey({"benchmark": benchmark, "model": model})


def partition_names(key: MultiPartitionKey) -> tuple[str, str]:
    """The benchmark and the roster model's name of an evaluation partition, of either kind."""
    return key.keys_by_dimension["benchmark"], key.keys_by_dimension["model"]
