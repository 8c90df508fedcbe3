"""Bundled tool namespaces.

- :mod:`clearance.toolsets.files`: workspace file tools confined to one root
  (``read_file``, ``write_file``, ``edit``, ``apply_patch``, ``move_file``, ``list_dir``,
  ``search``).
- :mod:`clearance.toolsets.shell`: ``run(command)`` without a shell, bounded in output
  and time.
- :mod:`clearance.toolsets.git`: ``status``, ``diff``, ``log``, ``show``, ``add``,
  ``commit``, ``branch``, ``checkout``, ``restore``, their arguments facts.
- :mod:`clearance.toolsets.process`: long-running processes (``start``, ``read``,
  ``write``, ``stop``), per session, stopped when their session closes.

Example::

    registry = ToolRegistry()
    register_files(registry, "/srv/workspace")
    register_shell(registry, "/srv/workspace", allowed_programs={"git", "pytest"})
"""

from clearance.toolsets.files import files_guardrail, files_tools, register_files
from clearance.toolsets.git import git_tools, register_git
from clearance.toolsets.process import process_tools, register_process
from clearance.toolsets.shell import register_shell, shell_tools

__all__ = [
    "files_guardrail",
    "files_tools",
    "git_tools",
    "process_tools",
    "register_files",
    "register_git",
    "register_process",
    "register_shell",
    "shell_tools",
]
