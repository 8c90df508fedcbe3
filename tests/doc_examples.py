"""The ```python blocks of a page in docs/, to run as tests: a page's examples stay true."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"

_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks(page: str) -> list[tuple[int, str]]:
    """``(line, code)`` of every ```python block of ``docs/<page>``, in page order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def run_block(page: str, line: int, code: str) -> dict[str, object]:
    """Run one block in a fresh namespace (named after its page and line in tracebacks)."""
    namespace: dict[str, object] = {"__name__": f"docs_{Path(page).stem}_{line}"}
    exec(compile(code, f"docs/{page}:{line}", "exec"), namespace)
    return namespace
