"""R11 for patches: what is checked is what is applied, and it is applied wholly or not at all.

Workspaces of a few text files are built on disk for every example; a patch is made with
:mod:`difflib` from random changes (lines replaced, inserted and removed in a file, files
added, deleted and renamed), written as ``git diff`` writes it, sometimes spelled with
``./`` and ``dir/..`` detours. Then:

1. the patch fact is idempotent, and its paths are exactly the files the changes touch, in
   canonical form;
2. ``files.apply_patch`` given the canonical patch leaves the workspace exactly as the
   changes say;
3. with one hunk of one file spoiled, the whole patch fails and no file changes.
"""

from __future__ import annotations

import difflib
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from clearance import CallContext, CallToolResult, Principal
from clearance.facts.patch import PatchFact
from clearance.toolsets import files_tools

NAMES = ["a.txt", "b.py", "src/c.txt", "src/deep/d.md"]
LINES = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "", "x = 1"]), max_size=8)


def context() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="files.apply_patch",
        model_alias="files__apply_patch",
        principal=Principal("User", "u"),
    )


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def spelled(path: str, detour: int) -> str:
    return {0: path, 1: f"./{path}", 2: f"src/../{path}"}[detour]


def section(old: str | None, new: str | None, before: str, after: str, detour: int) -> str:
    """One file of a ``git diff``."""
    a = spelled(old, detour) if old is not None else None
    b = spelled(new, detour) if new is not None else None
    head = [f"diff --git a/{a or b} b/{b or a}"]
    if a is None:
        head.append("new file mode 100644")
    elif b is None:
        head.append("deleted file mode 100644")
    elif a != b:
        head += [f"rename from {a}", f"rename to {b}"]
    body = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{a}" if a else "/dev/null",
            f"b/{b}" if b else "/dev/null",
            n=1,
        )
    )
    if not body and a is not None and b is not None and a != b:
        return "\n".join(head) + "\n"
    return "\n".join(head) + "\n" + "".join(body)


changes = st.lists(
    st.tuples(
        st.sampled_from(["modify", "add", "delete", "rename"]),
        st.integers(0, len(NAMES) - 1),
        LINES,
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=4,
)


@given(
    existing=st.dictionaries(st.sampled_from(NAMES), LINES.filter(bool), max_size=4),
    wanted=changes,
    spoil=st.booleans(),
)
def test_a_patch_is_applied_as_checked_and_wholly_or_not_at_all(
    existing: dict[str, list[str]], wanted: list[tuple[str, int, list[str], int]], spoil: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, lines in existing.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text(lines))
        expected = {name: text(lines) for name, lines in existing.items()}
        sections: list[str] = []
        touched: list[str] = []
        for operation, pick, lines, detour in wanted:
            others = [n for n in NAMES if n not in expected and n not in touched]
            present = sorted(n for n in expected if n not in touched)
            # an operation on an existing file picks one of those; an add, a new name
            name = present[pick % len(present)] if present and operation != "add" else NAMES[pick]
            if name in touched:
                continue
            if operation == "add" and name not in expected and name:
                sections.append(section(None, name, "", text(lines), detour))
                expected[name] = text(lines)
                touched.append(name)
            elif operation == "modify" and name in expected and text(lines) != expected[name]:
                sections.append(section(name, name, expected[name], text(lines), detour))
                expected[name] = text(lines)
                touched.append(name)
            elif operation == "delete" and name in expected:
                sections.append(section(name, None, expected[name], "", detour))
                del expected[name]
                touched.append(name)
            elif operation == "rename" and name in expected and others:
                target = others[0]
                sections.append(section(name, target, expected[name], text(lines), detour))
                expected[target] = text(lines)
                del expected[name]
                touched += [name, target]
        if not sections:
            event("no change")
            return
        event(f"{len(sections)} file(s)" + (" spoiled" if spoil else ""))
        patch = "".join(sections)
        fact = PatchFact(root)
        canonical = fact.canonicalize(patch)
        assert fact.canonicalize(canonical.value) == canonical
        assert sorted(canonical.fact["paths"]) == sorted(touched)
        before = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
        value = canonical.value
        spoiled = False
        if spoil:
            lines = value.split("\n")
            for k, line in enumerate(lines):
                if line.startswith("-") and not line.startswith("---"):
                    lines[k] = "-not what the file says"
                    spoiled = True
                    break
            value = "\n".join(lines)
        tools: dict[str, Any] = {t.name: t for t in files_tools(root)}
        result = tools["apply_patch"].handler({"patch": value}, context())
        assert isinstance(result, CallToolResult)
        after = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
        if spoiled:
            assert result.is_error, result.text
            assert after == before
        else:
            assert not result.is_error, (patch, result.text)
            assert after == expected
