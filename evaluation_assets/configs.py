"""Launchpad configs derived from the library's settings models, so a field is declared once: each
field optional (unset: the declaration's, roster entry's or resource's value), tuples as lists."""

from __future__ import annotations

import typing
from typing import Any, Optional

from dagster import Config
from pydantic import BaseModel, Field, create_model


def _launchpad_type(annotation: Any) -> Any:
    """A field's type as Dagster's config takes it: a tuple as a list."""
    if typing.get_origin(annotation) is tuple:
        return list[typing.get_args(annotation)[0]]  # type: ignore[misc]
    if typing.get_origin(annotation) in (typing.Union, type(int | None)):
        return typing.Union[tuple(_launchpad_type(arg) for arg in typing.get_args(annotation))]  # noqa: UP007
    return annotation


def optional_config(model: type[BaseModel], **extra: Any) -> type[Config]:
    """A Dagster `Config` base with every field of `model`, optional, and `extra` fields (a launchpad
    config subclasses it, with its own name and docstring)."""
    fields: dict[str, Any] = {
        field: (Optional[_launchpad_type(info.annotation)], Field(default=None, description=info.description))  # noqa: UP045
        for field, info in model.model_fields.items()
    }
    return create_model(f"Optional{model.__name__}", __base__=Config, **fields, **extra)


def config_class(model: type[BaseModel], **extra: Any) -> type[Config]:
    """A Dagster `Config` base with every field of `model` and its default, and `extra` fields (a
    launchpad config subclasses it, with its own name and docstring)."""
    fields: dict[str, Any] = {
        field: (
            _launchpad_type(info.annotation),
            Field(
                default=list(info.default) if isinstance(info.default, tuple) else info.default,
                description=info.description,
            ),
        )
        for field, info in model.model_fields.items()
    }
    return create_model(f"{model.__name__}Fields", __base__=Config, **fields, **extra)


def set_fields(config: Config, model: type[BaseModel]) -> dict[str, Any]:
    """The fields of `model` the launchpad set (not None)."""
    return {field: value for field in model.model_fields if (value := getattr(config, field)) is not None}
