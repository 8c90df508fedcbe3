"""Rule R15 against the real kernel: with the noop evaluator allowing every call,
``shell.run``'s programs still cannot write outside the workspace, read its secrets or
clearance's files, or open a TCP socket; what policies allow still works; and where the
kernel offers no Landlock the tool refuses to start unless told ``confinement = "none"``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import ALICE, harness

from clearance import CallToolResult, ConfinementError, ToolRegistry
from clearance.config import Config, build_registry, load_config
from clearance.harness.outcomes import CallOutcome
from clearance.policy import NoopEvaluator
from clearance.toolsets import _landlock, register_shell, shell_tools
from clearance.toolsets.confinement import Confinement, landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel offers no Landlock")

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]


def python(code: str) -> str:
    return shlex.join([PY, "-c", code])


@pytest.fixture
def places(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """``(workspace, outside)``: a workspace with a ``.env`` and a sibling directory
    holding ``keep.txt``."""
    work = tmp_path / "ws"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.txt").write_text("a\n")
    (work / ".env").write_text("API_KEY=sk-secret\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    yield work, outside


async def call_all(registry: ToolRegistry, commands: list[str]) -> list[CallOutcome]:
    """Each command through a harness whose evaluator allows everything."""
    outcomes = []
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        for i, command in enumerate(commands):
            outcomes.append(
                await session.call_tool("shell__run", {"command": command}, call_id=f"c{i}")
            )
    return outcomes


def shell_registry(work: Path, **options: Any) -> ToolRegistry:
    registry = ToolRegistry()
    register_shell(registry, work, allowed_programs=None, **options)
    return registry


def out(outcome: CallOutcome) -> dict[str, Any]:
    assert outcome.result is not None, outcome
    content = outcome.result.structured_content
    assert isinstance(content, dict)
    return content


@pytest.mark.anyio
async def test_nothing_outside_the_workspace_can_be_written_truncated_or_deleted(
    places: tuple[Path, Path],
) -> None:
    work, outside = places
    keep = outside / "keep.txt"
    attacks = [
        f"sh -c 'echo pwned > {keep}'",
        f"truncate -s 0 {keep}",
        f"rm -f {keep}",
        f"mv {keep} {work}/stolen.txt",
        f"touch {outside}/new.txt",
        f"mkdir {outside}/dir",
        f"ln -s /etc/passwd {outside}/link",
        python(f"open({str(keep)!r}, 'a').write('x')"),
        python(f"import os; os.truncate({str(keep)!r}, 0)"),
        python(f"import os; os.unlink({str(keep)!r})"),
        f"sh -c 'echo x > {work.parent}/planted'",
    ]
    outcomes = await call_all(shell_registry(work), attacks)
    for command, outcome in zip(attacks, outcomes, strict=True):
        assert outcome.status == "error", (command, outcome.text)  # it ran, and failed
        assert out(outcome)["exit_code"] != 0, command
    assert keep.read_text() == "keep\n"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (work.parent / "planted").exists()
    assert not (work / "stolen.txt").exists()


@pytest.mark.anyio
async def test_the_workspaces_secrets_cannot_be_read_copied_or_moved(
    places: tuple[Path, Path],
) -> None:
    work, _ = places
    (work / ".env.local").write_text("TOKEN=t0ken\n")
    attacks = [
        "cat .env",
        "cat .env.local",
        "cp .env src/copy",
        "mv .env src/moved",
        "ln .env src/hardlink",
        "sh -c 'cat < .env'",
        python("print(open('.env').read())"),
        "rm .env",
        "sh -c 'echo API_KEY=mine > .env'",
    ]
    outcomes = await call_all(shell_registry(work), attacks)
    for command, outcome in zip(attacks, outcomes, strict=True):
        assert outcome.status == "error", (command, outcome.text)
        assert "sk-secret" not in outcome.text and "t0ken" not in outcome.text, command
    assert (work / ".env").read_text() == "API_KEY=sk-secret\n"
    assert sorted(p.name for p in (work / "src").iterdir()) == ["a.txt"]
    # a symlink to the secret resolves to it: the kernel checks where a link leads
    (work / "src" / "link").symlink_to(work / ".env")
    (linked,) = await call_all(shell_registry(work), ["cat src/link"])
    assert linked.status == "error" and "sk-secret" not in linked.text


@pytest.mark.anyio
async def test_the_workspace_itself_is_writable(places: tuple[Path, Path]) -> None:
    work, _ = places
    commands = [
        "sh -c 'echo changed > src/a.txt'",
        "mkdir -p src/new/deeper",
        "sh -c 'echo made > src/new/deeper/file.txt'",
        "mv src/new src/renamed",
        "rm src/renamed/deeper/file.txt",
        "truncate -s 1 src/a.txt",
        python("import tempfile; f = tempfile.NamedTemporaryFile(); f.write(b'x'); print('tmp')"),
        "sh -c 'echo y > \"$HOME/h.txt\"'",
    ]
    outcomes = await call_all(shell_registry(work), commands)
    for command, outcome in zip(commands, outcomes, strict=True):
        assert outcome.status == "ok", (command, outcome.text)
    assert (work / "src" / "a.txt").read_text() == "c"
    assert (work / "src" / "renamed" / "deeper").is_dir()


@pytest.mark.anyio
async def test_no_tcp_socket_unless_a_port_is_allowed(places: tuple[Path, Path]) -> None:
    work, _ = places
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        connect = python(
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
        )
        bind = python(
            "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('bound')"
        )
        refused = await call_all(shell_registry(work), [connect, bind])
        for outcome in refused:
            assert outcome.status == "error" and "PermissionError" in out(outcome)["stderr"], (
                outcome.text
            )
        if landlock_abi() >= 4:
            allowed = await call_all(
                shell_registry(work, confinement=Confinement(connect_ports=(port,))), [connect]
            )
            assert out(allowed[0])["stdout"] == "connected\n", allowed[0].text


def git_available() -> bool:
    return shutil.which("git") is not None


@pytest.mark.anyio
@pytest.mark.skipif(not git_available(), reason="git is not installed")
async def test_what_policies_allow_still_works(places: tuple[Path, Path]) -> None:
    """git and pytest in a repository whose top directory holds a secret, and the demo."""
    work, _ = places
    subprocess.run(["git", "init", "-q", str(work)], check=True)  # noqa: ASYNC221
    (work / "src" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    env = {
        "PATH": f"{Path(PY).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "LANG": "C.UTF-8",
        **{
            f"GIT_{who}_{what}": v
            for who in ("AUTHOR", "COMMITTER")
            for what, v in (("NAME", "a"), ("EMAIL", "a@example.com"))
        },
    }
    commands = [
        "git status --short",
        "git add src",
        "git commit -q -m first",
        "git log --oneline",
        "pytest -q src/test_ok.py",
    ]
    outcomes = await call_all(shell_registry(work, env=env, timeout=120), commands)
    for command, outcome in zip(commands, outcomes, strict=True):
        assert outcome.status == "ok", (command, outcome.text)
    assert "?? .env" in out(outcomes[0])["stdout"]
    assert "first" in out(outcomes[3])["stdout"]
    assert "1 passed" in out(outcomes[4])["stdout"]
    demo_dir = work / "src" / "demo"
    demo_dir.mkdir()
    demo_env = {**env, "HOME": str(demo_dir), "CLEARANCE_STATE_DIR": str(demo_dir / "state")}
    (demo,) = await call_all(
        shell_registry(demo_dir, env=demo_env, timeout=120), ["clearance demo"]
    )
    assert demo.status == "ok", demo.text


def test_without_landlock_the_tool_refuses_to_start(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    work, outside = places
    monkeypatch.setattr(_landlock, "abi", lambda: 0)
    with pytest.raises(ConfinementError) as raised:
        shell_tools(work)
    assert raised.value.toolset == "shell" and raised.value.abi == 0
    assert 'confinement = "none"' in str(raised.value)
    # said in words, it runs unconfined
    (tool,) = shell_tools(work, confinement=Confinement(kind="none"))
    result = tool.handler({"command": f"touch {outside}/unconfined"}, context())
    assert not getattr(result, "is_error", True)
    assert (outside / "unconfined").exists()


def test_the_configuration_refuses_to_start_without_landlock_unless_it_says_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "clearance.toml"
    toml.write_text('[evaluator]\nkind = "noop"\n\n[tools.shell]\n')
    monkeypatch.setattr(_landlock, "abi", lambda: 0)
    with pytest.raises(ConfinementError):
        build_registry(load_config(toml))
    toml.write_text(
        '[evaluator]\nkind = "noop"\n\n[tools]\nconfinement = "none"\n\n[tools.shell]\n'
    )
    registry = build_registry(load_config(toml))
    assert registry.get("shell.run") is not None
    # the files tools run no program: they start either way
    toml.write_text('[evaluator]\nkind = "noop"\n\n[tools.files]\n')
    assert build_registry(load_config(toml)).get("files.write_file") is not None


def test_the_cli_refuses_to_start_without_landlock(tmp_path: Path) -> None:
    """A real ``clearance`` process: ``confinement`` must be one of its two words."""
    (tmp_path / "clearance.toml").write_text(
        '[evaluator]\nkind = "noop"\n\n[tools]\nconfinement = "off"\n\n[tools.shell]\n'
    )
    done = subprocess.run(
        [PY, "-m", "clearance", "tools", "export"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2, done
    assert 'tools.confinement must be "landlock" or "none"' in done.stderr


@pytest.mark.anyio
async def test_clearances_own_files_are_protected_from_the_tools(tmp_path: Path) -> None:
    """Issue 28: a clearance.toml planted by one approved write decided the next run. The
    one the CLI would load (even absent), the policies and the stores are out of reach of
    the files tools and of every program shell.run starts."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "README.md").write_text("hello\n")
    config = Config.default(work)
    assert config.tools.shell is not None
    shell = replace(config.tools.shell, allowed_programs=("sh", "cp", "ln", "cat"))
    config = replace(config, tools=replace(config.tools, shell=shell))
    registry = build_registry(config)
    config.journal.path.parent.mkdir(parents=True, exist_ok=True)
    config.journal.path.write_text("journal-record\n")
    assert config.path is None and not (work / "clearance.toml").exists()
    planted = '[evaluator]\nkind = "noop"\n'
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        written = await session.call_tool(
            "files__write_file", {"path": "clearance.toml", "content": planted}, call_id="w"
        )
        assert written.status == "error" and "configuration" in written.text
        commands = [
            "sh -c 'echo [evaluator] > clearance.toml'",
            "cp README.md clearance.toml",
            "ln -s README.md clearance.toml",
            f"cat {config.journal.path}",
            f"sh -c 'echo x >> {config.journal.path}'",
            f"sh -c 'echo x > {config.evaluator.policies}/coding.cedar'",
        ]
        for i, command in enumerate(commands):
            outcome = await session.call_tool("shell__run", {"command": command}, call_id=f"c{i}")
            assert outcome.status == "error", (command, outcome.text)
            assert out(outcome)["exit_code"] != 0, (command, outcome.text)
            assert "ermission denied" in out(outcome)["stderr"], (command, outcome.text)
        # existing files of the workspace's top directory stay writable
        edited = await session.call_tool(
            "shell__run", {"command": "sh -c 'echo bye > README.md'"}, call_id="e"
        )
        assert edited.status == "ok", edited.text
    assert not (work / "clearance.toml").exists()
    assert (work / "README.md").read_text() == "bye\n"
    assert config.journal.path.read_text() == "journal-record\n"


def test_the_wrapper_never_runs_a_program_it_could_not_confine(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    wrapper = [PY, "-I", "-S", _landlock.__file__]
    touch = ["--", "/usr/bin/touch", "touch", str(marker)]
    for words in (["abi=0"], ["abi=1", "grant=everything=2f"], ["nonsense"], []):
        done = subprocess.run(
            [*wrapper, *words, *touch], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == _landlock.REFUSED, (words, done)
        assert done.stderr.startswith("clearance confinement:"), words
        assert not marker.exists(), words
    # the words carry any path, and decode to what was encoded
    spec = {
        "abi": 7,
        "grants": [["/tmp/sp ace/ж\n=x", "write"]],
        "restrictions": [["/a/.env", "none"]],
        "connect_ports": [443],
        "bind_ports": [8000],
    }
    assert _landlock.decode_spec(_landlock.encode_spec(spec)) == spec


def test_the_ruleset_uses_what_the_kernel_offers(places: tuple[Path, Path]) -> None:
    work, _ = places
    abi = landlock_abi()
    confiner = Confinement(hidden_paths=(work / "state.db",)).start("shell", work)
    assert confiner is not None and confiner.abi == abi
    # every right an ABI knows is handled: v2 moves across directories, v3 truncate,
    # v5 device ioctls
    assert _landlock.handled_fs(1) == (1 << 13) - 1
    assert _landlock.handled_fs(2) == (1 << 14) - 1
    assert _landlock.handled_fs(3) == _landlock.handled_fs(4) == (1 << 15) - 1
    assert _landlock.handled_fs(5) == _landlock.handled_fs(abi if abi >= 5 else 5) == (1 << 16) - 1
    assert _landlock.handled_fs(0) == 0
    described = confiner.spec()
    grants, restrictions = described["grants"], described["restrictions"]
    assert isinstance(grants, list) and isinstance(restrictions, list)
    assert [str(work.resolve()), "write"] in grants
    assert [str((work / ".env").resolve()), "none"] in restrictions
    assert [str((work / "state.db-wal").resolve()), "none"] in restrictions


def context() -> Any:
    from clearance import CallContext, Principal

    return CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="shell.run",
        model_alias="shell__run",
        principal=Principal("User", "u"),
    )


def test_the_program_is_found_as_exec_would_find_it(places: tuple[Path, Path]) -> None:
    work, _ = places
    script = work / "src" / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from $0\n")
    (tool,) = shell_tools(work, allowed_programs=None)

    def run(command: str) -> Any:
        result = tool.handler({"command": command}, context())
        assert isinstance(result, CallToolResult)
        return result.structured_content

    assert run("no-such-program-xyz") == {"error": "not_found"}
    assert run("./src/missing.sh") == {"error": "not_found"}
    assert run("./src/hello.sh") == {"error": "not_executable"}
    assert run("src") == {"error": "not_found"}
    script.chmod(0o755)
    assert run("./src/hello.sh")["stdout"] == "hello from ./src/hello.sh\n"
    assert run("src/hello.sh")["exit_code"] == 0


@pytest.mark.anyio
async def test_the_file_tools_refuse_the_secrets_the_kernel_hides(tmp_path: Path) -> None:
    """One list of secrets for both (``[tools.landlock] protected``): what a program
    cannot read, files.read_file cannot either (the coding pack reads freely)."""
    work = tmp_path / "ws"
    (work / "svc").mkdir(parents=True)
    (work / "svc" / ".env.prod").write_text("TOKEN=t0ken-prod\n")
    (work / "keys").mkdir()
    (work / "keys" / "id.pem").write_text("-----BEGIN t0ken-pem\n")
    (work / "notes.md").write_text("t0ken in notes\n")
    (work / "link").symlink_to("svc/.env.prod")
    toml = tmp_path / "clearance.toml"
    toml.write_text(
        '[evaluator]\nkind = "noop"\n\n[tools.files]\nroot = "ws"\n\n[tools.shell]\n'
        '\n[tools.landlock]\nprotected = [".env*", "keys/*.pem"]\n'
    )
    registry = build_registry(load_config(toml))
    calls = [
        ("files__read_file", {"path": "svc/.env.prod"}),
        ("files__read_file", {"path": "link"}),
        ("files__read_file", {"path": "keys/id.pem"}),
        ("files__write_file", {"path": "svc/.env.new", "content": "x"}),
        ("files__edit", {"path": "svc/.env.prod", "edits": [{"old": "TOKEN", "new": "X"}]}),
        ("files__move_file", {"source": "keys/id.pem", "destination": "id.txt"}),
        ("files__apply_patch", {"patch": "--- /dev/null\n+++ b/.env\n@@ -0,0 +1 @@\n+A=1\n"}),
        ("shell__run", {"command": "cat svc/.env.prod keys/id.pem"}),
    ]
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        for i, (tool, arguments) in enumerate(calls):
            outcome = await session.call_tool(tool, arguments, call_id=f"c{i}")
            assert outcome.status == "error", (tool, arguments, outcome.text)
            assert "t0ken-" not in outcome.text, (tool, arguments)
        found = await session.call_tool("files__search", {"query": "t0ken"}, call_id="s")
    assert found.status == "ok", found.text
    assert "notes.md" in found.text and "t0ken-" not in found.text
    assert (work / "svc" / ".env.prod").read_text() == "TOKEN=t0ken-prod\n"
    assert not (work / ".env").exists() and not (work / "id.txt").exists()


@pytest.mark.anyio
async def test_a_workspace_that_holds_the_approvers_keys_reaches_none_of_them(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # R13 under R15: a workspace that is the home directory holds ~/.config/clearance. No
    # bundled tool reads or changes the approvers' keys there, whatever the policy allows.
    from clearance.harness.approvers import Approvers
    from clearance.toolsets import register_files

    work, _ = places
    keys = work / ".config" / "clearance"
    monkeypatch.setenv("CLEARANCE_APPROVERS_DIR", str(keys))
    credential = Approvers.default().add("alice")
    key_file = next((keys / "approvers").glob("alice*"))
    secret = key_file.read_bytes()
    assert secret and credential.name == "alice"
    rel = str(key_file.relative_to(work))

    # (Listing the names stays possible: Landlock's rights on a directory above are
    # inherited by everything beneath, and listing is one of them; see confinement.md.)
    shell = await call_all(
        shell_registry(work),
        [f"cat {shlex.quote(rel)}", f"rm -f {shlex.quote(rel)}", f"cp {shlex.quote(rel)} k"],
    )
    for outcome in shell:
        result = out(outcome)
        assert result["exit_code"] != 0, result
        assert secret.decode("latin-1") not in str(result)
    assert not (work / "k").exists()
    registry = ToolRegistry()
    register_files(registry, work)
    async with harness(registry, evaluator=NoopEvaluator()) as h:
        session = await h.create_session(principal=ALICE)
        read = await session.call_tool("files__read_file", {"path": rel}, call_id="r")
        moved = await session.call_tool(
            "files__move_file", {"source": ".config", "destination": "gone"}, call_id="m"
        )
    for outcome in (read, moved):
        assert outcome.result is not None and outcome.result.is_error, outcome
        assert "approvers' keys" in str(outcome.result.content)
    assert key_file.read_bytes() == secret
