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
