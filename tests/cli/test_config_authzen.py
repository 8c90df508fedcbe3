"""``[evaluator] kind = "authzen"`` in clearance.toml: what it reads and refuses, the
evaluator it builds (token from the environment), the harness closing its connections, and
the CA file kept out of the agent's reach."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from authzen_support import RawPdp, http_response

from clearance import Principal
from clearance.config import AuthZenConfig, build_evaluator, build_harness, load_config
from clearance.errors import ConfigError
from clearance.policy.authzen import AuthZenEvaluator


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "clearance.toml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_every_option_is_read(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("")
    config = load_config(
        write(
            tmp_path,
            """
            [evaluator]
            kind = "authzen"
            url = "https://pdp.example.com/tenant1/"
            token_env = "ORG_PDP_TOKEN"
            timeout = 0.75
            ask_field = "access_request"
            send_arguments = false
            send_provenance = true
            ca_file = "ca.pem"
            discovery = true
            max_connections = 4
            batch_size = 10
            """,
        )
    )
    assert config.evaluator.kind == "authzen"
    assert config.evaluator.authzen == AuthZenConfig(
        "https://pdp.example.com/tenant1",
        token_env="ORG_PDP_TOKEN",
        timeout=0.75,
        ask_field="access_request",
        send_arguments=False,
        send_provenance=True,
        ca_file=tmp_path / "ca.pem",
        discovery=True,
        max_connections=4,
        batch_size=10,
    )


def test_the_defaults(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, '[evaluator]\nkind = "authzen"\nurl = "http://127.0.0.1:8767"\n')
    )
    assert config.evaluator.authzen == AuthZenConfig("http://127.0.0.1:8767")
    assert config.evaluator.authzen.token_env == "CLEARANCE_AUTHZEN_TOKEN"
    assert config.evaluator.authzen.timeout == 2.0


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('kind = "authzen"', "an authzen evaluator needs url"),
        ('kind = "authzen"\nurl = "http://pdp.example.com"', "must use https://"),
        ('kind = "authzen"\nurl = "https://u:p@pdp.example.com"', "user or password"),
        ('kind = "authzen"\nurl = 7', "evaluator.url must be a non-empty string"),
        (
            'kind = "authzen"\nurl = "https://p"\ntimeout = 0',
            "evaluator.timeout must be a positive number",
        ),
        ('kind = "authzen"\nurl = "https://p"\ntimeout = 301', "at most 300 seconds"),
        (
            'kind = "authzen"\nurl = "https://p"\nsend_arguments = "yes"',
            "send_arguments must be true or false",
        ),
        (
            'kind = "authzen"\nurl = "https://p"\nbatch_size = 0',
            "batch_size must be an integer >= 1",
        ),
        ('kind = "authzen"\nurl = "https://p"\nca_file = "none.pem"', "does not exist"),
        (
            'kind = "authzen"\nurl = "https://p"\npolicies = "x"',
            "does not apply to kind = 'authzen'",
        ),
        ('kind = "authzen"\nurl = "https://p"\ntoken = "secret"', "token"),
        ('kind = "cedar"\npack = "coding"\nurl = "https://p"', "does not apply to kind = 'cedar'"),
        ('kind = "remote"', '"cedar", "local", "authzen" or "noop"'),
    ],
)
def test_what_it_refuses_names_the_key(tmp_path: Path, table: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, f"[evaluator]\n{table}\n"))
    assert words in str(caught.value)
    assert "clearance.toml" in str(caught.value)


def test_the_evaluator_reads_its_token_from_the_named_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORG_PDP_TOKEN", "org-token-123")
    with RawPdp(http_response(200, {"decision": True})) as pdp:
        config = load_config(
            write(
                tmp_path,
                f'[evaluator]\nkind = "authzen"\nurl = "{pdp.url}"\ntoken_env = "ORG_PDP_TOKEN"\n',
            )
        )
        evaluator = build_evaluator(config)
        assert isinstance(evaluator, AuthZenEvaluator)
        from clearance.policy.base import AuthzRequest
        from clearance.types import SessionInfo, ToolInfo

        request = AuthzRequest(
            Principal("User", "a"), ToolInfo("x.y", "x", "y", True), {}, SessionInfo("s")
        )

        async def once() -> str:
            async with evaluator:
                return (await evaluator.evaluate(request)).effect

        assert anyio.run(once) == "allow"
    assert b"Authorization: Bearer org-token-123" in pdp.requests[0]


def test_a_token_that_cannot_be_a_header_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLEARANCE_AUTHZEN_TOKEN", "two words")
    config = load_config(write(tmp_path, '[evaluator]\nkind = "authzen"\nurl = "https://p"\n'))
    with pytest.raises(ConfigError, match=r"\[evaluator\]: the token"):
        build_evaluator(config)


@pytest.mark.anyio
async def test_the_harness_closes_the_evaluators_connections(tmp_path: Path) -> None:
    with RawPdp(http_response(200, {"decision": True})) as pdp:
        config = load_config(
            write(
                tmp_path,
                f"""
                [evaluator]
                kind = "authzen"
                url = "{pdp.url}"

                [tools.files]
                root = "."

                [journal]
                path = "state/clearance.db"
                """,
            )
        )
        async with build_harness(config) as harness:
            session = await harness.create_session(principal=Principal("User", "a"))
            outcome = await session.call_tool("files.list_dir", {"path": "."}, call_id="c1")
            assert outcome.status == "ok", outcome
            assert (pdp.connections, pdp.open_connections()) == (1, 1)
            assert not pdp.ended.is_set()
        # The pool closed its connection: the server reads the end of it.
        assert await anyio.to_thread.run_sync(pdp.ended.wait, 10)
        assert pdp.open_connections() == 0


@pytest.mark.anyio
async def test_the_ca_file_in_the_workspace_cannot_be_rewritten(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("the CAs the PDP is trusted through\n")
    with RawPdp(http_response(200, {"decision": True})) as pdp:
        config = load_config(
            write(
                tmp_path,
                f"""
                [evaluator]
                kind = "authzen"
                url = "{pdp.url}"

                [tools.files]
                root = "."

                [journal]
                path = "state/clearance.db"
                """,
            )
        )
        # ca_file set after loading: the loader checks that it names a file, the
        # evaluator that it holds certificates; here only its protection is in question.
        import dataclasses

        settings = dataclasses.replace(config.evaluator.authzen, ca_file=ca)  # type: ignore[type-var]
        config = dataclasses.replace(
            config, evaluator=dataclasses.replace(config.evaluator, authzen=settings)
        )
        async with (
            AuthZenEvaluator(pdp.url) as evaluator,
            build_harness(config, evaluator=evaluator) as harness,
        ):
            session = await harness.create_session(principal=Principal("User", "a"))
            outcome = await session.call_tool(
                "files.write_file", {"path": "ca.pem", "content": "evil CA"}, call_id="w1"
            )
    assert outcome.status != "ok"
    assert ca.read_text() == "the CAs the PDP is trusted through\n"
