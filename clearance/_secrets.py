"""The workspace's secrets by default, below every package that needs them.

The bundled tools refuse them and the configuration's ``[tools.landlock] protected``
defaults to them; kept here, not with the tools, so that reading a configuration
(``clearance asks list`` with a ``clearance.toml``) does not load the tools (issue 34).
"""

from __future__ import annotations

__all__ = ["SECRETS"]

SECRETS: tuple[str, ...] = (".env", ".env.*")
"""Glob patterns of the workspace's secrets, which no bundled tool reads or writes: the
file tools refuse them and the kernel hides them from the programs ``shell.run`` starts
(R15). A pattern without ``/`` matches a name in any directory, one with ``/`` the path
from the workspace."""
