"""inspect_ai's own reading of a log, for tests/benchmarks/test_exports.py.

Run in the peer interpreter (.venv-peers/bin/python, which `make test` installs), never beside
eval_platform: `python -I inspect_log_reader.py LOG` prints JSON: the log's status, task, model and
metadata, each sample (id, epoch, input, target, completion, scores, metadata), the reductions and
the results, as `inspect_ai.log.read_eval_log` gives them.
"""

import json
import sys
from importlib.metadata import version

from inspect_ai.log import read_eval_log

assert not any(name.split(".")[0] == "eval_platform" for name in sys.modules)


def main(path: str) -> None:
    log = read_eval_log(path)
    assert log.results is not None and log.samples is not None
    print(
        json.dumps(
            {
                "inspect_ai": version("inspect_ai"),
                "status": log.status,
                "task": log.eval.task,
                "model": log.eval.model,
                "epochs": log.eval.config.epochs,
                "metadata": log.eval.metadata,
                "samples": [
                    {
                        "id": sample.id,
                        "epoch": sample.epoch,
                        "input": sample.input,
                        "target": sample.target,
                        "completion": sample.output.completion,
                        "scores": {name: score.value for name, score in (sample.scores or {}).items()},
                        "metadata": sample.metadata,
                    }
                    for sample in log.samples
                ],
                "reductions": {
                    reduction.scorer: {str(s.sample_id): s.value for s in reduction.samples}
                    for reduction in log.reductions or []
                },
                "results": {score.name: {m: v.value for m, v in score.metrics.items()} for score in log.results.scores},
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
