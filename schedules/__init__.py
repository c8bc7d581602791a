"""The nightly schedule and the sensors (thin: the code lives in each domain's `schedules.py` and `sensors.py`)."""

from eval_platform.definitions import ALL_SCHEDULES, ALL_SENSORS

__all__ = ["ALL_SCHEDULES", "ALL_SENSORS"]
