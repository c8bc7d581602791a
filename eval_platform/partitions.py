"""Partitions of the asset graph."""

from dagster import DynamicPartitionsDefinition, StaticPartitionsDefinition

from eval_platform.core.benchmarks import BENCHMARKS

benchmark_partitions = StaticPartitionsDefinition(list(BENCHMARKS))

# Each prompt-evolution era is a partition, added from the launchpad, by the era sensor or the main command.
era_partitions = DynamicPartitionsDefinition(name="eras")
