"""Prompt evolution: the genetic algorithm, the fitness formula, the judges and the era's tables;
their store, assets, checks, jobs and era sensor."""
