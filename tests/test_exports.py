"""The curated public surface: every exported name exists, and every exception is exported."""

import importlib
import pkgutil

import pytest

import clearance
from clearance.errors import ClearanceError

PUBLIC = [
    "clearance",
    "clearance.errors",
    "clearance.stores",
    "clearance.types",
    "clearance.policy",
    "clearance.guardrails",
    "clearance.policy.cedar",
]


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_exported_name_exists(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module_name}.{name}"


def _subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        found |= {sub} | _subclasses(sub)
    return found


def test_every_exception_is_exported_where_it_is_defined() -> None:
    for info in pkgutil.walk_packages(clearance.__path__, "clearance."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    for exc in _subclasses(ClearanceError):
        if not exc.__module__.startswith("clearance") or exc.__name__.startswith("_"):
            continue
        module = importlib.import_module(exc.__module__)
        exported = set(getattr(module, "__all__", ())) | set(clearance.__all__)
        assert exc.__name__ in exported, f"{exc.__module__}.{exc.__name__} is not in __all__"
        tree = importlib.import_module("clearance.errors").__doc__ or ""
        assert exc.__name__ in tree, f"{exc.__name__} is missing from the tree in clearance.errors"
