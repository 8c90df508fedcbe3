"""AuthZenEvaluator over real sockets: a PDP that fails in any way denies the call and
names itself and the cause in the journal, nothing is retried, connections are pooled,
the token goes where it should and only there."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from authzen_support import RawPdp, http_response, request_body, request_id, self_signed

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.harness.journal import MemoryJournal
from clearance.pdp import AuthZenPdp, PdpStarted, serve_pdp
from clearance.policy import LocalEvaluator
from clearance.policy.authzen import AuthZenEvaluator
from clearance.policy.base import AuthzRequest
from clearance.types import SessionInfo, ToolInfo

pytestmark = pytest.mark.anyio

TOKEN = "t0ken-" + "x" * 26
ALICE = Principal("User", "alice")
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


class Host:
    """A harness deciding with ``evaluator``, whose one tool records every run."""

    def __init__(self, evaluator: Any) -> None:
        self.ran: list[dict[str, Any]] = []
        self.journal = MemoryJournal()
        self.harness = Harness(self.registry(self.ran), evaluator=evaluator, journal=self.journal)

    @staticmethod
    def registry(ran: list[dict[str, Any]] | None = None) -> ToolRegistry:
        registry = ToolRegistry()

        def write(arguments: dict[str, Any], ctx: Any) -> str:
            if ran is not None:
                ran.append(dict(arguments))
            return "written"

        registry.register("notes", [Tool("write", write, input_schema=SCHEMA)])
        return registry

    async def call(self, path: str = "a.txt", call_id: str = "c1") -> Any:
        async with self.harness:
            session = await self.harness.create_session(principal=ALICE)
            return await session.call_tool("notes.write", {"path": path}, call_id=call_id)

    def verdict(self, call_id: str = "c1") -> dict[str, Any]:
        (record,) = [
            e.data for e in self.journal.events(call_id=call_id) if e.type == "call_decided"
        ]
        return dict(record["verdict"])


def _allow(request: bytes) -> bytes:
    return http_response(200, {"decision": True, "context": {"reasons": ["remote-policy"]}})


FAILURES: dict[str, tuple[Any, str]] = {
    "hang": ("hang", "no answer within 0.5 s"),
    "reset": ("reset", "the connection failed"),
    "close": ("close", "broke the HTTP exchange"),
    "trickle": ("trickle", "no answer within 0.5 s"),
    "500": (
        http_response(500, "oops", content_type="text/plain", reason="Oops"),
        "answered HTTP 500",
    ),
    "503": (http_response(503, b"", reason="Unavailable"), "answered HTTP 503"),
    "401": (http_response(401, "who are you", content_type="text/plain"), "answered HTTP 401"),
    "redirect": (
        http_response(302, b"", headers=(("Location", "https://elsewhere.example/"),)),
        "answered HTTP 302",
    ),
    "not-json": (http_response(200, b"<html>allowed</html>"), "answered malformed JSON"),
    "html": (
        http_response(200, b'{"decision": true}', content_type="text/html"),
        "not application/json",
    ),
    "twice": (
        http_response(200, b'{"decision": false, "decision": true}'),
        "appears twice",
    ),
    "yes": (http_response(200, {"decision": "yes"}), "not a Decision"),
    "one": (http_response(200, {"decision": 1}), "not a Decision"),
    "array": (http_response(200, [{"decision": True}]), "not a Decision"),
    "nan": (http_response(200, b'{"decision": true, "context": {"x": NaN}}'), "NaN"),
    "gzip": (
        http_response(
            200, gzip.compress(b'{"decision": true}'), headers=(("Content-Encoding", "gzip"),)
        ),
        "Content-Encoding",
    ),
    "other-request": (
        http_response(200, {"decision": True}, headers=(("X-Request-ID", "not-yours"),)),
        "answered another request",
    ),
    "huge": (
        http_response(200, b'{"decision": true, "pad": "' + b"x" * (1 << 20) + b'"}'),
        "more than 1048576 bytes",
    ),
    "short": (http_response(200, b'{"decision": true}')[:-4], "no answer within 0.5 s"),
    "short-then-close": (
        (http_response(200, b'{"decision": true}')[:-4], "close"),
        "broke the HTTP exchange",
    ),
    "not-http": ((b"SSH-2.0-OpenSSH_9.6\r\n", "close"), "broke the HTTP exchange"),
}


@pytest.mark.parametrize("name", FAILURES)
async def test_a_failing_pdp_denies_runs_nothing_and_is_named(name: str) -> None:
    behaviour, cause = FAILURES[name]
    with RawPdp(behaviour) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN, timeout=0.5)
        host = Host(evaluator)
        started = time.monotonic()
        outcome = await host.call()
        elapsed = time.monotonic() - started
        await evaluator.aclose()
    assert outcome.status == "denied", outcome
    assert host.ran == []
    verdict = host.verdict()
    assert verdict["effect"] == "deny" and verdict["evaluator"] == "authzen"
    assert verdict["errors"][0].startswith(f"authzen {pdp.url}: "), verdict
    assert cause in " ".join(verdict["errors"]), verdict
    assert "the AuthZEN PDP did not decide" in (outcome.message or "")
    assert elapsed < 0.5 + 3.0  # bounded: the timeout, plus a loaded machine's slack
    assert len(pdp.requests) <= 1  # never retried


async def test_a_pdp_that_cannot_be_reached_denies() -> None:
    with RawPdp("close") as pdp:
        url = pdp.url
    evaluator = AuthZenEvaluator(url, token=TOKEN, timeout=1.0)
    host = Host(evaluator)
    outcome = await host.call()
    await evaluator.aclose()
    assert outcome.status == "denied" and host.ran == []
    assert "cannot connect" in host.verdict()["errors"][0]


async def test_an_allowing_pdp_runs_the_call_with_its_reasons() -> None:
    # The other half of the tests above: the harness does run what the PDP allows.
    with RawPdp(_allow) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)
        host = Host(evaluator)
        outcome = await host.call("ok.txt")
        await evaluator.aclose()
    assert outcome.status == "ok" and host.ran == [{"path": "ok.txt"}]
    assert host.verdict()["reasons"] == ["remote-policy"]
    (request,) = pdp.requests
    head = request.partition(b"\r\n\r\n")[0].decode()
    assert head.startswith("POST /access/v1/evaluation HTTP/1.1")
    assert f"authorization: Bearer {TOKEN}" in head.lower().replace("bearer", "Bearer")
    assert "content-type: application/json" in head.lower()
    body = request_body(request)
    assert body["action"] == {"name": "notes.write"}
    assert body["resource"]["id"] == "notes.write" and body["resource"]["type"] == "tool"
    assert body["subject"] == {"type": "User", "id": "alice"}
    assert body["context"]["arguments"] == {"path": "ok.txt"}
    assert body["options"] == {"decision_context": True}


async def test_an_answer_sent_unasked_is_never_read_as_the_next_ones() -> None:
    # Two answers to one request, the second an allow: it must not answer the next request.
    deny_then_allow = http_response(200, {"decision": False}) + http_response(
        200, b'{"decision": true}'
    )
    seen: list[bytes] = []

    def answer(request: bytes) -> bytes:
        seen.append(request)
        return deny_then_allow if len(seen) == 1 else http_response(200, {"decision": False})

    with RawPdp(answer) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)
        first = await evaluator.evaluate(_authz_request())
        second = await evaluator.evaluate(_authz_request())
        await evaluator.aclose()
    assert (first.effect, second.effect) == ("deny", "deny")
    assert len(pdp.requests) == 2 and pdp.connections == 2


async def test_an_error_the_pdp_reports_is_named_after_it() -> None:
    answer = http_response(
        200, {"decision": True, "context": {"error": {"status": 503, "message": "store down"}}}
    )
    with RawPdp(answer) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)
        verdict = await evaluator.evaluate(_authz_request())
        await evaluator.aclose()
    assert verdict.effect == "deny"
    assert verdict.errors == (f"authzen {pdp.url}: the PDP reported an error: 503 store down",)


async def test_one_pooled_connection_serves_many_calls() -> None:
    with RawPdp(_allow) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)
        request = _authz_request()
        for _ in range(5):
            assert (await evaluator.evaluate(request)).effect == "allow"
        await evaluator.aclose()
        assert len(pdp.requests) == 5
        assert pdp.connections == 1


async def test_the_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PDP_TOKEN", "from-the-env-123")
    with RawPdp(_allow) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token_env="MY_PDP_TOKEN")
        assert (await evaluator.evaluate(_authz_request())).effect == "allow"
        await evaluator.aclose()
    assert b"Bearer from-the-env-123" in pdp.requests[0]
    assert "from-the-env" not in repr(evaluator)


async def test_without_a_token_none_is_sent_and_a_401_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLEARANCE_AUTHZEN_TOKEN", raising=False)
    with RawPdp(http_response(401, "no", content_type="text/plain")) as pdp:
        evaluator = AuthZenEvaluator(pdp.url)
        verdict = await evaluator.evaluate(_authz_request())
        await evaluator.aclose()
    assert b"authorization" not in pdp.requests[0].lower()
    assert verdict.effect == "deny"
    assert "its environment variable is not set" in verdict.errors[0]


@pytest.mark.parametrize("token", ["a b", "line\r\nX-Evil: 1", "caf\u00e9"])
def test_a_token_that_would_break_the_header_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        AuthZenEvaluator("http://127.0.0.1:9", token=token)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": 301}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"max_connections": 0}, "max_connections"),
        ({"batch_size": 0}, "batch_size"),
        ({"ask_field": ""}, "ask_field"),
    ],
)
def test_options_out_of_range_are_refused(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        AuthZenEvaluator("http://127.0.0.1:9", **options)


def test_a_ca_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ValueError, match="cannot read the CA file"):
        AuthZenEvaluator("https://pdp.example.com", ca_file=bad)


def test_the_evaluator_works_from_one_event_loop_then_another() -> None:
    with RawPdp(_allow) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)

        async def once() -> str:
            verdict = await evaluator.evaluate(_authz_request())
            await evaluator.aclose()
            return verdict.effect

        assert anyio.run(once) == "allow"
        assert anyio.run(once) == "allow"  # a new loop: a new pool


# --- discovery -----------------------------------------------------------------------------


def _metadata_pdp(document: Callable[[str], dict[str, Any]]) -> Callable[[bytes], bytes]:
    def answer(request: bytes) -> bytes:
        line = request.split(b"\r\n", 1)[0].decode()
        if line.startswith("GET /.well-known/authzen-configuration"):
            head = request.partition(b"\r\n\r\n")[0].decode().split("\r\n")[1:]
            host = {k.lower(): v for k, v in (h.split(": ", 1) for h in head)}["host"]
            return http_response(200, document(f"http://{host}"))
        if line.startswith("POST /custom/eval "):
            return http_response(200, {"decision": True, "context": {"reasons": ["custom"]}})
        return http_response(404, "no", content_type="text/plain")

    return answer


async def test_discovery_reads_the_endpoints_from_the_metadata() -> None:
    def document(base: str) -> dict[str, Any]:
        return {"policy_decision_point": base, "access_evaluation_endpoint": base + "/custom/eval"}

    with RawPdp(_metadata_pdp(document)) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN, discovery=True)
        first = await evaluator.evaluate(_authz_request())
        second = await evaluator.evaluate(_authz_request())
        many = await evaluator.evaluate_many([_authz_request(), _authz_request()])
        await evaluator.aclose()
    assert first.reasons == ("custom",) and second.reasons == ("custom",)
    # No evaluations endpoint in the metadata: a batch goes one evaluation at a time.
    assert [v.reasons for v in many] == [("custom",), ("custom",)]
    lines = [r.split(b"\r\n", 1)[0] for r in pdp.requests]
    assert lines.count(b"GET /.well-known/authzen-configuration HTTP/1.1") == 1


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (
            lambda base: {
                "policy_decision_point": "https://evil.example",
                "access_evaluation_endpoint": base + "/custom/eval",
            },
            "another policy_decision_point",
        ),
        (lambda base: {"policy_decision_point": base}, "no access_evaluation_endpoint"),
        (
            lambda base: {
                "policy_decision_point": base,
                "access_evaluation_endpoint": "http://evil.example/e",
            },
            "must use https://",
        ),
        (lambda base: {"policy_decision_point": base, "access_evaluation_endpoint": 7}, "refused"),
        (lambda base: ["not", "an", "object"], "not a JSON object"),
    ],
)
async def test_metadata_that_does_not_describe_this_pdp_denies(
    document: Callable[[str], Any], words: str
) -> None:
    with RawPdp(_metadata_pdp(document)) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN, discovery=True)
        verdict = await evaluator.evaluate(_authz_request())
        await evaluator.aclose()
    assert verdict.effect == "deny"
    assert words in verdict.errors[0]
    assert not any(r.startswith(b"POST") for r in pdp.requests)  # nothing sent anywhere


# --- batches ------------------------------------------------------------------------------------


def _authz_request(path: str = "a.txt", principal: Principal = ALICE) -> AuthzRequest:
    return AuthzRequest(
        principal=principal,
        tool=ToolInfo("notes.write", "notes", "write", False),
        arguments={"path": path},
        session=SessionInfo("s1"),
    )


async def test_a_batch_is_one_request_with_the_shared_subject_hoisted() -> None:
    def answer(request: bytes) -> bytes:
        body = request_body(request)
        decisions = [
            {"decision": item["context"]["arguments"]["path"].startswith("a")}
            for item in body["evaluations"]
        ]
        return http_response(
            200, {"evaluations": decisions}, headers=(("X-Request-ID", request_id(request)),)
        )

    with RawPdp(answer) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN, batch_size=3)
        verdicts = await evaluator.evaluate_many(
            [_authz_request(p) for p in ("a1", "b2", "a3", "a4", "z5")]
        )
        await evaluator.aclose()
    assert [v.effect for v in verdicts] == ["allow", "deny", "allow", "allow", "deny"]
    assert len(pdp.requests) == 2  # 3 + 2
    first = request_body(pdp.requests[0])
    assert pdp.requests[0].startswith(b"POST /access/v1/evaluations ")
    assert first["subject"] == {"type": "User", "id": "alice"}
    assert all("subject" not in item for item in first["evaluations"])
    assert first["options"] == {"evaluations_semantic": "execute_all", "decision_context": True}


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ({"evaluations": [{"decision": True}]}, "2 evaluations were asked and 1 answered"),
        ({"evaluations": [{"decision": True}] * 3}, "2 evaluations were asked and 3 answered"),
        ({"decision": True}, "'evaluations' list"),
        ({"evaluations": [{"decision": True}, {"decision": "no"}]}, "not a list of Decisions"),
    ],
)
async def test_a_batch_answer_that_does_not_fit_denies_every_call(
    answer: dict[str, Any], words: str
) -> None:
    with RawPdp(http_response(200, answer)) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)
        verdicts = await evaluator.evaluate_many([_authz_request("a"), _authz_request("b")])
        await evaluator.aclose()
    assert [v.effect for v in verdicts] == ["deny", "deny"]
    assert all(words in v.errors[0] for v in verdicts)


async def test_a_call_that_cannot_be_sent_is_denied_alone() -> None:
    with RawPdp(_allow) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token=TOKEN)
        odd = _authz_request(principal=Principal("User", "bob", {"when": object()}))
        verdicts = await evaluator.evaluate_many([odd, _authz_request()])
        await evaluator.aclose()
    assert [v.effect for v in verdicts] == ["deny", "allow"]
    assert "cannot be sent" in verdicts[0].errors[0]


# --- against clearance's own PDP, over TLS ------------------------------------------------


async def test_over_tls_the_pdp_is_trusted_only_through_the_ca_file(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    decider = Harness(
        Host.registry(), evaluator=LocalEvaluator(allow=["notes.write"]), journal=MemoryJournal()
    )
    app = AuthZenPdp(decider, token=TOKEN)
    started = anyio.Event()
    seen: list[PdpStarted] = []

    def ready(info: PdpStarted) -> None:
        seen.append(info)
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_pdp(app, port=0, tls_cert=cert, tls_key=key, ready=ready))
        with anyio.fail_after(30):
            await started.wait()
        url = seen[0].url
        assert url.startswith("https://127.0.0.1:")
        trusted = AuthZenEvaluator(url, token=TOKEN, ca_file=cert)
        assert (await trusted.evaluate(_authz_request())).effect == "allow"
        await trusted.aclose()
        untrusted = AuthZenEvaluator(url, token=TOKEN)
        verdict = await untrusted.evaluate(_authz_request())
        await untrusted.aclose()
        assert verdict.effect == "deny"
        assert "cannot connect" in verdict.errors[0] and "CERTIFICATE" in verdict.errors[0].upper()
        tg.cancel_scope.cancel()


def test_the_request_body_is_json_the_spec_reads() -> None:
    # What a PDP in another language reads: compact UTF-8 JSON, no NaN, no sets.
    from clearance.policy.authzen_wire import dumps, evaluation_request

    body = dumps(evaluation_request(_authz_request("é.txt")))
    assert json.loads(body.decode("utf-8"))["context"]["arguments"] == {"path": "é.txt"}


HIDE_H11 = """
import importlib.abc
import sys


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "h11":
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None


sys.meta_path.insert(0, Hide())
"""


def test_without_the_extra_building_it_says_how_to_install_it(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(HIDE_H11)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    code = (
        "from clearance.errors import MissingExtraError\n"
        "from clearance.policy import AuthZenEvaluator\n"  # importing needs nothing
        "try:\n"
        "    AuthZenEvaluator('http://127.0.0.1:9')\n"
        "except MissingExtraError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("pip install 'clearance[authzen]'")
    assert "the AuthZEN evaluator needs" in done.stdout
