"""What every asset check reports: how many rows offend, and the first few."""

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue


def listed_rows(rows: list[tuple], none: str, at_most: int = 10) -> MetadataValue:
    return MetadataValue.md("\n".join(f"- {row}" for row in rows[:at_most]) or f"_{none}_")


def check_result(offenders: list[tuple], what: str, severity=AssetCheckSeverity.ERROR, **more) -> AssetCheckResult:
    return AssetCheckResult(
        passed=not offenders,
        severity=severity,
        metadata={"offending_rows": len(offenders), "examples": listed_rows(offenders, f"no {what}"), **more},
    )
