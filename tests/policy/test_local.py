import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from support import ALICE, PATH_SCHEMA, Recorder, coding_registry

import clearance
from clearance import Tool, ToolRegistry
from clearance.errors import RuleError
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo, Verdict
from clearance.policy.base import evaluate
from clearance.policy.local import Rule, parse_rule


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


def test_a_rules_file_is_read_as_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    """A deny rule on a non-ASCII path means the same under an ASCII locale: the file is
    UTF-8, never the locale's encoding (which would refuse it, or read other
    characters into the rule)."""
    path = tmp_path / "rules.toml"
    path.write_text('deny = ["files.write_file(path=café/*)"]\n', encoding="utf-8")
    code = (
        "import sys; from clearance.policy import LocalEvaluator;"
        "print(ascii([r.text for r in LocalEvaluator.from_file(sys.argv[1]).rules]))"
    )
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    done = subprocess.run(
        [sys.executable, "-X", "utf8=0", "-c", code, str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ascii(["files.write_file(path=café/*)"])


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


def test_a_verdict_names_every_rule_that_hit_and_the_local_evaluator() -> None:
    ev = LocalEvaluator(
        allow=["files.read_file", "files.read_file(path=src/*)", "files.read_file(path=**.py)"],
        ask=["files.write_file(path=src/*)", "files.write_file(path=**.py)"],
    )
    # Rules without arguments first, then the argument rules that matched, in rule order.
    both = ev.evaluate(request("files.read_file", path="src/a.py"))
    assert both == Verdict(
        "allow",
        (
            "allow:files.read_file",
            "allow:files.read_file(path=src/*)",
            "allow:files.read_file(path=**.py)",
        ),
        evaluator="local",
    )
    plain = ev.evaluate(request("files.read_file", path="README"))
    assert plain == Verdict("allow", ("allow:files.read_file",), evaluator="local")
    only_plain = LocalEvaluator(allow=["files.*"], ask=["files.write_file"])
    assert only_plain.evaluate(request("files.write_file", path="a")) == Verdict(
        "ask", ("ask:files.write_file",), evaluator="local"
    )
    asked = ev.evaluate(request("files.write_file", path="src/a.py"))
    assert asked == Verdict(
        "ask",
        ("ask:files.write_file(path=src/*)", "ask:files.write_file(path=**.py)"),
        evaluator="local",
    )
    # The same call again gets the same verdict.
    assert ev.evaluate(request("files.write_file", path="src/a.py")) == asked
    default = ev.evaluate(request("files.write_file", path="README"))
    assert default == Verdict(
        "deny",
        evaluator="local",
        message="no rule allows files.write_file with these arguments",
    )


@pytest.mark.anyio
async def test_narrowed_allows_only_what_both_rule_sets_allow() -> None:
    root = LocalEvaluator(allow=["files.*"], ask=["files.write_file"], deny=["files.*(path=*.key)"])
    session = root.narrowed(["files.read_file", "files.write_file(path=src/*)"])

    async def decide(tool: str, path: str) -> str:
        return (await evaluate(session, request(tool, path=path))).effect

    assert await decide("files.read_file", "a.txt") == "allow"
    assert await decide("files.list_dir", "a") == "deny"  # the root allows it, not the session
    assert await decide("files.write_file", "src/a") == "ask"  # the root's ask stays
    assert await decide("files.write_file", "docs/a") == "deny"
    assert await decide("files.read_file", "a.key") == "deny"  # the root's deny stays
    assert root.evaluate(request("files.list_dir", path="a")).effect == "allow"  # unchanged


def _tool_with_schema(namespace: str, name: str, schema: dict[str, object]) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(namespace, [Tool(name, Recorder().handler(name), input_schema=schema)])
    return registry


def test_a_rule_names_an_argument_only_a_tools_schema_can_hold() -> None:
    rule = ["x.run(anything=a*)"]
    # No properties named, further ones allowed (by true or by a schema): any name may come.
    open_schemas: tuple[dict[str, object], ...] = (
        {"type": "object"},  # JSON Schema's default: further properties are allowed
        {"type": "object", "additionalProperties": True},
        {"type": "object", "additionalProperties": {"type": "string"}},
    )
    for open_schema in open_schemas:
        LocalEvaluator(allow=rule).bind(_tool_with_schema("x", "run", open_schema))
    # A tool that takes no arguments, or only the ones it names: the rule can never match.
    closed_schemas: tuple[dict[str, object], ...] = (
        {"type": "object", "additionalProperties": False},
        {"type": "object", "properties": {}, "additionalProperties": False},
        {"type": "object", "properties": {"command": {"type": "string"}}},
        {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "additionalProperties": True,
        },
    )
    for closed_schema in closed_schemas:
        with pytest.raises(RuleError) as info:
            LocalEvaluator(allow=rule).bind(_tool_with_schema("x", "run", closed_schema))
        assert str(info.value) == (
            "rule 'x.run(anything=a*)': argument 'anything' is not in the input schema of x.run"
        )


def test_bind_errors_name_the_rule_its_file_and_line(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(
        "a",
        [Tool(n, Recorder().handler(n), input_schema=PATH_SCHEMA) for n in ("w", "x", "y", "z")],
    )
    path = tmp_path / "rules.toml"
    path.write_text('allow = [\n  "a.*",\n  "git.status",\n]\n')
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path).bind(registry)
    error = info.value
    assert (error.rule, error.path, error.line) == ("git.status", str(path), 3)
    assert str(error) == f"{path}:3: rule 'git.status': no registered tool matches it"

    path.write_text('deny = [\n  "a.*(pth=*)",\n]\n')
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path).bind(registry)
    error = info.value
    assert (error.rule, error.path, error.line) == ("a.*(pth=*)", str(path), 2)
    # At most three of the tools the rule names are listed.
    assert str(error) == (
        f"{path}:2: rule 'a.*(pth=*)': argument 'pth' is not in the input schema of a.w, a.x, a.y"
    )

    registry = ToolRegistry()
    registry.register(
        "mail",
        [
            Tool(
                "send",
                Recorder().handler("send"),
                input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
                facts={"/to": "email"},
            )
        ],
    )
    path.write_text('allow = ["mail.send(to=*@Example.com)"]\n')
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path).bind(registry)
    error = info.value
    assert (error.rule, error.path, error.line) == ("mail.send(to=*@Example.com)", str(path), 1)
    assert str(error) == (
        f"{path}:1: rule 'mail.send(to=*@Example.com)': argument 'to' of mail.send is"
        " canonical: e-mail addresses are compared in lower case: write '*@example.com'"
    )


def test_rule_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("allow = [\n")
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path)
    assert (info.value.rule, info.value.path) == (str(path), str(path))
    assert str(info.value).startswith(f"{path}: rule {str(path)!r}: not valid TOML: ")
    missing = tmp_path / "missing.toml"
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(missing)
    assert (info.value.rule, info.value.path) == (str(missing), str(missing))
    assert str(info.value) == (
        f"{missing}: rule {str(missing)!r}: cannot read the rules file: No such file or directory"
    )
    path.write_text('allow = ["files.read_file"]\nalow = ["x.y"]\nasks = []\n')
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path)
    assert (info.value.rule, info.value.path) == ("alow, asks", str(path))
    assert str(info.value) == (
        f"{path}: rule 'alow, asks': unknown key(s); expected allow, ask, deny"
    )
    path.write_text('deny = "files.*"\n')
    with pytest.raises(RuleError) as info:
        LocalEvaluator.from_file(path)
    assert (info.value.rule, info.value.path) == ("deny", str(path))
    assert str(info.value) == f"{path}: rule 'deny': deny must be a list of rule strings"
    # A rule that is not a string is refused as such, in a file or not.
    path.write_text("allow = [5]\n")
    with pytest.raises(RuleError, match="a rule must be a non-empty string") as info:
        LocalEvaluator.from_file(path)
    assert (info.value.path, info.value.line) == (str(path), None)
    with pytest.raises(RuleError, match="a rule must be a non-empty string"):
        LocalEvaluator.from_mapping({"allow": [5]})
    evaluator = LocalEvaluator.from_mapping({"allow": ["files.read_file"]})
    assert effect(evaluator, "files.read_file", path="a") == "allow"


def test_rules_given_as_one_string_are_refused() -> None:
    with pytest.raises(RuleError) as info:
        LocalEvaluator(allow="files.*")
    assert info.value.rule == "files.*"
    assert str(info.value) == "rule 'files.*': allow must be a list of rules, not a string"


def test_a_rules_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text('allow = ["files.read_file(path=café/*)"]\n', encoding="utf-8")
    assert effect(LocalEvaluator.from_file(path), "files.read_file", path="café/a") == "allow"
    code = (
        "import sys\n"
        "from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo\n"
        "from clearance.types import Principal\n"
        "ev = LocalEvaluator.from_file(sys.argv[1])\n"
        "tool = ToolInfo('files.read_file', 'files', 'read_file', True)\n"
        "call = AuthzRequest(Principal('User', 'a'), tool, {'path': 'caf\\xe9/a'}, SessionInfo('s'))\n"
        "print(ev.evaluate(call).effect)\n"
    )
    # An ASCII locale, as on a server with LANG=C (no UTF-8 coercion, no UTF-8 mode), and
    # the clearance package this test imported.
    package_root = str(Path(clearance.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONUTF8": "0",
        "PYTHONPATH": package_root,
    }
    run = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=package_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.stdout.strip() == "allow", run.stderr


def test_an_argument_the_call_lacks_matches_no_constraint() -> None:
    ev = LocalEvaluator(allow=["x.y(opt=*)", "x.z(opt=null)"], deny=["x.d(opt=*)"])
    assert effect(ev, "x.y") == "deny"
    assert effect(ev, "x.y", opt="") == "allow"
    assert effect(ev, "x.z") == "deny"  # absent is not null
    assert effect(ev, "x.z", opt=None) == "allow"
    assert ev.evaluate(request("x.d")).reasons == ()


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (["src/a", "src/b/c"], "allow"),
        (["src/../etc/passwd"], "deny"),
        (["src/a", "src/b/../../etc"], "deny"),
        (["src/..\\..\\x"], "deny"),
        (["src/v1..2"], "allow"),  # '..' inside a name is no parent step
        (["x/../src/a"], "deny"),
        ([], "deny"),
    ],
)
def test_an_allow_rule_on_an_array_holds_for_every_element(paths: list[str], expected: str) -> None:
    ev = LocalEvaluator(allow=["files.copy(paths=src/**)"])
    assert effect(ev, "files.copy", paths=paths) == expected


def test_an_allow_rule_matches_a_path_as_written_never_normalized() -> None:
    ev = LocalEvaluator(allow=["files.copy(paths=src/*)", "files.read(path=src/*)"])
    assert effect(ev, "files.copy", paths=["src/a"]) == "allow"
    assert effect(ev, "files.copy", paths=["src//a"]) == "deny"
    assert effect(ev, "files.copy", paths=["src/b/../a"]) == "deny"
    assert effect(ev, "files.read", path="src//a") == "deny"


def test_an_allow_rule_that_names_a_parent_step_allows_it() -> None:
    ev = LocalEvaluator(allow=["files.read(path=../shared/*)", "files.copy(paths=../shared/*)"])
    assert effect(ev, "files.read", path="../shared/a") == "allow"
    assert effect(ev, "files.copy", paths=["../shared/a"]) == "allow"
    assert effect(ev, "files.copy", paths=["../other/a"]) == "deny"


@pytest.mark.parametrize(
    "paths",
    [
        ["README", "./secrets/key"],
        ["secrets//key"],
        ["a/../secrets/key"],
        ["secrets\\key"],
        ["secrets/key/"],
        ["secrets/./key"],
    ],
)
def test_a_deny_rule_on_an_array_catches_any_element_however_the_path_is_spelled(
    paths: list[str],
) -> None:
    ev = LocalEvaluator(allow=["files.copy"], deny=["files.copy(paths=secrets/*)"])
    assert effect(ev, "files.copy", paths=paths) == "deny"
    assert effect(ev, "files.copy", paths=["README", "secret/key"]) == "allow"


def test_a_deny_rule_on_an_array_catches_an_element_with_a_parent_step() -> None:
    ev = LocalEvaluator(allow=["files.copy"], deny=["files.copy(paths=**/.env)"])
    assert effect(ev, "files.copy", paths=["a/../.env"]) == "deny"
    assert effect(ev, "files.copy", paths=["a/../b/.env"]) == "deny"


def test_every_constraint_of_a_rule_must_match() -> None:
    # Each way a constraint can match (a '..' inside a name, a path once normalized, the
    # resolved command) still leaves the next constraint to check.
    ev = LocalEvaluator(
        allow=["x.y(a=v1..*, b=ok)", "x.z", "shell.run"],
        deny=["x.z(a=secrets/*, b=yes)", "shell.run(command=cat .env, cwd=/)"],
    )
    assert effect(ev, "x.y", a="v1..2", b="ok") == "allow"
    assert effect(ev, "x.y", a="v1..2", b="no") == "deny"
    assert effect(ev, "x.z", a="./secrets/k", b="yes") == "deny"
    assert effect(ev, "x.z", a="./secrets/k", b="no") == "allow"
    link = {"command": {"resolved": "cat .env", "outside_root": False}}
    at_root = facts_request("shell.run", link, command="cat link", cwd="/")
    assert ev.evaluate(at_root).effect == "deny"
    elsewhere = facts_request("shell.run", link, command="cat link", cwd="/x")
    assert ev.evaluate(elsewhere).effect == "allow"


def facts_request(tool: str, facts: Mapping[str, object], **arguments: object) -> AuthzRequest:
    ns, _, name = tool.partition(".")
    return AuthzRequest(
        ALICE, ToolInfo(tool, ns, name, False), arguments, SessionInfo("s"), facts=facts
    )


def test_a_deny_rule_also_matches_the_resolved_command_an_allow_rule_only_the_words() -> None:
    # 'settings.txt' is a link to '.env': the command fact's 'resolved' line names it.
    facts = {"command": {"resolved": "head .env", "outside_root": False}}
    deny = LocalEvaluator(allow=["shell.run"], deny=["shell.run(command=*.env*)"])
    assert deny.evaluate(facts_request("shell.run", facts, command="head settings.txt")).effect == (
        "deny"
    )
    allow = LocalEvaluator(allow=["shell.run(command=head .env)"])
    assert allow.evaluate(
        facts_request("shell.run", facts, command="head settings.txt")
    ).effect == ("deny")
    assert allow.evaluate(facts_request("shell.run", facts, command="head .env")).effect == "allow"
    # A word that leads outside the root never matches an allow or ask rule.
    outside = {"command": {"resolved": "head notes", "outside_root": True}}
    words = LocalEvaluator(allow=["shell.run(command=head *)"])
    assert words.evaluate(facts_request("shell.run", outside, command="head notes")).effect == (
        "deny"
    )


def test_a_fact_that_is_not_a_record_leaves_the_argument_to_decide() -> None:
    ev = LocalEvaluator(allow=["x.y(a=ok)"], deny=["x.y(a=no)"])
    assert ev.evaluate(facts_request("x.y", {"a": "no"}, a="ok")).effect == "allow"
    assert ev.evaluate(facts_request("x.y", {"a": None}, a="no")).effect == "deny"


def test_a_rule_built_by_hand_matches_its_tool_glob() -> None:
    rule = Rule("allow", "files.*", "files.*", ())
    assert rule.matches_tool("files.read_file") and not rule.matches_tool("shell.run")
    assert rule.id == "allow:files.*"
    assert effect(LocalEvaluator.from_rules([rule]), "files.read_file", path="a") == "allow"


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ("x.y(a=1,b=2)", {"a": "1", "b": "2"}),
        ("x.y(a=1, b=2, c=3)", {"a": "1", "b": "2", "c": "3"}),
        ("x.y(\ta=1,\tb=2)", {"a": "1", "b": "2"}),
        ('x.y(a="1, 2",b="3")', {"a": "1, 2", "b": "3"}),
        ('x.y(a= "1, 2")', {"a": "1, 2"}),
        ('x.y(a=  "x" , b=y)', {"a": "x", "b": "y"}),
        ('x.y(a="x" )', {"a": "x"}),
        ("x.y(a='it''s')", None),
        ("x.y(Xid=X*, X_b='Y')", {"Xid": "X*", "X_b": "Y"}),
    ],
)
def test_rule_arguments_parse_as_written(text: str, arguments: dict[str, str] | None) -> None:
    if arguments is None:
        with pytest.raises(RuleError, match="unexpected text after the quoted value of 'a'"):
            parse_rule("allow", text)
        return
    rule = parse_rule("allow", text)
    assert {c.name: c.glob for c in rule.args} == arguments


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("  ", "a rule must be a non-empty string"),
        ("Files.Read", "'Files.Read' is not a tool name or glob"),
        ("read_file", "name the tool as 'namespace.name' (or a glob like 'files.*')"),
        ("files.[z-a]", "bad tool glob: reversed range z-a at position 6"),
        ("files.read(path=src/**", "missing ')' at the end"),
        ("files.read(path=a, path=b)", "argument 'path' is constrained twice"),
        ("files.read(path=[z-a])", "bad glob '[z-a]': reversed range z-a at position 0"),
        ("files.read()", "empty argument list; drop the parentheses"),
        ("files.read(path=a, )", "expected name=glob in ''"),
        ("files.read(path)", "expected name=glob in 'path'"),
        ("files.read(1a=b)", "'1a' is not an argument name"),
        ('files.read(path="abc)', "unclosed quote in the value of 'path'"),
        ('files.read(path="a"b)', "unexpected text after the quoted value of 'path'"),
        ('files.read(path="")', "empty glob for 'path'"),
        ("files.read(path=)", "empty glob for 'path'"),
    ],
)
def test_a_malformed_rule_is_reported_with_its_text_file_and_line(text: str, message: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule("deny", text, path="rules.toml", line=7)
    error = info.value
    assert (error.rule, error.path, error.line) == (text.strip() or text, "rules.toml", 7)
    assert str(error) == f"rules.toml:7: rule {error.rule!r}: {message}"


def test_a_parsed_rule_keeps_its_line() -> None:
    assert parse_rule("allow", "files.*", path="r.toml", line=3).line == 3


# --- provenance constraints: <argument>.from and <argument>.values_from --------------------


def provenance_request(
    tool: str, provenance: Mapping[str, Mapping[str, object]], **arguments: object
) -> AuthzRequest:
    ns, _, name = tool.partition(".")
    return AuthzRequest(
        ALICE,
        ToolInfo(tool, ns, name, False),
        arguments,
        SessionInfo("s"),
        provenance=provenance,
    )


@pytest.mark.parametrize(
    ("record", "label"),
    [
        ({"user": True, "tool": True}, "user"),  # the user named it (a tool did too)
        ({"tool": True}, "tool"),
        ({"made_up": True}, "made_up"),
        ({}, "none"),
    ],
)
def test_a_from_constraint_matches_where_the_argument_came_from(
    record: Mapping[str, object], label: str
) -> None:
    ev = LocalEvaluator(allow=["bank.send"], deny=[f"bank.send(recipient.from={label})"])
    call = provenance_request("bank.send", {"recipient": record}, recipient="x", amount=5)
    assert ev.evaluate(call).reasons == (f"deny:bank.send(recipient.from={label})",)
    for other in {"user", "tool", "made_up", "none"} - {label}:
        ev = LocalEvaluator(allow=["bank.send"], deny=[f"bank.send(recipient.from={other})"])
        assert ev.evaluate(call).effect == "allow", other


@pytest.mark.parametrize(
    ("record", "label"),
    [
        ({"untrusted_values": ["evil.example"], "made_up_values": ["x.example"]}, "tool"),
        ({"made_up_values": ["x.example"]}, "made_up"),
        ({}, "user"),
    ],
)
def test_a_values_from_constraint_matches_where_the_values_inside_came_from(
    record: Mapping[str, object], label: str
) -> None:
    ev = LocalEvaluator(allow=["mail.send(body.values_from=user)"])
    call = provenance_request("mail.send", {"body": record}, body="see https://x")
    assert ev.evaluate(call).effect == ("allow" if label == "user" else "deny")
    exact = LocalEvaluator(allow=[f"mail.send(body.values_from={label})"])
    assert exact.evaluate(call).reasons == (f"allow:mail.send(body.values_from={label})",)


def test_an_argument_without_a_record_was_seen_nowhere_and_an_absent_one_matches_nothing() -> None:
    ev = LocalEvaluator(
        allow=["bank.send"], deny=["bank.send(recipient.from=made_up)", "bank.pay(to.from=*)"]
    )
    # No record for the argument: made up, whether other arguments have one or none does.
    other = provenance_request("bank.send", {"amount": {"user": True}}, recipient="x", amount=5)
    assert ev.evaluate(other).effect == "deny"
    assert ev.evaluate(request("bank.send", recipient="x")).effect == "deny"
    # No argument at all: a provenance constraint on it matches nothing.
    assert ev.evaluate(provenance_request("bank.pay", {"to": {"tool": True}})).reasons == ()
    assert ev.evaluate(request("bank.send", amount=5)).effect == "allow"


def test_a_provenance_constraint_is_one_constraint_among_the_rule_s() -> None:
    ev = LocalEvaluator(allow=["bank.send(recipient.from=user, amount=5)"])
    user = {"recipient": {"user": True}}
    assert ev.evaluate(provenance_request("bank.send", user, recipient="x", amount=5)).effect == (
        "allow"
    )
    assert ev.evaluate(provenance_request("bank.send", user, recipient="x", amount=6)).effect == (
        "deny"
    )
    tool = {"recipient": {"tool": True}}
    assert ev.evaluate(provenance_request("bank.send", tool, recipient="x", amount=5)).effect == (
        "deny"
    )


def test_a_provenance_constraint_parses_as_the_argument_and_the_label_glob() -> None:
    rule = parse_rule("deny", "bank.send(recipient.from=t*, body.values_from=made_up)")
    assert rule.reads_provenance
    first, second = rule.args
    assert (first.name, first.argument, first.origin, first.glob) == (
        "recipient.from",
        "recipient",
        "from",
        "t*",
    )
    assert (second.argument, second.origin, second.glob) == ("body", "values_from", "made_up")
    assert not parse_rule("deny", "bank.send(recipient=x)").reads_provenance
    mixed = parse_rule("deny", "bank.send(amount=5, recipient.from=tool)")
    assert mixed.reads_provenance and mixed.args[0].origin is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "bank.send(recipient.from=bank)",
            "recipient.from is one of user, tool, made_up, none; 'bank' matches none",
        ),
        (
            "mail.send(body.values_from=none)",
            "body.values_from is one of user, tool, made_up; 'none' matches none",
        ),
    ],
)
def test_a_provenance_label_no_record_can_have_is_a_rule_error(text: str, message: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule("deny", text, path="rules.toml", line=4)
    assert (info.value.rule, info.value.path, info.value.line) == (text, "rules.toml", 4)
    assert str(info.value) == f"rules.toml:4: rule {text!r}: {message}"


def test_a_deny_rule_matches_a_resolved_command_with_parent_steps_as_it_is() -> None:
    # 'link' leads to .env; the other word leaves the root and stays as written.
    facts = {"command": {"resolved": "cat .env a/../../z", "outside_root": True}}
    ev = LocalEvaluator(allow=["shell.run"], deny=["shell.run(command=cat .env **)"])
    call = facts_request("shell.run", facts, command="cat link a/../../z")
    assert ev.evaluate(call).reasons == ("deny:shell.run(command=cat .env **)",)


def test_bind_checks_every_argument_of_a_rule_with_a_provenance_constraint() -> None:
    registry = coding_registry(Recorder())
    LocalEvaluator(deny=["files.read_file(path.from=tool, path=*.env)"]).bind(registry)
    with pytest.raises(RuleError, match="argument 'pth' is not in the input schema"):
        LocalEvaluator(deny=["files.read_file(path.from=tool, pth=*.env)"]).bind(registry)
    with pytest.raises(RuleError, match="argument 'pth' is not in the input schema"):
        LocalEvaluator(deny=["files.read_file(pth.from=tool)"]).bind(registry)


def test_a_rule_matched_without_provenance_records_takes_every_argument_as_made_up() -> None:
    rule = parse_rule("deny", "bank.send(recipient.from=made_up)")
    assert rule.matches_args({"recipient": "x"})
    assert not parse_rule("deny", "bank.send(recipient.from=user)").matches_args({"recipient": "x"})
