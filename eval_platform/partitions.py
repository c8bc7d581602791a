"""Partitions of the asset graph."""

from dagster import StaticPartitionsDefinition

from eval_platform.core.benchmarks import BENCHMARKS

benchmark_partitions = StaticPartitionsDefinition(list(BENCHMARKS))
