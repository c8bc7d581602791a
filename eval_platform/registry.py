"""One mechanism for every extension point: a `Registry` of named entries.

An entry is registered under a name, as an object (`register`, also a decorator) or as a reference
`module:attribute`, imported only when the name is first looked up (so registering one costs nothing
at import time). A name that is not registered may itself be a reference, `module:Class` or
`module:function`: looked up, it is imported and registered. Each extension point is one registry,
made beside what it extends and listed by `extension_points` (and in the generated reference):

- model backends (`eval_platform.common.models.BACKENDS`), by a model name's prefix;
- solvers (`eval_platform.benchmarks.solvers.base.SOLVERS`);
- parsers and answer filters (`eval_platform.benchmarks.parsers.PARSERS`, `ANSWER_FILTERS`);
- judges (`eval_platform.common.judges.JUDGES`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
E = TypeVar("E")  # what is registered, as given

# The modules that make the extension points' registries (`extension_points` lists theirs).
REGISTRY_MODULES = (
    "eval_platform.common.models",
    "eval_platform.benchmarks.solvers.base",
    "eval_platform.benchmarks.parsers",
    "eval_platform.common.judges",
)


class RegistryError(ValueError):
    """A name that is neither registered nor an importable `module:attribute`."""


@dataclass(frozen=True)
class Entry:
    """A registered name, for the reference: what it is (`module:attribute`) and its summary."""

    name: str
    reference: str
    summary: str


def import_reference(reference: str) -> object:
    """The object `module:attribute` names; an ImportError, AttributeError or ValueError where it
    names none."""
    module, colon, attribute = reference.partition(":")
    if not colon or not module or not attribute:
        raise ValueError(f"{reference!r} is not of the form module:attribute")
    found: object = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


class Registry(Generic[T]):
    """The named entries of one extension point.

    `kind` names it in errors ("unknown solver 'x'"); `made` turns what a reference names into an
    entry (a class into its instance, for solvers and judges); `name_of` gives an entry made from a
    reference its own name (a solver's or judge's `name`), else it is known by the reference;
    `builtins` are the modules that register the built-in entries, imported at the first lookup;
    `aliases` are older names; `error` is the ValueError an unknown name raises."""

    def __init__(
        self,
        kind: str,
        *,
        made: Callable[[Any], T] | None = None,
        name_of: Callable[[T], str | None] | None = None,
        builtins: Sequence[str] = (),
        aliases: Mapping[str, str] | None = None,
        error: type[ValueError] = RegistryError,
    ) -> None:
        self.kind = kind
        self._made = made or (lambda found: found)
        self._name_of = name_of or (lambda entry: None)
        self._builtins = tuple(builtins)
        self.aliases = dict(aliases or {})
        self._error = error
        self._entries: dict[str, T | str] = {}

    @overload
    def register(self, name: str, entry: None = None) -> Callable[[E], E]: ...

    @overload
    def register(self, name: str, entry: E) -> E: ...

    def register(self, name: str, entry: object = None) -> object:
        """`entry` under `name`: an object (made an entry as a reference's would be: a class its
        instance, for solvers and judges), or `module:attribute`, imported when first looked up;
        without `entry`, a decorator registering what it decorates."""
        if entry is not None:
            self._entries[name] = entry if isinstance(entry, str) else self._made(entry)
            return entry

        def decorator(found: E) -> E:
            self._entries[name] = self._made(found)
            return found

        return decorator

    def add(self, entry: T) -> T:
        """`entry` under its own name (`name_of`)."""
        name = self._name_of(entry)
        if not name:
            raise ValueError(f"a {self.kind} registered without a name needs one: register(name, entry)")
        self._entries[name] = entry
        return entry

    def _load_builtins(self) -> None:
        for module in self._builtins:
            importlib.import_module(module)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self._load_builtins()
        return sorted(self._entries)

    def get(self, name: str) -> T:
        """The entry registered under `name` (or an alias of it), else the one the reference `name`
        names, registered; an unknown name raises the registry's error naming every registered one."""
        self._load_builtins()
        name = self.aliases.get(name, name)
        if name in self._entries:
            return self._resolved(name)
        try:
            entry = self._made(import_reference(name))
            own = self._name_of(entry)  # a solver's or judge's own name: not one, where it has none
        except (ImportError, AttributeError, ValueError, TypeError) as error:
            raise self._error(
                f"unknown {self.kind} {name!r}: registered are {sorted(self._entries)}, or name module:attribute"
            ) from error
        self._entries[own or name] = entry
        return entry

    def _resolved(self, name: str) -> T:
        entry = self._entries[name]
        if not isinstance(entry, str):
            return entry
        try:  # a reference, imported at its first use
            made = self._entries[name] = self._made(import_reference(entry))
        except (ImportError, AttributeError, ValueError, TypeError) as error:
            raise self._error(f"{self.kind} {name!r} is registered as {entry!r}, which does not import") from error
        return made

    def entries(self) -> list[Entry]:
        """Every registered entry, for the reference, without importing a reference's module."""
        self._load_builtins()
        return [_entry(name, entry) for name, entry in sorted(self._entries.items())]


def _entry(name: str, entry: object) -> Entry:
    """An entry as the reference shows it: a function or class itself; an instance by the function
    it wraps (a parser's), else by its class."""
    if isinstance(entry, str):
        return Entry(name, entry, "")
    wrapped = [value for value in getattr(entry, "__dict__", {}).values() if inspect.isfunction(value)]
    found = entry if inspect.isfunction(entry) or inspect.isclass(entry) else (wrapped or [type(entry)])[0]
    summary = (inspect.getdoc(found) or "").split("\n\n")[0].replace("\n", " ")
    return Entry(name, f"{found.__module__}:{found.__qualname__}", summary)


def extension_points() -> dict[str, Registry[object]]:
    """Every extension point's registry (those REGISTRY_MODULES make), by its kind."""
    modules = [importlib.import_module(module) for module in REGISTRY_MODULES]
    return {value.kind: value for module in modules for value in vars(module).values() if isinstance(value, Registry)}
