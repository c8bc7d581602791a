"""The benchmark domain's store: its schema (schema.py), its views (views/*.sql) and the stores that
read and write it, one per part of the graph: inputs (a dataset's rows and documents), evaluations
(answers, samples, results, runs, history), comparisons, and protocols with the leaderboard. Every
write replaces one partition's rows in one transaction, so a re-run never duplicates and a crash
never leaves half a partition."""

from eval_platform.benchmarks.store.comparisons import ComparisonStore
from eval_platform.benchmarks.store.evaluations import EvaluationStore
from eval_platform.benchmarks.store.inputs import InputStore
from eval_platform.benchmarks.store.leaderboard import LeaderboardStore
from eval_platform.benchmarks.store.schema import BenchmarkSchema

__all__ = ["BenchmarkSchema", "ComparisonStore", "EvaluationStore", "InputStore", "LeaderboardStore"]
