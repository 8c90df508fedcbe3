"""The ``clearance`` command line: one module per verb, each registering itself on the
root group (:data:`clearance.cli.main.cli`) when :mod:`clearance.cli.commands` imports it.

Importing this package registers every verb, so :func:`main` (the console script) and
:data:`cli` are complete wherever they are reached from. Shared parts: ``main`` (the root
group, exit codes, :func:`~clearance.cli.main.fail`), ``_options`` (``--config``,
``--principal``), ``_render`` (JSON, tables, status words), ``_live`` (the live log of a
session), ``_prompt`` (answering asks on the terminal), ``_scripted`` (driving a scripted
session for ``run`` and ``demo``).
"""

from clearance.cli import commands  # noqa: F401  (registers the verbs on the root group)
from clearance.cli.main import cli, main

__all__ = ["cli", "main"]
