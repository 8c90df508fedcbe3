"""Where POSIX parts are missing (Windows): the package imports, and the path tools refuse
rather than follow symlinks.

A real subprocess whose ``sitecustomize`` takes away what Windows lacks: the ``fcntl``
module, ``os.O_NOFOLLOW``, ``os.O_DIRECTORY``, ``os.O_NONBLOCK``, and ``dir_fd`` for
``os.open``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SITECUSTOMIZE = """
import importlib.abc
import os
import sys


class NoFcntl(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "fcntl":
            raise ModuleNotFoundError("No module named 'fcntl' (hidden by the test)", name=name)
        return None


sys.modules.pop("fcntl", None)
sys.meta_path.insert(0, NoFcntl())
for name in ("O_NOFOLLOW", "O_DIRECTORY", "O_NONBLOCK"):
    delattr(os, name)
os.supports_dir_fd.discard(os.open)
"""


def test_without_fcntl_and_nofollow_the_package_imports_and_paths_are_refused(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "notes.txt").write_text("secret-ish content\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    code = f"""
        import os, sys
        assert not hasattr(os, "O_NOFOLLOW") and os.open not in os.supports_dir_fd
        try:
            import fcntl
        except ImportError:
            pass
        else:
            raise AssertionError("fcntl is still importable")

        import anyio
        import clearance, clearance.policy, clearance.toolsets, clearance.guardrails
        import clearance.config, clearance.cli
        from clearance import SqliteJournal
        from clearance.guardrails import PathScope, PathScopeError

        scope = PathScope(root={str(workspace)!r})
        def open_file():
            with scope.open("src/notes.txt") as f:
                return f.read()

        def open_dir():
            with scope.open_dir("src") as fd:
                return fd

        for how, fn in (("open", open_file), ("open_dir", open_dir)):
            try:
                opened = fn()
            except PathScopeError as exc:
                assert "O_NOFOLLOW" in exc.reason, exc.reason
                print(how, "refused")
            else:
                raise AssertionError(f"{{how}} opened {{opened!r}} without O_NOFOLLOW")

        async def journal():
            journal = SqliteJournal({str(tmp_path / "journal.db")!r})
            await journal.aclose()

        anyio.run(journal)
        print("journal ok")
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["open refused", "open_dir refused", "journal ok"]
