"""The one registry mechanism every extension point uses (`eval_platform.registry`): a reference is
imported at its first lookup, not before; `module:Class` is made and registered under its own name;
an unknown name is refused naming the registered ones; and each extension point is such a registry."""

import sys

import pytest

from eval_platform.registry import Registry, RegistryError, extension_points

PLUGIN = '''
class Cloze:
    """Asks by cloze."""

    name = "cloze"


def shout(text):
    return text.upper()
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An importable module of another package, not yet imported."""
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_plugin", raising=False)
    yield "my_plugin"
    sys.modules.pop("my_plugin", None)


def solvers() -> Registry:
    return Registry("test solver", made=lambda found: found() if isinstance(found, type) else found,
                    name_of=lambda entry: entry.name)  # fmt: skip


def test_a_reference_is_imported_at_its_first_lookup_not_when_registered(plugin):
    filters = Registry("test filter")
    filters.register("shout", f"{plugin}:shout")
    assert plugin not in sys.modules and filters.names() == ["shout"]
    assert filters.get("shout")("quiet") == "QUIET" and plugin in sys.modules


def test_a_module_class_name_is_made_and_registered_under_its_own_name(plugin):
    registry = solvers()
    made = registry.get(f"{plugin}:Cloze")
    assert type(made).__name__ == "Cloze" and registry.names() == ["cloze"] and registry.get("cloze") is made
    assert registry.entries()[0].reference == f"{plugin}:Cloze" and registry.entries()[0].summary == "Asks by cloze."


def test_a_decorated_entry_and_an_alias_are_looked_up_in_the_same_place():
    registry = Registry("test filter", aliases={"old": "new"})

    @registry.register("new")
    def new(text):
        return text

    assert registry.get("old") is registry.get("new") is new


def test_an_unknown_name_is_refused_naming_the_registered_ones(plugin):
    class Unknown(ValueError):
        pass

    registry = Registry("test judge", error=Unknown)
    registry.register("written", object())
    with pytest.raises(Unknown, match=r"unknown test judge 'guess': registered are \['written'\]"):
        registry.get("guess")
    with pytest.raises(Unknown, match="unknown test judge 'my_plugin:Missing'"):
        registry.get(f"{plugin}:Missing")
    with pytest.raises(RegistryError, match="unknown test solver 'json:dumps'"):  # a function has no solver's name
        solvers().get("json:dumps")
    registry.register("broken", "no_such_module:thing")
    with pytest.raises(Unknown, match="test judge 'broken' is registered as 'no_such_module:thing', which does not"):
        registry.get("broken")


def test_every_extension_point_is_a_registry_with_its_built_in_entries():
    """(Other tests of the same process may have registered more: a guide's judge, solver.)"""
    points = extension_points()
    built_in = {
        "model backend": {"", "local/", "served/"},
        "solver": {"choices", "generate", "harness", "letter"},
        "answer filter": {"flexible-extract", "strict-match"},
        "judge": {"probabilities", "written"},
        "parser": {"arc", "gsm8k", "gsm8k_cot", "hellaswag", "mmlu", "truthfulqa", "truthfulqa_mc2", "winogrande"},
    }
    assert all(names <= set(points[kind].names()) for kind, names in built_in.items())
    with pytest.raises(RegistryError, match="unknown model backend 'nothing'"):
        points["model backend"].get("nothing")
