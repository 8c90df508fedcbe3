"""Imports every verb module at once, so that each registers itself on the root group.

:data:`clearance.cli.main.cli` imports a verb only when it is used; this is for whoever
wants every verb registered up front (the tests that walk ``cli.commands``)."""

import importlib

from clearance.cli.main import VERBS

for _verb in VERBS.values():
    for _module in _verb.modules:
        importlib.import_module(_module)

__all__: list[str] = []
