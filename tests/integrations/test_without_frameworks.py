"""Without the ``pydantic-ai`` or ``langgraph`` extra: the rest of clearance imports, and the
adapter says what to install.

Each test runs a real subprocess whose ``sitecustomize`` hides the framework's packages (a
meta path finder that refuses their imports), as on an installation without the extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SITECUSTOMIZE = """
import importlib.abc
import sys

HIDDEN = frozenset({hidden!r})


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden by the test)", name=name)
        return None


sys.meta_path.insert(0, Hide())
"""


def python(code: str, hidden: tuple[str, ...], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(hidden=hidden))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("module", "extra", "hidden"),
    [
        ("pydantic_ai", "pydantic-ai", ("pydantic_ai",)),
        ("langgraph", "langgraph", ("langgraph",)),
        ("langgraph", "langgraph", ("langchain_core",)),
    ],
)
def test_an_adapter_without_its_framework_says_what_to_install(
    module: str, extra: str, hidden: tuple[str, ...], tmp_path: Path
) -> None:
    done = python(
        f"""
        import clearance, clearance.integrations
        from clearance.errors import ClearanceError, MissingExtraError

        try:
            import clearance.integrations.{module}
        except MissingExtraError as exc:
            assert isinstance(exc, ImportError) and isinstance(exc, ClearanceError)
            assert exc.extra == {extra!r}, exc.extra
            print(str(exc))
        else:
            raise AssertionError("the import did not fail")
        """,
        hidden,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()  # one line
    assert line.endswith(f"pip install 'clearance[{extra}]'")
    assert f"clearance.integrations.{module}" in line


BREAK_LANGGRAPH = """
import langgraph.errors

del langgraph.errors.GraphBubbleUp  # as in a langgraph that lacks a name the adapter imports
"""


@pytest.mark.parametrize(
    ("module", "dist", "hidden", "breaks"),
    [
        # a dependency of the framework missing: installed, but broken
        ("pydantic_ai", "pydantic-ai-slim", ("pydantic_graph",), ""),
        ("openai_agents", "openai-agents", ("openai",), ""),
        # a name the installed version lacks
        ("langgraph", "langgraph", ("nothing_hidden",), BREAK_LANGGRAPH),
    ],
)
def test_an_installed_but_broken_framework_is_not_reported_missing(
    module: str, dist: str, hidden: tuple[str, ...], breaks: str, tmp_path: Path
) -> None:
    """Issue 31: the user who has the framework is told which installed version fails and
    why, not to install it."""
    if breaks:
        site = tmp_path / "site"
        site.mkdir()
        (site / "breaks.pth").write_text("import clearance_test_breaks\n")
        (site / "clearance_test_breaks.py").write_text(breaks)
    done = python(
        f"""
        import site, sys
        site.addsitedir({str(tmp_path / "site")!r})
        from clearance.errors import MissingExtraError

        try:
            import clearance.integrations.{module}
        except MissingExtraError as exc:
            raise AssertionError(f"reported as not installed: {{exc}}")
        except ImportError as exc:
            print(str(exc))
        else:
            raise AssertionError("the import did not fail")
        """,
        hidden,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert f"clearance.integrations.{module}" in line and "the installed " in line
    assert dist in line and "pip install -U" in line
