from pathlib import Path

import pytest
from support import ALICE, Recorder, coding_registry

from clearance.errors import RuleError
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo


def request(tool: str, **arguments: object) -> AuthzRequest:
    ns, _, name = tool.partition(".")
    return AuthzRequest(ALICE, ToolInfo(tool, ns, name, False), arguments, SessionInfo("s"))


def effect(ev: LocalEvaluator, tool: str, **arguments: object) -> str:
    return ev.evaluate(request(tool, **arguments)).effect


def test_nothing_matching_denies() -> None:
    ev = LocalEvaluator(allow=["files.read_file"])
    assert effect(ev, "files.read_file", path="a") == "allow"
    verdict = ev.evaluate(request("files.write_file", path="a"))
    assert verdict.effect == "deny" and verdict.reasons == ()
    assert "no rule allows files.write_file" in (verdict.message or "")


def test_deny_beats_ask_beats_allow() -> None:
    ev = LocalEvaluator(
        allow=["shell.*"], ask=["shell.run(command=git *)"], deny=["shell.run(command=git push*)"]
    )
    assert effect(ev, "shell.run", command="ls") == "allow"
    assert effect(ev, "shell.run", command="git status") == "ask"
    v = ev.evaluate(request("shell.run", command="git push --force"))
    assert v.effect == "deny" and v.reasons == ("deny:shell.run(command=git push*)",)


def test_path_aware_globs() -> None:
    ev = LocalEvaluator(allow=["files.write_file(path=src/**)", "files.read_file(path=docs/*)"])
    assert effect(ev, "files.write_file", path="src/a/b.py") == "allow"
    assert effect(ev, "files.write_file", path="tests/a.py") == "deny"
    assert effect(ev, "files.read_file", path="docs/a.md") == "allow"
    assert effect(ev, "files.read_file", path="docs/a/b.md") == "deny"


def test_wildcards_never_allow_parent_steps() -> None:
    ev = LocalEvaluator(allow=["files.write_file(path=src/**)"])
    assert effect(ev, "files.write_file", path="src/../etc/passwd") == "deny"
    assert effect(ev, "files.write_file", path="src/..\\..\\x") == "deny"
    deny = LocalEvaluator(allow=["files.*"], deny=["files.write_file(path=**/.env)"])
    assert effect(deny, "files.write_file", path="a/../b/.env") == "deny"


def test_missing_argument_does_not_match_and_arrays() -> None:
    ev = LocalEvaluator(allow=["x.y(paths=src/*)"], deny=["x.z(paths=*.key)"])
    assert effect(ev, "x.y") == "deny"
    assert effect(ev, "x.y", paths=["src/a", "src/b"]) == "allow"
    assert effect(ev, "x.y", paths=["src/a", "etc/b"]) == "deny"
    assert effect(ev, "x.y", paths=[]) == "deny"
    ev2 = LocalEvaluator(allow=["x.z"], deny=["x.z(paths=*.key)"])
    assert effect(ev2, "x.z", paths=["a.txt", "b.key"]) == "deny"


def test_quoted_values_and_several_constraints() -> None:
    ev = LocalEvaluator(allow=['shell.run(command="git log, -p", cwd=repo)'])
    assert effect(ev, "shell.run", command="git log, -p", cwd="repo") == "allow"
    assert effect(ev, "shell.run", command="git log, -p", cwd="other") == "deny"


@pytest.mark.parametrize(
    ("rule", "needle"),
    [
        ("", "non-empty"),
        ("read_file", "namespace.name"),
        ("files.read_file(path=src/**", "missing ')'"),
        ("files.read_file()", "empty argument list"),
        ("files.read_file(path)", "name=glob"),
        ("files.read_file(path=)", "empty glob"),
        ("files.read_file(path=[abc)", "bad glob"),
        ("files.read_file(path=a, path=b)", "constrained twice"),
        ('files.read_file(path="abc)', "unclosed quote"),
        ("Files.Read", "not a tool name"),
    ],
)
def test_malformed_rules_are_reported(rule: str, needle: str) -> None:
    with pytest.raises(RuleError) as info:
        LocalEvaluator(allow=[rule])
    assert needle in str(info.value)


def test_bind_reports_rules_that_can_never_match() -> None:
    registry = coding_registry(Recorder())
    LocalEvaluator(allow=["files.*", "shell.run(command=git *)"]).bind(registry)
    with pytest.raises(RuleError, match="no registered tool matches"):
        LocalEvaluator(allow=["git.status"]).bind(registry)
    with pytest.raises(RuleError, match="argument 'pth' is not in the input schema"):
        LocalEvaluator(deny=["files.read_file(pth=*)"]).bind(registry)


def test_from_file_with_lines(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text('allow = ["files.read_file"]\nask = [\n  "files.write_file(path=src/**)",\n]\n')
    ev = LocalEvaluator.from_file(path)
    assert effect(ev, "files.write_file", path="src/x") == "ask"
    path.write_text('allow = ["files.read_file"]\ndeny = [\n  "files.x(path=[a",\n]\n')
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path)
    assert info.value.line == 3 and info.value.path == str(path)
    path.write_text('allow = "files.read_file"\n')
    with pytest.raises(RuleError, match="must be a list"):
        LocalEvaluator.from_file(path)
    path.write_text('alow = ["files.read_file"]\n')
    with pytest.raises(RuleError, match="unknown key"):
        LocalEvaluator.from_file(path)
    path.write_text("allow = [\n")
    with pytest.raises(RuleError, match="not valid TOML"):
        LocalEvaluator.from_file(path)
    with pytest.raises(RuleError, match="cannot read"):
        LocalEvaluator.from_file(tmp_path / "missing.toml")


def test_indexed_by_tool_many_rules() -> None:
    ev = LocalEvaluator(allow=[f"ns.tool{i}(path=dir{i}/*)" for i in range(1000)])
    assert effect(ev, "ns.tool500", path="dir500/a") == "allow"
    assert effect(ev, "ns.tool500", path="dir501/a") == "deny"


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        "sub/.env",
        "a//.env",
        "a/./.env",
        "x/../.env",
        "./secrets/key",
        "secrets//k",
        "src\\..\\secrets\\k",
    ],
)
def test_deny_rules_match_normalized_paths(path: str) -> None:
    ev = LocalEvaluator(
        allow=["files.*"], deny=["files.*(path=**/.env)", "files.*(path=secrets/**)"]
    )
    assert effect(ev, "files.read_file", path=path) == "deny"


def test_double_star_slash_matches_no_directory_too() -> None:
    ev = LocalEvaluator(allow=["files.write_file(path=src/**/*.py)"])
    assert effect(ev, "files.write_file", path="src/a.py") == "allow"
    assert effect(ev, "files.write_file", path="src/x/y/a.py") == "allow"
    assert effect(ev, "files.write_file", path="src/a.txt") == "deny"
