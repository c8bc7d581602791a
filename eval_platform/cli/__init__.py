"""`eval-platform`, the main command (main.py): the demo walked through the planner's steps
(runner.py runs them in this process), Dagster's UI beside the sample viewer (supervisor.py), the
sample viewer alone and the warehouse mover (moving.py)."""
