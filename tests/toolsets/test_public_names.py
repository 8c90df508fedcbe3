"""The bundled toolsets live in smaller modules (guard, handlers, search, confinement,
process runner); users still import every public name from ``clearance.toolsets.files``
and ``clearance.toolsets.shell``, and each module's ``__all__`` lists them all."""

from __future__ import annotations

from pathlib import Path

import clearance.toolsets.files as files
import clearance.toolsets.shell as shell


def test_the_files_module_exports_its_public_names(tmp_path: Path) -> None:
    assert set(files.__all__) == {
        "PROTECTED",
        "SECRETS",
        "SQLITE_SIDE_FILES",
        "Handler",
        "files_guardrail",
        "files_tools",
        "register_files",
    }
    for name in files.__all__:
        assert getattr(files, name) is not None, name
    assert files.PROTECTED == (".git", ".gitconfig")
    assert "-wal" in files.SQLITE_SIDE_FILES
    names = [tool.name for tool in files.files_tools(tmp_path)]
    assert names == [
        "read_file",
        "write_file",
        "edit",
        "apply_patch",
        "move_file",
        "list_dir",
        "search",
    ]


def test_the_shell_module_exports_its_public_names(tmp_path: Path) -> None:
    assert set(shell.__all__) == {"register_shell", "shell_tools"}
    for name in shell.__all__:
        assert getattr(shell, name) is not None, name
    assert [tool.name for tool in shell.shell_tools(tmp_path)] == ["run"]
