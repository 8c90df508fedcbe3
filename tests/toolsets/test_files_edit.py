"""files.edit and files.apply_patch: exact edits and unified diffs, wholly or not at all,
on canonical paths, protected paths refused; the patch fact and what a person is asked."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from support import ALICE, harness

from clearance import CallContext, CallToolResult, Principal, ToolRegistry
from clearance.errors import FactError
from clearance.facts.patch import PatchFact
from clearance.harness.approvals import Answer, PermissionAsk
from clearance.policy import LocalEvaluator
from clearance.toolsets import files_tools, register_files


def context() -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="files.edit",
        model_alias="files__edit",
        principal=Principal("User", "u"),
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\nx = 1\ny = 2\nx = 1\n")
    (root / "README.md").write_text("# Project\n\nhello\n")
    (root / "old.txt").write_text("bye\n")
    return root


def tools(root: Path, **options: Any) -> dict[str, Any]:
    return {t.name: t for t in files_tools(root, **options)}


def call(root: Path, name: str, arguments: dict[str, Any], **options: Any) -> CallToolResult:
    tool = tools(root, **options)[name]
    if name == "apply_patch":  # what the pipeline does first: the canonical patch
        arguments = {"patch": PatchFact(root).canonicalize(arguments["patch"]).value}
    result = tool.handler(arguments, context())
    assert isinstance(result, CallToolResult)
    return result


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


# --- edit ---------------------------------------------------------------------------------


def test_edit_replaces_exact_text_once(work: Path) -> None:
    result = call(work, "edit", {"path": "README.md", "edits": [{"old": "hello", "new": "hi"}]})
    assert not result.is_error, result.text
    assert (work / "README.md").read_text() == "# Project\n\nhi\n"
    assert result.structured_content == {"path": "README.md", "replacements": 1}


def test_edit_is_all_or_nothing(work: Path) -> None:
    before = snapshot(work)
    cases = [
        ([{"old": "y = 2", "new": "y = 3"}, {"old": "missing", "new": "z"}], "not_found"),
        ([{"old": "x = 1", "new": "x = 2"}], "ambiguous"),
        ([{"old": "y = 2", "new": "y = 3"}, {"old": "y = 2", "new": "y = 4"}], "not_found"),
    ]
    for edits, error in cases:
        result = call(work, "edit", {"path": "src/app.py", "edits": edits})
        assert result.is_error and result.structured_content == {"error": error}, result.text
    assert snapshot(work) == before
    done = call(
        work,
        "edit",
        {
            "path": "src/app.py",
            "edits": [
                {"old": "x = 1", "new": "x = 9", "replace_all": True},
                {"old": "import os\n", "new": ""},
            ],
        },
    )
    assert not done.is_error, done.text
    assert (work / "src" / "app.py").read_text() == "\nx = 9\ny = 2\nx = 9\n"
    assert done.structured_content["replacements"] == 3
    # no temporary or set-aside file is left behind
    assert sorted(p.name for p in (work / "src").iterdir()) == ["app.py"]


def test_edit_keeps_the_file_mode_and_refuses_what_it_must(work: Path) -> None:
    script = work / "run.sh"
    script.write_text("echo a\n")
    script.chmod(0o751)
    assert not call(work, "edit", {"path": "run.sh", "edits": [{"old": "a", "new": "b"}]}).is_error
    assert (script.stat().st_mode & 0o777) == 0o751 and script.read_text() == "echo b\n"
    (work / "bin.dat").write_bytes(b"\x00\x01abc")
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    (work / "clearance.toml").write_text('[evaluator]\nkind = "cedar"\n')
    refused = {
        "bin.dat": "binary",
        ".git/config": "protected",
        "clearance.toml": "protected",
        "missing.txt": "not_found",
    }
    for path, error in refused.items():
        result = call(
            work,
            "edit",
            {"path": path, "edits": [{"old": "a", "new": "b"}]},
            read_only_paths=[work / "clearance.toml"],
        )
        assert result.structured_content == {"error": error}, (path, result.text)
    assert (work / "clearance.toml").read_text() == '[evaluator]\nkind = "cedar"\n'


# --- apply_patch ------------------------------------------------------------------------------

PATCH = """The agent's explanation, dropped.
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -3,2 +3,3 @@
 x = 1
-y = 2
+y = 3
+z = 4
--- /dev/null
+++ b/docs/guide.md
@@ -0,0 +1,2 @@
+# Guide
+text
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/README.md b/READ.md
similarity index 90%
rename from README.md
rename to READ.md
--- a/README.md
+++ b/READ.md
@@ -3 +3 @@
-hello
+hello, world
"""


def test_a_patch_adds_changes_deletes_and_renames(work: Path) -> None:
    result = call(work, "apply_patch", {"patch": PATCH})
    assert not result.is_error, result.text
    assert (work / "src" / "app.py").read_text() == "import os\n\nx = 1\ny = 3\nz = 4\nx = 1\n"
    assert (work / "docs" / "guide.md").read_text() == "# Guide\ntext\n"
    assert not (work / "old.txt").exists() and not (work / "README.md").exists()
    assert (work / "READ.md").read_text() == "# Project\n\nhello, world\n"
    leftovers = [p.name for p in work.rglob("*") if ".clearance-" in p.name]
    assert leftovers == []


@pytest.mark.parametrize(
    "broken",
    [
        # the last file's hunk does not apply
        PATCH.replace("-hello\n+hello, world", "-goodbye\n+hello, world"),
        # the file to add exists already
        PATCH.replace("b/docs/guide.md", "b/src/app.py").replace(
            "--- a/src/app.py\n+++ b/src/app.py\n@@ -3,2 +3,3 @@\n x = 1\n-y = 2\n+y = 3\n+z = 4\n",
            "",
        ),
        # the rename's target exists
        PATCH.replace("READ.md", "old.txt").replace(
            "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n", ""
        ),
        # a deleted file that changed since the agent read it
        PATCH.replace("-bye", "-farewell"),
    ],
)
def test_a_patch_that_fails_anywhere_changes_nothing(work: Path, broken: str) -> None:
    before = snapshot(work)
    result = call(work, "apply_patch", {"patch": broken})
    assert result.is_error, result.text
    assert snapshot(work) == before
    assert not (work / "docs").exists()


def test_a_failure_while_committing_is_rolled_back(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renames that put new contents in place: the third one fails, the first two are
    undone, the originals come back, and nothing temporary is left."""
    before = snapshot(work)
    real_link = os.link
    calls = []

    def failing_link(*args: Any, **kwargs: Any) -> None:
        calls.append(args)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real_link(*args, **kwargs)

    monkeypatch.setattr(os, "link", failing_link)
    result = call(work, "apply_patch", {"patch": PATCH})
    assert result.is_error and result.structured_content == {"error": "os_error"}, result.text
    assert len(calls) == 3
    assert snapshot(work) == before
    assert not (work / "docs").exists()
    assert [p.name for p in work.rglob("*") if ".clearance-" in p.name] == []


def test_protected_paths_refuse_the_whole_patch(work: Path) -> None:
    (work / ".git").mkdir()
    (work / "clearance.toml").write_text("[evaluator]\n")
    extra = {
        "a planted git config": "--- /dev/null\n+++ b/.git/config\n@@ -0,0 +1 @@\n+[core]\n",
        "a changed configuration": (
            "--- a/clearance.toml\n+++ b/clearance.toml\n@@ -1 +1 @@\n-[evaluator]\n+[x]\n"
        ),
        "a configuration renamed away": (
            "diff --git a/clearance.toml b/kept.toml\nrename from clearance.toml\n"
            "rename to kept.toml\n"
        ),
    }
    for what, section in extra.items():
        before = snapshot(work)
        result = call(
            work,
            "apply_patch",
            {"patch": PATCH + section},
            read_only_paths=[work / "clearance.toml"],
        )
        assert result.structured_content == {"error": "protected"}, (what, result.text)
        assert snapshot(work) == before, what


# --- the patch fact -----------------------------------------------------------------------------


def test_the_patch_fact_canonicalizes_every_path(work: Path) -> None:
    (work / "link").symlink_to("src")
    patch = (
        "--- a/link/app.py\n+++ b/link/app.py\n@@ -1 +1 @@\n-import os\n+import sys\n"
        "--- /dev/null\n+++ b/docs/../src/new.py\n@@ -0,0 +1 @@\n+pass\n"
    )
    fact = PatchFact(work)
    canonical = fact.canonicalize(patch)
    assert canonical.fact["paths"] == ["src/app.py", "src/new.py"]
    assert canonical.fact["modified"] == ["src/app.py"] and canonical.fact["added"] == [
        "src/new.py"
    ]
    assert canonical.fact["segments"] == ["src", "app.py", "new.py"]
    assert canonical.fact["files"] == 2 and canonical.fact["additions"] == 2
    # the summary comes first: the paths that decide, before any hunk
    head = canonical.value.splitlines()[:3]
    assert head == [
        "# clearance patch: 2 file(s), +2 -1 lines",
        "#   modify src/app.py (+1 -1)",
        "#   add src/new.py (+1 -0)",
    ]
    assert fact.canonicalize(canonical.value) == canonical  # idempotent
    refused = {
        "--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n": "outside the workspace",
        "just words\n": "changes no file",
        "--- a/x\n+++ b/x\n@@ -1,2 +1 @@\n-a\n+b\n": "says -2 +1",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n": "twice",
        "diff --git a/x b/x\nGIT binary patch\n": "binary",
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\ngarbage\n": "not part of a file",
        "--- a/x\x01\n+++ b/x\x01\n@@ -1 +1 @@\n-a\n+b\n": "control character",
    }
    for text, reason in refused.items():
        with pytest.raises(FactError, match=re.escape(reason)):
            fact.canonicalize(text)


@pytest.mark.anyio
async def test_the_ask_shows_the_patch_paths_first_and_the_journal_the_canonical_patch(
    work: Path,
) -> None:
    registry = ToolRegistry()
    register_files(registry, work)
    asked: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> Answer:
        asked.append(ask)
        return "allow_once"

    evaluator = LocalEvaluator(ask=["files.apply_patch"])
    async with harness(registry, evaluator=evaluator) as h:
        session = await h.create_session(principal=ALICE, on_permission_ask=answer)
        patch = "--- a/src/../README.md\n+++ b/src/../README.md\n@@ -3 +3 @@\n-hello\n+hi\n"
        outcome = await session.call_tool("files__apply_patch", {"patch": patch}, call_id="p")
    assert outcome.status == "ok", outcome.text
    (ask,) = asked
    assert "patch" in ask.deciding
    shown = ask.arguments["patch"]
    assert shown.startswith("# clearance patch: 1 file(s), +1 -1 lines\n#   modify README.md")
    assert "src/.." not in shown
    assert (work / "README.md").read_text() == "# Project\n\nhi\n"
