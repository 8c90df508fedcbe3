"""``clearance.config``: loading and checking clearance.toml, and building a harness from it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from clearance import Principal
from clearance.config import (
    DEFAULT_SHELL_PROGRAMS,
    Config,
    build_evaluator,
    build_guardrails,
    build_harness,
    build_registry,
    default_journal_path,
    load_config,
    pack_path,
    resolve_config,
)
from clearance.errors import ConfigError
from clearance.guardrails import PathScope, Pattern, SecretScanner, SizeLimit
from clearance.policy import LocalEvaluator, NoopEvaluator
from clearance.policy.cedar import CedarEvaluator

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clearance.toml"


def write(tmp_path: Path, text: str, name: str = "clearance.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_the_commented_example_loads(tmp_path: Path) -> None:
    config = load_config(EXAMPLE)
    base = EXAMPLE.parent
    assert config.path == EXAMPLE and config.base_dir == base
    assert config.evaluator.kind == "cedar"
    assert config.evaluator.policies == pack_path("coding")
    assert [(g.kind, g.stage, g.advisory) for g in config.guardrails] == [
        ("path_scope", "arguments", False),
        ("secret_scanner", "result", False),
        ("size_limit", "arguments", False),
        ("pattern", "arguments", True),
    ]
    assert config.guardrails[2].options == {"max_bytes": 200_000}
    assert config.journal.path == base / "clearance.db"
    assert config.grants_path == config.journal.path
    assert config.approvals.non_interactive == "deny"
    assert config.limits.max_argument_bytes == 1_048_576
    assert config.tools.files is not None and config.tools.files.root == base / "workspace"
    assert config.tools.shell is not None
    assert config.tools.shell.allowed_programs == ("git", "ls", "pytest")
    assert config.tools.shell.root == base / "workspace"  # defaults to the files root

    args, results = build_guardrails(config)
    assert [type(g) for g in args] == [PathScope, SizeLimit, Pattern]
    assert [type(g) for g in results] == [SecretScanner]
    assert args[0].root == (base / "workspace").resolve()  # type: ignore[attr-defined]
    assert args[2].advisory
    registry = build_registry(config)
    assert {t.qualified_name for t in registry} == {
        "files.read_file", "files.write_file", "files.edit", "files.apply_patch",
        "files.move_file", "files.list_dir", "files.search", "shell.run",
    }  # fmt: skip


def test_paths_are_relative_to_the_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf" / "ws").mkdir(parents=True)
    (tmp_path / "conf" / "rules.toml").write_text('allow = ["files.read_file"]\n')
    write(
        tmp_path / "conf",
        """
        [evaluator]
        kind = "local"
        rules = "rules.toml"
        [journal]
        path = "state/j.db"
        [approvals]
        grants = "/abs/grants.db"
        [tools.files]
        root = "ws"
        """,
    )
    monkeypatch.chdir(tmp_path)
    config = load_config("conf/clearance.toml")
    conf = (tmp_path / "conf").resolve()
    assert config.evaluator.rules == conf / "rules.toml"
    assert config.journal.path == conf / "state" / "j.db"
    assert config.grants_path == Path("/abs/grants.db")
    assert config.tools.files is not None and config.tools.files.root == conf / "ws"
    assert isinstance(build_evaluator(config), LocalEvaluator)


UNKNOWN_KEYS = {
    "top-level table": ("[evaluator]\nkind = 'noop'\n\n[jurnal]\npath = 'x'\n", 4, "'jurnal'"),
    "evaluator key": (
        "[evaluator]\nkind = 'cedar'\npack = 'coding'\npolices = 'p'\n",
        4,
        "'evaluator.polices'",
    ),
    "guardrail key": (
        "[evaluator]\nkind = 'noop'\n[[guardrails]]\nkind = 'pattern'\n[[guardrails]]\n"
        "kind = 'size_limit'\nfeilds = ['/x']\n",
        7,
        "'guardrails[1].feilds'",
    ),
    "guardrail option": (
        "[evaluator]\nkind = 'noop'\n[[guardrails]]\nkind = 'size_limit'\n"
        "[guardrails.options]\nmax_bytes = 3\nmax_byte = 4\n",
        7,
        "'guardrails[0].options.max_byte' (expected one of: max_bytes, timeout)",
    ),
    "tools table": (
        "[evaluator]\nkind = 'noop'\n[tools.files]\nrot = '.'\n",
        4,
        "'tools.files.rot'",
    ),
    "approvals key": (
        "[evaluator]\nkind = 'noop'\n[approvals]\ntimeout = 3\n",
        4,
        "'approvals.timeout'",
    ),
}


@pytest.mark.parametrize("case", sorted(UNKNOWN_KEYS))
def test_unknown_keys_name_the_key_file_and_line(tmp_path: Path, case: str) -> None:
    text, line, key = UNKNOWN_KEYS[case]
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.path == str(path)
    assert info.value.line == line
    assert f"unknown key {key}" in str(info.value)
    assert str(info.value).startswith(f"{path}:{line}: ")


WRONG_VALUES = {
    "no evaluator": ("[limits]\nmax_queue = 3\n", "no [evaluator] table"),
    "evaluator kind": (
        "[evaluator]\nkind = 'opa'\n",
        'evaluator.kind must be "cedar", "local", "authzen" or "noop"',
    ),
    "cedar without policies": ("[evaluator]\nkind = 'cedar'\n", "exactly one of policies"),
    "cedar pack and dir": (
        "[evaluator]\nkind = 'cedar'\npack = 'coding'\npolicies = '.'\n",
        "exactly one of policies",
    ),
    "unknown pack": (
        "[evaluator]\nkind = 'cedar'\npack = 'nope'\n",
        "no bundled policy pack named 'nope' (bundled: agentdojo/banking,",
    ),
    "missing policy dir": (
        "[evaluator]\nkind = 'cedar'\npolicies = 'nowhere'\n",
        "evaluator.policies: ",
    ),
    "local without rules": (
        "[evaluator]\nkind = 'local'\n",
        "needs rules (a file) or allow/ask/deny lists",
    ),
    "local rules and inline": (
        "[evaluator]\nkind = 'local'\nrules = 'r.toml'\nallow = ['x.y']\n",
        "not both",
    ),
    "local rules not strings": (
        "[evaluator]\nkind = 'local'\nallow = [1]\n",
        "evaluator.allow must be a list of strings",
    ),
    "noop with policies": (
        "[evaluator]\nkind = 'noop'\npolicies = '.'\n",
        "evaluator.policies does not apply to kind = 'noop'",
    ),
    "guardrail kind": (
        "[evaluator]\nkind = 'noop'\n[[guardrails]]\nkind = 'regex'\n",
        "guardrails[0].kind must be one of",
    ),
    "guardrail stage": (
        "[evaluator]\nkind = 'noop'\n[[guardrails]]\nkind = 'pattern'\nstage = 'both'\n",
        'stage must be "arguments" or "result"',
    ),
    "path_scope on results": (
        "[evaluator]\nkind = 'noop'\n[[guardrails]]\nkind = 'path_scope'\nstage = 'result'\n",
        "checks arguments only",
    ),
    "guardrails not an array": (
        "[evaluator]\nkind = 'noop'\n[guardrails]\nkind = 'pattern'\n",
        "array of tables",
    ),
    "advisory not a bool": (
        "[evaluator]\nkind = 'noop'\n[[guardrails]]\nkind = 'pattern'\nadvisory = 'yes'\n",
        "advisory must be true or false",
    ),
    "limit not an int": (
        "[evaluator]\nkind = 'noop'\n[limits]\nmax_concurrency = 'ten'\n",
        "limits.max_concurrency must be an integer >= 1",
    ),
    "timeout not positive": (
        "[evaluator]\nkind = 'noop'\n[approvals]\nask_timeout = 0\n",
        "approvals.ask_timeout must be a positive number",
    ),
    "always without a person": (
        "[evaluator]\nkind = 'noop'\n[approvals]\nnon_interactive = 'allow_always'\n",
        "approvals.non_interactive must be",
    ),
    "files root missing": (
        "[evaluator]\nkind = 'noop'\n[tools.files]\nroot = 'nowhere'\n",
        "is not a directory",
    ),
    "tools not a table": ("tools = 3\n[evaluator]\nkind = 'noop'\n", "tools must be a table"),
    "not toml": ("[evaluator\nkind = 'noop'\n", "not valid TOML"),
}


@pytest.mark.parametrize("case", sorted(WRONG_VALUES))
def test_wrong_values_are_config_errors(tmp_path: Path, case: str) -> None:
    text, message = WRONG_VALUES[case]
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert message in str(info.value)
    assert info.value.path == str(path)


def test_toml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[evaluator]\nkind = 'noop'\nkind = 'local'\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.line == 3


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the config file: No such file"):
        load_config(tmp_path / "nope.toml")


def test_guardrail_options_are_checked_by_the_built_in(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [evaluator]
        kind = "noop"

        [[guardrails]]
        kind = "url_allowlist"
        options = { hosts = ["example.com"], schemes = "https" }
        """,
    )
    config = load_config(path)  # loading checks names; building checks values
    with pytest.raises(ConfigError) as info:
        build_guardrails(config)
    assert info.value.line == 4
    assert "guardrails[0] (url_allowlist)" in str(info.value)


def test_path_scope_root_defaults_to_the_files_root(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    path = write(
        tmp_path,
        """
        [evaluator]
        kind = "noop"
        [[guardrails]]
        kind = "path_scope"
        [[guardrails]]
        kind = "path_scope"
        name = "elsewhere"
        options = { root = "." }
        [tools.files]
        root = "ws"
        """,
    )
    [ws, here], _ = build_guardrails(load_config(path))
    assert ws.root == (tmp_path / "ws").resolve()  # type: ignore[attr-defined]
    assert ws.name == "path_scope" and here.name == "elsewhere"
    assert here.root == tmp_path.resolve()  # type: ignore[attr-defined]


def test_resolve_config_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    default = resolve_config()
    assert default.path is None and default.base_dir == tmp_path.resolve()
    assert default.evaluator.policies == pack_path("coding")
    assert default.journal.path == default_journal_path(tmp_path)
    assert not default.journal.path.is_relative_to(tmp_path.resolve())
    assert default.tools.shell is not None
    assert default.tools.shell.allowed_programs == DEFAULT_SHELL_PROGRAMS
    assert [g.kind for g in default.guardrails] == ["path_scope"]

    write(tmp_path, "[evaluator]\nkind = 'noop'\n")
    found = resolve_config()
    assert found.evaluator.kind == "noop" and found.path == (tmp_path / "clearance.toml").resolve()
    other = write(tmp_path, "[evaluator]\nkind = 'local'\nallow = ['files.*']\n", "other.toml")
    assert resolve_config(other).evaluator.kind == "local"


@pytest.mark.anyio
async def test_build_harness_runs_calls_and_journals_to_sqlite(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("alpha")
    path = write(
        tmp_path,
        """
        [evaluator]
        kind = "local"
        allow = ["files.read_file", "files.list_dir"]
        deny = ["files.write_file"]

        [[guardrails]]
        kind = "secret_scanner"
        options = { action = "redact" }

        [limits]
        max_concurrency = 2

        [tools.files]
        root = "ws"
        """,
    )
    config = load_config(path)
    harness = build_harness(config)
    assert harness.dispatcher.max_concurrency == 2
    async with harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        read = await session.call_tool("files__read_file", {"path": "a.txt"})
        write_ = await session.call_tool("files.write_file", {"path": "b.txt", "content": "x"})
    assert read.status == "ok" and read.text.endswith("alpha")
    assert write_.status == "denied" and write_.reasons == ("deny:files.write_file",)
    assert not (tmp_path / "ws" / "b.txt").exists()
    # the journal: in the state directory, not next to the config (the workspace)
    assert not (tmp_path / "clearance.db").exists()
    assert default_journal_path(tmp_path).is_file()
    from clearance.harness.journal_sqlite import read_sqlite

    types = [e.type for e in read_sqlite(default_journal_path(tmp_path))]
    assert types.count("call_decided") == 2 and "tool_finished" in types


def test_build_evaluator_kinds(tmp_path: Path) -> None:
    noop = Config.default(tmp_path)
    assert isinstance(build_evaluator(noop), CedarEvaluator)
    path = write(tmp_path, "[evaluator]\nkind = 'noop'\n")
    assert isinstance(build_evaluator(load_config(path)), NoopEvaluator)
