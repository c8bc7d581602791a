"""The sensor that tallies newly filled blind-evaluation sheets."""

import hashlib
import json
from pathlib import Path

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SkipReason, sensor

from eval_platform.blind.jobs import blind_evaluation_tally_job
from eval_platform.common.resources import BLIND_EVAL_DIR


def filled_sheet_sensor(blind_eval_dir: Path = BLIND_EVAL_DIR, name: str = "blind_eval_filled_sheet_sensor"):
    """A sensor that requests a tally when a filled sheet appears in (or changes in) <dir>/filled."""
    folder = Path(blind_eval_dir) / "filled"

    @sensor(
        name=name,
        job=blind_evaluation_tally_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description=f"Tallies the blind evaluation when a filled sheet is dropped into {folder}.",
    )
    def _sensor(context: SensorEvaluationContext):
        sheets = {p.name: p.stat().st_mtime for p in sorted(folder.glob("*.xls*")) if not p.name.startswith("~$")}
        seen = json.loads(context.cursor) if context.cursor else {}
        changed = sorted(name for name, mtime in sheets.items() if seen.get(name) != mtime)
        if not changed:
            return SkipReason(f"No new or changed filled sheet in {folder}")
        context.update_cursor(json.dumps(sheets))
        config = {"folder": str(blind_eval_dir)}
        return RunRequest(
            run_key=hashlib.sha256(json.dumps(sheets, sort_keys=True).encode()).hexdigest()[:16],
            run_config={"ops": {"blind_eval_scores": {"config": config}}},
            tags={"filled_sheets": ",".join(changed)},
        )

    return _sensor


blind_eval_filled_sheet_sensor = filled_sheet_sensor()
