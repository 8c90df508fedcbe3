"""files.search runs the model's query on RE2 (issue 12 item 8).

With Python's ``re``, a 26-character pattern froze every session of the process for 2.5 s:
the backtracking engine held the GIL in the worker thread, so the event loop stopped too.
RE2 matches in linear time and releases the GIL; what it cannot express is refused with a
message naming the construct.
"""

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
import re2  # type: ignore[import-untyped]
from hypothesis import example, given
from hypothesis import strategies as st
from support import ALICE

from clearance import (
    CallContext,
    CallToolResult,
    Harness,
    MemoryJournal,
    Principal,
    Tool,
    ToolRegistry,
)
from clearance.policy import LocalEvaluator
from clearance.toolsets import files_guardrail, files_tools

# 27 characters; a line of n 'a's costs Python's re about 2**n steps (n = 22: one second).
CATASTROPHIC = "^(a|aa)*(a*)*(a|a)*[^ab]?b$"


def search_tool(root: Path, **options: Any) -> Tool:
    return {t.name: t for t in files_tools(root, **options)}["search"]


def search(root: Path, **arguments: Any) -> CallToolResult:
    context = CallContext(
        session_id="s",
        turn_id=None,
        call_id="c",
        qualified_name="files.search",
        model_alias="files__search",
        principal=ALICE,
    )
    result = search_tool(root).handler(arguments, context)
    assert isinstance(result, CallToolResult)
    return result


def test_a_catastrophic_pattern_returns_quickly(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(("a" * 40 + "\n") * 5000 + "a" * 100_000 + "\naab\n")
    started = time.perf_counter()
    result = search(tmp_path, query=CATASTROPHIC, regex=True)
    assert time.perf_counter() - started < 1.0
    assert not result.is_error
    assert result.text == "a.txt:5002: aab"


@pytest.mark.parametrize(
    ("query", "names"),
    [
        (r"(a)\1", "a backreference"),
        (r"(?P<x>a)(?P=x)", "a backreference"),
        (r"foo(?=bar)", "a lookahead"),
        (r"foo(?!bar)", "a lookahead"),
        (r"(?<=x)y", "a lookbehind"),
        (r"(?<!x)y", "a lookbehind"),
        (r"(?>a+)b", "an atomic group"),
        (r"a++b", "a possessive quantifier"),
        (r"end\Z", r"\Z (write $"),
    ],
)
def test_unsupported_constructs_are_named(tmp_path: Path, query: str, names: str) -> None:
    (tmp_path / "a.txt").write_text("foobar\n")
    result = search(tmp_path, query=query, regex=True)
    assert result.is_error
    assert result.structured_content == {"error": "unsupported_regex"}
    assert f"uses {names}" in result.text and "RE2" in result.text


@pytest.mark.parametrize(
    ("query", "detail"), [("(", "missing )"), ("[a", "missing ]"), ("*a", "repetition")]
)
def test_invalid_regexes_are_errors(tmp_path: Path, query: str, detail: str) -> None:
    result = search(tmp_path, query=query, regex=True)
    assert result.is_error and result.structured_content == {"error": "bad_regex"}
    assert "not a valid regular expression" in result.text and detail in result.text


def test_a_lone_surrogate_query_is_refused(tmp_path: Path) -> None:
    result = search(tmp_path, query="x\ud800")
    assert result.is_error and result.structured_content == {"error": "bad_query"}
    assert "lone surrogate" in result.text


def test_ignore_case_in_both_modes(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Été\nété\nETE\n(Paren) x.y\n")
    assert search(tmp_path, query="été", ignore_case=True).structured_content["matches"] == 2
    assert search(tmp_path, query="été").structured_content["matches"] == 1
    regex = search(tmp_path, query="^ét[ée]$", regex=True, ignore_case=True)
    assert regex.structured_content["matches"] == 2
    # a plain query is a substring, its regex characters literal
    assert search(tmp_path, query="(paren) x.", ignore_case=True).text == "a.txt:4: (Paren) x.y"
    assert search(tmp_path, query="x.y", regex=True).structured_content["matches"] == 1
    assert search(tmp_path, query="x.", regex=False).structured_content["matches"] == 1


def test_search_ends_of_lines_whatever_the_line_breaks(tmp_path: Path) -> None:
    with open(tmp_path / "crlf.txt", "w", newline="") as f:
        f.write("alpha\r\nbeta\rgamma\u2028delta\x85omega")
    found = search(tmp_path, query=r"^\w+a$", regex=True).text.splitlines()
    assert found == [
        "crlf.txt:1: alpha",
        "crlf.txt:2: beta",
        "crlf.txt:3: gamma",
        "crlf.txt:4: delta",
        "crlf.txt:5: omega",
    ]
    assert search(tmp_path, query=r"\Aomega\z", regex=True).text == "crlf.txt:5: omega"


# --- the whole-file pass never changes the answer ---------------------------------------

REGEX_TOKENS = ["a", "b", "^", "$", r"\A", r"\z", "(?-m)", r"\b", ".", "[^a]", "a*", r"\s"]
REGEX_TOKENS += ["(?s)", "(a|b)", r"\n", r"\Qa.\E", "(?i)"]
BREAKS = ["\n", "\r\n", "\r", "\u2028", "\x0b", "\x85", "\x1c"]


@given(
    tokens=st.lists(st.sampled_from(REGEX_TOKENS), min_size=1, max_size=4),
    lines=st.lists(st.text(alphabet="abA .", max_size=4), max_size=5),
    breaks=st.lists(st.sampled_from(BREAKS), min_size=5, max_size=5),
    ignore_case=st.booleans(),
    regex=st.booleans(),
)
@example(tokens=[r"\A", "a"], lines=["b", "a"], breaks=["\n"] * 5, ignore_case=False, regex=True)
@example(tokens=["b", r"\z"], lines=["b", "a"], breaks=["\n"] * 5, ignore_case=False, regex=True)
@example(tokens=["(?-m)", "^a"], lines=["b", "a"], breaks=["\n"] * 5, ignore_case=False, regex=True)
@example(
    tokens=["^a$"],
    lines=["b", "a", "a"],
    breaks=["\r", "\r\n", "\x85", "\n", "\n"],
    ignore_case=False,
    regex=True,
)
def test_the_whole_file_pass_finds_exactly_the_matching_lines(
    tokens: list[str], lines: list[str], breaks: list[str], ignore_case: bool, regex: bool
) -> None:
    query = "".join(tokens)
    text = "".join(line + brk for line, brk in zip(lines, breaks, strict=False))
    options = re2.Options()
    options.literal = not regex
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        per_line = re2.compile(query, options)
    except re2.error:
        return
    expected = [
        f"f.txt:{n}: {line}"
        for n, line in enumerate(text.splitlines(), 1)
        if per_line.search(line) is not None
    ]
    with tempfile.TemporaryDirectory() as tmp:
        with open(Path(tmp) / "f.txt", "w", newline="", encoding="utf-8") as f:
            f.write(text)
        result = search(Path(tmp), query=query, regex=regex, ignore_case=ignore_case)
    assert not result.is_error, result.text
    assert (result.text.splitlines() if expected else []) == expected, (query, text)


# --- through a real harness: one session's search does not stall the others -------------


@pytest.mark.anyio
async def test_a_catastrophic_search_does_not_stall_another_session(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    # Lines of 'a's (the input on which a backtracking engine explodes) and one match per
    # file, so that every file is also read line by line: the search runs a while.
    for i in range(12):
        (root / f"f{i}.txt").write_text(("a" * 30 + "\n") * 40_000 + "aab\n")
    search_started = anyio.Event()
    search_finished = threading.Event()
    tools = files_tools(root)
    real_search = next(t for t in tools if t.name == "search")
    handler = real_search.handler

    def observed_search(arguments: dict[str, Any], ctx: CallContext) -> Any:
        anyio.from_thread.run_sync(search_started.set)
        try:
            return handler(arguments, ctx)
        finally:
            search_finished.set()

    real_search.handler = observed_search

    async def ping(arguments: dict[str, Any], ctx: CallContext) -> str:
        return "pong"

    registry = ToolRegistry()
    registry.register("files", tools)
    registry.register("app", [Tool("ping", ping, read_only=True)])
    async with Harness(
        registry,
        evaluator=LocalEvaluator(allow=["files.*", "app.*"]),
        argument_guardrails=[files_guardrail(root)],
        journal=MemoryJournal(),
    ) as harness:
        searcher = await harness.create_session(principal=ALICE)
        other = await harness.create_session(principal=Principal("User", "bob"))
        outcome: dict[str, Any] = {}

        async def run_search() -> None:
            started = time.perf_counter()
            outcome["search"] = await searcher.call_tool(
                "files__search", {"query": CATASTROPHIC, "regex": True}, call_id="s"
            )
            outcome["search_seconds"] = time.perf_counter() - started

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_search)
                await search_started.wait()
                started = time.perf_counter()
                pong = await other.call_tool("app__ping", {}, call_id="p")
                ping_seconds = time.perf_counter() - started
                ping_during_search = not search_finished.is_set()
    assert pong.status == "ok" and pong.text == "pong"
    assert ping_seconds < 0.5, ping_seconds
    assert ping_during_search, "the other session's call completed only after the search"
    result = outcome["search"]
    assert result.status == "ok", result.text
    assert result.text.splitlines() == sorted(f"f{i}.txt:40001: aab" for i in range(12))
    assert outcome["search_seconds"] < 10
