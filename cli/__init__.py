"""`eval-platform`, the main command (cli/main.py): the demo walked through the planner's steps
(cli/runner.py runs them in this process), Dagster's UI beside the sample viewer (cli/supervisor.py),
the sample viewer alone and the warehouse mover (cli/moving.py)."""
