"""Pure logic (prompt building, scoring, fitness, judging, the genetic algorithm, blind sheets and
tallies) and the model backends. Nothing here knows Dagster or the warehouse."""
