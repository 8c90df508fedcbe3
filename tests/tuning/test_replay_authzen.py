"""``replay`` with an AuthZEN evaluator: many calls per ``evaluations`` request, counted as
one by one, each with the provenance of its own place in the conversation; a PDP that fails
denies and is counted as an evaluation error; Ctrl-C and bad lines as in a local replay;
and ``clearance replay`` of a configuration that names a real ``clearance pdp``, in worker
processes, reports what the local evaluator reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from authzen_support import RawPdp, http_response, request_body, start_pdp
from console_script import env as cli_env

from clearance import Harness, MemoryJournal, Tool, ToolRegistry
from clearance.policy.authzen import AuthZenEvaluator
from clearance.tuning import CorpusError, replay_async

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


def _line(path: Any, **extra: Any) -> str:
    return json.dumps(
        {"principal": 'User::"alice"', "tool": "notes.write", "arguments": {"path": path}, **extra}
    )


def _decide_by_path(request: bytes) -> bytes:
    """A PDP: allow a path starting with 'a', ask one starting with 'b', deny the rest."""
    line = request.split(b"\r\n", 1)[0]
    body = request_body(request)

    def one(item: dict[str, Any]) -> dict[str, Any]:
        path = item["context"]["arguments"]["path"]
        if path.startswith("b"):
            return {"decision": False, "context": {"ask": "b needs a person", "reasons": ["b"]}}
        return {"decision": path.startswith("a"), "context": {"reasons": ["by-path"]}}

    if line.startswith(b"POST /access/v1/evaluations "):
        return http_response(200, {"evaluations": [one(i) for i in body["evaluations"]]})
    return http_response(200, one(body))


def _harness(evaluator: AuthZenEvaluator) -> Harness:
    registry = ToolRegistry()
    registry.register("notes", [Tool("write", lambda a, c: "", input_schema=SCHEMA)])
    return Harness(registry, evaluator=evaluator, journal=MemoryJournal())


def _kinds(pdp: RawPdp) -> list[bytes]:
    return [r.split(b" ", 2)[1] for r in pdp.requests]


async def test_a_chunk_of_calls_is_one_evaluations_request() -> None:
    paths = [f"{'abc'[i % 3]}{i}" for i in range(25)]
    corpus = [_line(p, expected="allow") for p in paths] + [_line(7), ""]
    with RawPdp(_decide_by_path) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token="t" * 20, ask_field="ask", batch_size=10)
        report = await replay_async(corpus, _harness(evaluator))
    # 25 calls reach the PDP in 3 requests (10, 10, 5); the invalid one never does.
    assert _kinds(pdp) == [b"/access/v1/evaluations"] * 3
    assert [len(request_body(r)["evaluations"]) for r in pdp.requests] == [10, 10, 5]
    assert report.outcomes["allow"] == 9 and report.outcomes["ask"] == 8
    assert report.outcomes["deny"] == 8 and report.outcomes["invalid"] == 1
    assert report.hits == {"by-path": 17, "b": 8}
    assert report.agreement == (9, 25)


async def test_each_call_is_decided_with_the_provenance_of_its_own_place() -> None:
    # The PDP allows a path only when the user named it. c.txt is named by the user only in
    # the third line's conversation: the second line, decided in the same batch, must still
    # see it as made up.
    def by_provenance(request: bytes) -> bytes:
        decisions = [
            {"decision": bool(i["context"]["provenance"]["path"]["user"])}
            for i in request_body(request)["evaluations"]
        ]
        return http_response(200, {"evaluations": decisions})

    first = [{"role": "user", "content": "please write a.txt"}]
    second = [*first, {"role": "tool", "tool": "notes.write", "content": "done"}]
    third = [*second, {"role": "user", "content": "and now c.txt"}]
    corpus = [
        _line("a.txt", conversation=first),
        _line("c.txt", conversation=second),
        _line("c.txt", conversation=third),
    ]
    with RawPdp(by_provenance) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token="t" * 20, send_provenance=True)
        report = await replay_async(corpus, _harness(evaluator), sample_size=10)
    assert len(pdp.requests) == 1
    assert report.outcomes["allow"] == 2 and report.outcomes["deny"] == 1
    provenance = [
        i["context"]["provenance"]["path"] for i in request_body(pdp.requests[0])["evaluations"]
    ]
    assert [p["user"] for p in provenance] == [True, False, True]


async def test_a_pdp_that_fails_denies_every_call_and_is_counted() -> None:
    with RawPdp(http_response(503, b"", reason="Unavailable")) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token="t" * 20, batch_size=4)
        report = await replay_async([_line(f"a{i}") for i in range(6)], _harness(evaluator))
    assert report.outcomes["deny"] == 6 and report.outcomes["allow"] == 0
    assert report.error_calls == 6
    assert any("answered HTTP 503" in message for message in report.errors)
    assert len(pdp.requests) == 2  # 4 + 2: no retries


async def test_a_bad_line_stops_the_replay_or_is_skipped() -> None:
    corpus = [_line("a1"), _line("a2"), "{not json", _line("a3")]
    with RawPdp(_decide_by_path) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token="t" * 20)
        with pytest.raises(CorpusError) as caught:
            await replay_async(corpus, _harness(evaluator))
        assert caught.value.line == 3
        skipped = await replay_async(corpus, _harness(evaluator), skip_bad=True)
    assert skipped.bad_lines == 1 and skipped.outcomes["allow"] == 3


async def test_a_stop_ends_it_with_the_calls_decided_so_far() -> None:
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) >= 2

    corpus = [_line(f"a{i}") for i in range(3000)]
    with RawPdp(_decide_by_path) as pdp:
        evaluator = AuthZenEvaluator(pdp.url, token="t" * 20, batch_size=100)
        report = await replay_async(corpus, _harness(evaluator), stop=stop)
    assert report.interrupted
    assert 0 < report.calls < 3000
    assert report.outcomes["allow"] == report.calls


def test_clearance_replay_through_a_real_pdp_reports_what_the_local_evaluator_does(
    tmp_path: Path,
) -> None:
    rules = '[evaluator]\nkind = "local"\nallow = ["notes.write(path=a*)"]\nask = ["notes.write(path=b*)"]\n'
    tools = {
        "version": 1,
        "tools": [{"name": "notes.write", "input_schema": SCHEMA}],
    }
    (tmp_path / "pdp").mkdir()
    (tmp_path / "pdp" / "clearance.toml").write_text(rules)
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(_line(f"{'abc'[i % 3]}{i}", expected="allow") for i in range(40)) + "\n"
    )
    pdp = start_pdp("--config", "clearance.toml", "--tools", "../tools.json", cwd=tmp_path / "pdp")
    try:
        (tmp_path / "remote.toml").write_text(
            f'[evaluator]\nkind = "authzen"\nurl = "{pdp.url}"\nask_field = "ask"\nbatch_size = 6\n'
        )
        (tmp_path / "local.toml").write_text(rules)

        def replay(config: str, *extra: str) -> dict[str, Any]:
            env = {**cli_env(), "CLEARANCE_AUTHZEN_TOKEN": pdp.token}
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "clearance",
                    "replay",
                    str(corpus),
                    "--config",
                    config,
                    "--tools",
                    "tools.json",
                    "--json",
                    *extra,
                ],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            assert done.returncode == 0, done.stderr
            report: dict[str, Any] = json.loads(done.stdout)
            return report

        local = replay("local.toml")
        remote = replay("remote.toml", "--jobs", "2")
    finally:
        pdp.stop()
    assert remote["outcomes"] == local["outcomes"]
    assert remote["agreement"] == local["agreement"]
    assert remote["policies"]["hits"] == local["policies"]["hits"]
