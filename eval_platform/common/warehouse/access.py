"""Declared table access: each store method names the tables it reads and writes (`@reads`,
`@writes`), and a statement naming a store's table outside its method's declaration raises, so the
declarations are the truth that tests check the asset graph against. The outermost write runs in
one transaction, re-run whole when its commit conflicts with another writer's."""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar, cast

Method = TypeVar("Method", bound=Callable[..., object])
TABLE_NAMES: set[str] = set()  # every table and view of every store, to recognise a statement's tables
_allowed: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar("allowed_tables", default=None)


class _Writing(Protocol):
    """What a declared method needs of its store (Store has it)."""

    in_transaction: bool

    def retrying_conflicts(
        self,
        method: Callable[..., object],
        tables: Sequence[str],
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> object: ...


def _access(kind: str, tables: Sequence[str]) -> Callable[[Method], Method]:
    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        def wrapper(self: _Writing, *args: object, **kwargs: object) -> object:
            outer = _allowed.get()
            token = _allowed.set(frozenset(tables) | (outer or frozenset()))
            try:
                written = table_access(wrapper)["writes"]
                if written and not self.in_transaction:  # the outermost write: re-run whole on a conflict
                    return self.retrying_conflicts(method, written, args, kwargs)
                return method(self, *args, **kwargs)
            finally:
                _allowed.reset(token)

        wrapper.table_access = {**table_access(method), kind: tuple(tables)}  # type: ignore[attr-defined]
        return cast(Method, wrapper)

    return decorate


def reads(*tables: str) -> Callable[[Method], Method]:
    """Declare the tables (or views) a store method reads."""
    return _access("reads", tables)


def writes(*tables: str) -> Callable[[Method], Method]:
    """Declare the tables a store method writes (it may read them too)."""
    return _access("writes", tables)


def table_access(method: Callable[..., object]) -> dict[str, tuple[str, ...]]:
    """{'reads': (...), 'writes': (...)} as declared on a store method."""
    return getattr(method, "table_access", {"reads": (), "writes": ()})


def check_declared(owner: str, statement: str) -> None:
    """Raise if the statement names a table that the store method running it did not declare."""
    allowed = _allowed.get()
    if allowed is None:
        return
    undeclared = {name for name in TABLE_NAMES if re.search(rf"\b{name}\b", statement)} - allowed
    if undeclared:
        raise AssertionError(f"{owner} touched undeclared table(s) {sorted(undeclared)}")
