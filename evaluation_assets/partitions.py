"""The partitions: every benchmark is a key of one dynamic benchmark dimension, every roster entry a
key of the model dimension, and an evaluation a benchmark x model partition (`arc_easy|smollm2`), so
one job evaluates any roster model on any benchmark; every era is a key of its own dimension."""

from dagster import DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

BENCHMARKS, ROSTER_MODELS, ERAS = "benchmarks", "roster_models", "eras"  # the dynamic partitions' names
benchmark_partitions = DynamicPartitionsDefinition(name=BENCHMARKS)
roster_partitions = DynamicPartitionsDefinition(name=ROSTER_MODELS)
evaluation_partitions = MultiPartitionsDefinition({"benchmark": benchmark_partitions, "model": roster_partitions})
era_partitions = DynamicPartitionsDefinition(name=ERAS)


def evaluation_key(benchmark: str, model: str) -> MultiPartitionKey:
    """The partition of one roster model on one benchmark."""
    return MultiPartitionKey({"benchmark": benchmark, "model": model})


def partition_names(key: str | MultiPartitionKey) -> tuple[str, str]:
    """The benchmark and the roster model's name of an evaluation partition."""
    assert isinstance(key, MultiPartitionKey), key
    return key.keys_by_dimension["benchmark"], key.keys_by_dimension["model"]
