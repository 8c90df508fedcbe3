"""The ``clearance`` command line: one module per verb, each registering itself on the
root group (:data:`clearance.cli.main.cli`) when it is imported.

The root group imports a verb's module when the verb is first looked up (to run it, show
its help or complete it; :data:`clearance.cli.main.VERBS`), so that a command starts
without importing the verbs it does not use; :data:`cli` is complete wherever it is
reached from. :mod:`clearance.cli.commands` imports them all at once.

Shared parts: ``main`` (the root group, exit codes, :func:`~clearance.cli.main.fail`),
``_options`` (``--config``, ``--principal``), ``_render`` (JSON, tables, status words),
``_live`` (the live log of a session), ``_prompt`` (answering asks on the terminal),
``_scripted`` (driving a scripted session for ``run`` and ``demo``).
"""

from clearance.cli.main import cli, main

__all__ = ["cli", "main"]
