"""A page's query parameters, read with their types and bounds: a value that cannot be one is a
clear error (a 404 page naming it), never a guess."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request

from eval_platform.viewer.warehouse import ViewerInputError

MAX_TEXT = 500  # characters of any one parameter


def text(request: Request, name: str) -> str | None:
    """The parameter's value, or None where it is missing or empty."""
    value = request.query_params.get(name)
    if value is not None and len(value) > MAX_TEXT:
        raise ViewerInputError(f"{name} is longer than {MAX_TEXT} characters")
    return value or None


def required(request: Request, name: str) -> str:
    value = text(request, name)
    if value is None:
        raise ViewerInputError(f"this page needs the parameter {name}")
    return value


def integer(request: Request, name: str, default: int | None = None, low: int = 0, high: int = 2**31 - 1) -> int:
    value = text(request, name)
    if value is None:
        if default is None:
            raise ViewerInputError(f"this page needs the parameter {name}")
        return default
    try:
        number = int(value)
    except ValueError:
        raise ViewerInputError(f"{name} must be a whole number, not {value!r}") from None
    if not low <= number <= high:
        raise ViewerInputError(f"{name} must be between {low} and {high}, not {number}")
    return number


def choice(request: Request, name: str, options: Iterable[str]) -> str | None:
    """The parameter's value where it is one of `options` (None where it is missing)."""
    value, allowed = text(request, name), list(options)
    if value is not None and value not in allowed:
        raise ViewerInputError(f"{name} must be one of {allowed}, not {value!r}")
    return value
