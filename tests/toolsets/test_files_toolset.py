import os
from pathlib import Path
from typing import Any

import pytest

from clearance import CallContext, CallToolResult, ConfigError, Principal, Tool, ToolRegistry
from clearance.errors import CallCancelledError
from clearance.guardrails import GuardrailContext, PathScope
from clearance.toolsets import files_guardrail, files_tools, register_files


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("import os\n\ndef main():\n    return 42\n")
    (root / "README.md").write_text("# Demo\nline two\nline three\n")
    (root / "data.bin").write_bytes(b"\x00\x01\x02binary")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("main = secret-in-git\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("main = outside secret\n")
    (root / "escape").symlink_to(outside)
    (root / "escape_file").symlink_to(outside / "secret.txt")
    return root


def ctx(name: str = "read_file") -> CallContext:
    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name=f"files.{name}",
        model_alias=f"files__{name}",
        principal=Principal("User", "u"),
    )


def tools(root: Path, **options: Any) -> dict[str, Tool]:
    return {tool.name: tool for tool in files_tools(root, **options)}


def call(root: Path, name: str, **arguments: Any) -> CallToolResult:
    result = tools(root)[name].handler(arguments, ctx(name))
    assert isinstance(result, CallToolResult)
    return result


def test_tools_register_with_strict_schemas(workspace: Path) -> None:
    registry = ToolRegistry()
    registered = register_files(registry, workspace)
    assert [t.qualified_name for t in registered] == [
        "files.read_file",
        "files.write_file",
        "files.edit",
        "files.apply_patch",
        "files.move_file",
        "files.list_dir",
        "files.search",
    ]
    by_name = {t.name: t for t in registered}
    assert by_name["read_file"].read_only and by_name["list_dir"].read_only
    assert by_name["search"].read_only
    assert not by_name["write_file"].read_only and not by_name["move_file"].read_only
    for tool in registered:
        assert tool.input_schema["additionalProperties"] is False
    assert registry.get("files__read_file").qualified_name == "files.read_file"
    other = ToolRegistry()
    assert register_files(other, workspace, namespace="ws")[0].qualified_name == "ws.read_file"


def test_root_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        files_tools(tmp_path / "missing")


def test_read_file(workspace: Path) -> None:
    result = call(workspace, "read_file", path="README.md")
    assert not result.is_error
    assert result.text == "# Demo\nline two\nline three\n"
    assert result.structured_content == {
        "path": "README.md",
        "offset": 0,
        "lines": 3,
        "truncated": False,
    }
    part = call(workspace, "read_file", path="README.md", offset=1, limit=1)
    assert part.text == "line two\n"
    assert part.structured_content["lines"] == 1


def test_read_file_truncates_large_files(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * 100)
    result = tools(workspace, max_read_bytes=10)["read_file"].handler({"path": "big.txt"}, ctx())
    assert result.text.startswith("x" * 10 + "\n[truncated")
    assert result.structured_content["truncated"] is True


@pytest.mark.parametrize(
    ("path", "error", "words"),
    [
        ("missing.txt", "not_found", "no such file"),
        ("src", "is_a_directory", "is a directory"),
        ("data.bin", "binary", "binary"),
        ("README.md/x", "not_a_directory", "not a directory"),
        ("escape/secret.txt", "refused", "outside the workspace root"),
        ("escape_file", "refused", "outside the workspace root"),
        ("../outside/secret.txt", "refused", "'..'"),
        ("/etc/passwd", "refused", "absolute"),
    ],
)
def test_read_file_domain_errors(workspace: Path, path: str, error: str, words: str) -> None:
    result = call(workspace, "read_file", path=path)
    assert result.is_error
    assert result.structured_content == {"error": error}
    assert words in result.text
    assert "outside secret" not in result.text  # never the content


def test_write_file_creates_parents_inside_the_root(workspace: Path) -> None:
    result = call(workspace, "write_file", path="new/dir/file.txt", content="héllo\r\n")
    assert not result.is_error
    assert result.structured_content == {"path": "new/dir/file.txt", "bytes": 8}
    assert (workspace / "new" / "dir" / "file.txt").read_bytes() == "héllo\r\n".encode()
    call(workspace, "write_file", path="new/dir/file.txt", content="replaced")
    assert (workspace / "new" / "dir" / "file.txt").read_text() == "replaced"


def test_write_file_never_writes_outside(workspace: Path, tmp_path: Path) -> None:
    for path in ("escape/new.txt", "escape_file", "../outside/x.txt", "/tmp/x.txt"):
        result = call(workspace, "write_file", path=path, content="pwned")
        assert result.is_error and result.structured_content == {"error": "refused"}, path
    assert (tmp_path / "outside" / "secret.txt").read_text() == "main = outside secret\n"
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.txt"]


def test_move_file(workspace: Path) -> None:
    result = call(workspace, "move_file", source="README.md", destination="docs/README.md")
    assert not result.is_error
    assert (workspace / "docs" / "README.md").exists() and not (workspace / "README.md").exists()
    # a symlink is moved as a link, not followed
    call(workspace, "move_file", source="escape_file", destination="links/escape_file")
    assert (workspace / "links" / "escape_file").is_symlink()


@pytest.mark.parametrize(
    ("source", "destination", "error"),
    [
        ("missing", "x", "not_found"),
        ("README.md", "src/pkg/mod.py", "exists"),
        ("README.md", "../outside/README.md", "refused"),
        ("README.md", "escape/README.md", "refused"),
        ("escape/secret.txt", "stolen.txt", "refused"),
        (".", "elsewhere", "refused"),
    ],
)
def test_move_file_errors(workspace: Path, source: str, destination: str, error: str) -> None:
    result = call(workspace, "move_file", source=source, destination=destination)
    assert result.is_error and result.structured_content == {"error": error}
    assert (workspace / "README.md").exists()


def test_list_dir(workspace: Path) -> None:
    result = call(workspace, "list_dir")
    names = [e["name"] for e in result.structured_content["entries"]]
    assert names == [".git", "README.md", "data.bin", "escape", "escape_file", "src"]
    kinds = {e["name"]: e["type"] for e in result.structured_content["entries"]}
    assert kinds["src"] == "directory" and kinds["escape"] == "symlink"
    assert kinds["README.md"] == "file"
    assert "src/" in result.text and "README.md  (27 bytes)" in result.text
    assert call(workspace, "list_dir", path="src/pkg").text == "mod.py  (37 bytes)"
    assert call(workspace, "list_dir", path="escape").is_error
    assert call(workspace, "list_dir", path="README.md").is_error
    (workspace / "empty").mkdir()
    assert call(workspace, "list_dir", path="empty").text == "(empty directory)"


def test_list_dir_is_bounded(workspace: Path) -> None:
    result = tools(workspace, max_entries=2)["list_dir"].handler({}, ctx("list_dir"))
    assert result.structured_content["truncated"] is True
    assert len(result.structured_content["entries"]) == 2
    assert "[truncated" in result.text


def test_search(workspace: Path) -> None:
    result = call(workspace, "search", query="main")
    # never follows symlinks out of the root, skips .git and binary files
    assert result.text == "src/pkg/mod.py:3: def main():"
    assert result.structured_content == {"matches": 1, "files_searched": 2, "truncated": False}
    regex = call(workspace, "search", query=r"^line \w+$", regex=True)
    assert regex.text == "README.md:2: line two\nREADME.md:3: line three"
    assert (
        call(workspace, "search", query="LINE", ignore_case=True).structured_content["matches"] == 2
    )
    assert (
        call(workspace, "search", query="import", path="src").text == "src/pkg/mod.py:1: import os"
    )
    none = call(workspace, "search", query="nothing-like-this")
    assert none.text == "no matches in 2 files"


def test_search_errors_and_bounds(workspace: Path) -> None:
    bad = call(workspace, "search", query="(", regex=True)
    assert bad.is_error and bad.structured_content == {"error": "bad_regex"}
    assert call(workspace, "search", query="x", path="escape").is_error
    for i in range(5):
        (workspace / f"f{i}.txt").write_text("hit\n" * 3)
    bounded = tools(workspace, max_results=4)["search"].handler({"query": "hit"}, ctx("search"))
    assert bounded.structured_content["matches"] == 4 and bounded.structured_content["truncated"]
    (workspace / "long.txt").write_text("needle " + "y" * 1000)
    line = call(workspace, "search", query="needle").text
    assert line.endswith("...") and len(line) < 300


def test_search_stops_when_cancelled(workspace: Path) -> None:
    context = ctx("search")
    context.cancel()
    with pytest.raises(CallCancelledError):
        tools(workspace)["search"].handler({"query": "main"}, context)


def test_search_does_not_descend_into_a_directory_swapped_for_a_link(
    workspace: Path, tmp_path: Path
) -> None:
    # a directory that is a symlink by the time the walk reaches it is skipped
    (workspace / "zz").symlink_to(tmp_path / "outside")
    result = call(workspace, "search", query="outside")
    assert result.structured_content["matches"] == 0


def test_files_guardrail_matches_the_tools(workspace: Path) -> None:
    guard = files_guardrail(workspace)
    assert isinstance(guard, PathScope)
    assert guard.applies_to("files.move_file") and not guard.applies_to("shell.run")
    gctx = GuardrailContext(
        "files.move_file", "files__move_file", Principal("User", "u"), "s", None, "c", "arguments"
    )
    outcome = guard.check({"source": "README.md", "destination": "escape/x"}, gctx)
    assert outcome.action == "block" and outcome.message is not None
    assert "/destination" in outcome.message
    assert files_guardrail(workspace, "ws").tools == ("ws.*",)


def test_tools_are_safe_without_the_guardrail_even_as_root(workspace: Path) -> None:
    # nothing here depends on file permissions (the tests may run as root)
    assert os.path.islink(workspace / "escape")
    assert call(workspace, "read_file", path="escape/secret.txt").is_error


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"path": ".git/config", "content": "[core]"}),
        ("write_file", {"path": "sub/.GIT/hooks/pre-commit", "content": "x"}),
        ("write_file", {"path": ".gitconfig", "content": "[core]"}),
        ("move_file", {"source": "a.txt", "destination": ".git/config"}),
        ("move_file", {"source": ".git/HEAD", "destination": "b.txt"}),
    ],
)
def test_mutating_tools_refuse_protected_paths(
    tmp_path: Path, tool: str, arguments: dict[str, str]
) -> None:
    from clearance.harness.tools import CallContext
    from clearance.policy.base import Principal
    from clearance.toolsets.files import files_tools

    (tmp_path / "a.txt").write_text("a")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    handlers = {t.name: t.handler for t in files_tools(tmp_path)}
    ctx = CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name=f"files.{tool}",
        model_alias=f"files__{tool}",
        principal=Principal("User", "u"),
    )
    out = handlers[tool](arguments, ctx)
    assert out.is_error and out.structured_content == {"error": "protected"}
    assert (tmp_path / ".git" / "HEAD").read_text() == "ref"
    assert not (tmp_path / ".gitconfig").exists() and not (tmp_path / ".git" / "config").exists()


def test_protected_files_are_refused_to_every_tool_whatever_the_spelling(
    workspace: Path,
) -> None:
    """The journal and grant store, when they sit in the workspace: no files tool reads,
    searches, writes or moves them or their side files (issue 12, item 1)."""
    import anyio

    from clearance import Harness, Principal
    from clearance.policy import NoopEvaluator

    db = workspace / "state" / "clearance.db"
    db.parent.mkdir()
    db.write_text("journal main = secret\n")
    (workspace / "state" / "clearance.db-starts").write_text('{"main": "start log"}\n')
    (workspace / "alias").symlink_to("state")

    async def main() -> list[Any]:
        registry = ToolRegistry()
        register_files(registry, workspace, protected_files=[db])
        async with Harness(registry, evaluator=NoopEvaluator()) as harness:
            session = await harness.create_session(principal=Principal("User", "u"))
            calls = [
                ("files.read_file", {"path": "state/clearance.db"}),
                ("files.read_file", {"path": "alias/./clearance.db-starts"}),
                ("files.write_file", {"path": "alias/clearance.db", "content": ""}),
                ("files.move_file", {"source": "state/clearance.db", "destination": "x"}),
                (
                    "files.move_file",
                    {"source": "README.md", "destination": "state/clearance.db-wal"},
                ),
            ]
            found = [await session.call_tool(name, args) for name, args in calls]
            found.append(
                await session.call_tool("files.search", {"query": "main", "path": "alias"})
            )
            return found

    *refused, search = anyio.run(main)
    for outcome in refused:
        assert outcome.status == "error" and "journal or grant store" in outcome.text, outcome
    assert search.status == "ok" and "secret" not in search.text and "start log" not in search.text
    assert db.read_text() == "journal main = secret\n"
    assert (workspace / "README.md").exists()


def test_directories_above_protected_or_read_only_paths_are_not_moved(workspace: Path) -> None:
    """A move of a directory above the journal would carry it away, and a rewrite of the
    configuration would decide the next run (red-team findings)."""
    state = workspace / "home" / ".local" / "state"
    state.mkdir(parents=True)
    db = state / "clearance.db"
    db.write_text("journal\n")
    toml = workspace / "clearance.toml"
    toml.write_text('[evaluator]\nkind = "cedar"\n')
    policies = workspace / "policies"
    policies.mkdir()
    (policies / "p.cedar").write_text("permit (principal, action, resource);\n")
    by_name = tools(workspace, protected_files=[db], read_only_paths=[toml, policies])

    def run(name: str, **arguments: Any) -> CallToolResult:
        result = by_name[name].handler(arguments, ctx(name))
        assert isinstance(result, CallToolResult)
        return result

    for source in ("home", "home/.local", "home/.local/state", "policies"):
        moved = run("move_file", source=source, destination="elsewhere")
        assert moved.is_error and moved.structured_content == {"error": "protected"}, source
    for path in ("clearance.toml", "policies/p.cedar", "policies/new.cedar"):
        written = run("write_file", path=path, content="x")
        assert written.is_error and written.structured_content == {"error": "protected"}, path
    assert run("read_file", path="clearance.toml").text.startswith("[evaluator]")
    assert not run("write_file", path="home/notes.txt", content="fine").is_error
    assert db.read_text() == "journal\n" and toml.read_text().startswith("[evaluator]")
