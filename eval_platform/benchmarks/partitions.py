"""One partition per benchmark."""

from dagster import StaticPartitionsDefinition

from eval_platform.benchmarks.specs import BENCHMARKS

benchmark_partitions = StaticPartitionsDefinition(list(BENCHMARKS))
