"""The nightly schedule and the sensors (thin: the code lives in `eval_platform.schedules`)."""

from eval_platform.schedules import ALL_SCHEDULES, ALL_SENSORS

__all__ = ["ALL_SCHEDULES", "ALL_SENSORS"]
