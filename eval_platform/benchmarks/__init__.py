"""Benchmark validation: specs, harness-format prompts, predictions, scores, comparisons and
protocols; their store, assets, checks, jobs and nightly schedule."""
