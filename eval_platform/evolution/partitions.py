"""Each prompt-evolution era is a partition, added from the launchpad, by the era sensor or the main command."""

from dagster import DynamicPartitionsDefinition

era_partitions = DynamicPartitionsDefinition(name="eras")
