"""Settings declared once and reused: a model's fields, each made optional, for the places that set
only some of them (a roster entry over the resource's model settings, a launchpad config over a
declaration's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Optional

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo


def optional_fields(
    model: type[BaseModel], include: Sequence[str] | None = None, exclude: Sequence[str] = ()
) -> dict[str, Any]:
    """A model's fields as `pydantic.create_model` takes them, each optional (None: not set), their
    constraints and descriptions kept."""

    def optional(info: FieldInfo) -> Any:
        return Optional[Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation]  # noqa: UP045

    return {
        name: (optional(info), Field(default=None, description=info.description))
        for name, info in model.model_fields.items()
        if (include is None or name in include) and name not in exclude
    }
