"""The roster resource, and how a roster entry's settings combine with the model resources'."""

import os
from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from eval_platform.benchmarks.roster import RosterEntry, RosterError, load_roster
from eval_platform.common.resources import DATA_DIR, LanguageModelResource, ModelGatewayResource

ROSTER_DIR = Path(os.environ.get("EVAL_ROSTER_DIR", str(DATA_DIR / "roster")))


class RosterResource(ConfigurableResource):
    """The roster folder: one file per model (see eval_platform/benchmarks/roster.py)."""

    directory: str = Field(
        default=str(ROSTER_DIR),
        description="The roster folder: one YAML or JSON file per model. Default: EVAL_ROSTER_DIR, else data/roster/.",
    )

    def entries(self) -> dict[str, RosterEntry]:
        return load_roster(self.directory)

    def entry(self, name: str) -> RosterEntry:
        roster = self.entries()
        if name not in roster:
            raise RosterError(
                f"No roster entry named {name!r} in {self.directory} (entries: {sorted(roster)}); add {name}.yaml there"
            )
        return roster[name]


def entry_model(entry: RosterEntry, defaults: LanguageModelResource) -> LanguageModelResource:
    """The evaluation_model resource's settings with the roster entry's on top."""
    values = {field: getattr(defaults, field) for field in LanguageModelResource.model_fields}
    return LanguageModelResource(**{**values, **entry.settings()})


def entry_gateway(entry: RosterEntry, defaults: ModelGatewayResource) -> ModelGatewayResource:
    """The gateway resource's settings, with the roster entry's server where it names one."""
    values = {field: getattr(defaults, field) for field in ModelGatewayResource.model_fields}
    return ModelGatewayResource(**{**values, **({"api_base": entry.api_base} if entry.api_base else {})})
