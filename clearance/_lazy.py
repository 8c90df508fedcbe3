"""Public names a package imports when they are first read (PEP 562), not when it is.

A package's ``__init__`` that imports every public name at once makes every importer pay
for all of them: ``clearance asks list`` would load the harness, pydantic and Cedar to print
a table (issue 34). A package that uses this keeps its names in ``__all__`` and under
``if TYPE_CHECKING:`` (for type checkers), and hands :func:`lazy_attributes` where each
lives; ``from package import name`` and ``package.name`` work as before.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, where: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, whose names ``where``
    lists by the module that defines them (``{"clearance.tuning._corpus": ("CorpusCall",
    ...)}``). A name is imported once: it is then set on the package, where later reads
    find it without the hook."""
    home = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> object:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(vars(sys.modules[package]).keys() | home.keys())

    return __getattr__, __dir__
