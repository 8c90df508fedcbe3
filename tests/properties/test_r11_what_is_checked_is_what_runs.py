"""R11 what is checked is what runs: one value, one fact, one decision, whatever its spelling.

- ``path``: on random trees of files, directories and symlinks (inside, outside, dangling,
  looping), the fact agrees with the kernel (``os.path.realpath`` and ``os.stat``): a path
  is accepted exactly when it lands inside the root without a loop, and its canonical value
  is where it lands; two spellings that land on one file get one decision.
- What runs is what was allowed: every file a files-tool handler reads or writes, found by
  its unique content, is one the policy allows when asked about it directly, and nothing
  outside the root is ever read or changed.
- ``url``, ``email`` and ``number``: equivalent spellings (case, trailing dots,
  percent-escapes, fullwidth letters, default ports, number formats) give one canonical
  value, one fact and one decision under random rules.

The ``command`` kind has its own property (test_r11_command_facts.py).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import anyio
from hypothesis import event, given
from hypothesis import strategies as st
from trees import Op, paths, trees, workspace

from clearance import Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.facts import EmailFact, FactError, NumberFact, PathFact, UrlFact
from clearance.policy import LocalEvaluator
from clearance.toolsets import register_files

ALICE = Principal("User", "alice")


def runs_into_loop(root: str, path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    for k in range(1, len(parts) + 1):
        try:
            os.stat(os.path.join(root, *parts[:k]))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return True
    return False


def lexically_fine(path: str) -> bool:
    return (
        bool(path)
        and not path.startswith("~")
        and not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in path)
        and os.fsencode(path) == path.encode("utf-8", "surrogateescape")
    )


def inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root + os.sep)


@given(ops=trees, path=paths)
def test_r11_the_path_fact_is_where_the_kernel_lands(ops: list[Op], path: str) -> None:
    with workspace(ops) as (root, _):
        try:
            canonical: str | None = PathFact(root).canonicalize(path).value
        except FactError:
            canonical = None
        if not lexically_fine(path):
            return
        real = os.path.realpath(os.path.join(root, path))
        expected = (
            inside(root, real)
            and not runs_into_loop(root, path)
            and not os.path.relpath(real, root).startswith("~")  # never read back the same
        )
        assert (canonical is not None) == expected, (path, real)
        if canonical is not None:
            assert os.path.join(root, canonical) if canonical != "." else root == real
            assert os.path.realpath(os.path.join(root, canonical)) == real
            assert PathFact(root).canonicalize(canonical).value == canonical  # idempotent


SPELLINGS = st.lists(st.sampled_from(["", "./", "/", "a/../", "in/../a/../"]), max_size=3)


@given(ops=trees, path=paths, noise=SPELLINGS, deny=st.sampled_from(["a/**", "**/f.txt", "**"]))
def test_r11_spellings_of_one_file_get_one_decision(
    ops: list[Op], path: str, noise: list[str], deny: str
) -> None:
    with workspace(ops) as (root, _):
        other = "".join(noise) + path
        if not (lexically_fine(path) and lexically_fine(other)):
            return
        first = os.path.realpath(os.path.join(root, path))
        second = os.path.realpath(os.path.join(root, other))
        if first != second or path.startswith("/"):
            return
        outcomes = anyio.run(decide_both, root, path, other, deny)
        assert outcomes[0][0] == outcomes[1][0], (path, other, outcomes)
        if outcomes[0][0] != "blocked":  # both canonicalized: to one value
            assert outcomes[0][1] == outcomes[1][1], (path, other, outcomes)


async def decide_both(root: str, a: str, b: str, deny: str) -> list[tuple[str, Any]]:
    registry = ToolRegistry()
    register_files(registry, root)
    evaluator = LocalEvaluator(allow=["files.*"], deny=[f"files.*(path={deny})"])
    async with Harness(registry, evaluator=evaluator) as harness:
        found: list[tuple[str, Any]] = []
        for path in (a, b):
            decision = await harness.decide(
                principal=ALICE, tool="files.read_file", arguments={"path": path}
            )
            found.append((decision.outcome, decision.arguments))
        return found


# Paths through the names the trees use, so that many calls reach real files and links.
TREE_PATHS = st.lists(
    st.sampled_from(["a", "b", "in", "link", "f.txt", "ж", "chain", "up", "esc", "..", "."]),
    min_size=1,
    max_size=4,
).map("/".join)
CALLS = st.lists(
    st.tuples(st.sampled_from(["read_file", "write_file"]), st.one_of(paths, TREE_PATHS)),
    min_size=1,
    max_size=4,
)
DENIES = st.lists(
    st.sampled_from(["a/**", "**/f.txt", "in/**", "b/*", "*", "**/link", "esc/**"]), max_size=3
)


@given(ops=trees, calls=CALLS, denies=DENIES)
def test_r11_every_file_a_handler_touches_was_allowed(
    ops: list[Op], calls: list[tuple[str, str]], denies: list[str]
) -> None:
    with workspace(ops) as (root, outside):
        anyio.run(touch_and_check, root, outside, calls, denies)


def mark_files(root: str) -> dict[str, str]:
    """Give every regular file under ``root`` (and the outside one) unique content."""
    marks = {}
    for directory, _, names in os.walk(os.path.dirname(root)):
        for name in names:
            full = os.path.join(directory, name)
            if os.path.islink(full):
                continue
            text = f"MARK:{full}\n"
            Path(full).write_text(text)
            marks[text] = full
    return marks


def files_holding(top: str, text: str) -> list[str]:
    """The regular files under ``top`` whose content is ``text``."""
    return [
        os.path.join(d, n)
        for d, _, names in os.walk(top)
        for n in names
        if not os.path.islink(os.path.join(d, n))
        and Path(os.path.join(d, n)).read_text(errors="replace") == text
    ]


def relative(full: str, root: str) -> str:
    return os.path.relpath(full, root)


def remark(full: str, marks: dict[str, str]) -> None:
    """Give a written file its mark back, so that later reads can name it."""
    marks.pop(Path(full).read_text(errors="replace"), None)
    Path(full).write_text(f"MARK:{full}\n")
    marks[f"MARK:{full}\n"] = full


def untouched(outside: str) -> bool:
    return Path(outside, "f.txt").read_text().startswith("MARK:")


async def touch_and_check(
    root: str, outside: str, calls: list[tuple[str, str]], denies: list[str]
) -> None:
    marks = mark_files(root)
    registry = ToolRegistry()
    register_files(registry, root)
    evaluator = LocalEvaluator(allow=["files.*"], deny=[f"files.*(path={glob})" for glob in denies])
    async with Harness(registry, evaluator=evaluator, journal=MemoryJournal()) as harness:
        session = await harness.create_session(principal=ALICE)
        for index, (tool, path) in enumerate(calls):
            token = f"WRITTEN:{index}\n"
            arguments = {"path": path} if tool == "read_file" else {"path": path, "content": token}
            outcome = await session.call_tool(f"files.{tool}", arguments)
            event(f"{tool}: {outcome.status}")
            touched: list[str] = []
            if tool == "read_file" and outcome.status == "ok":
                touched = [marks[outcome.text]] if outcome.text in marks else []
                assert touched or outcome.text == "", outcome.text
            if tool == "write_file":
                touched = files_holding(os.path.dirname(root), token)
                assert len(touched) <= 1
                assert bool(touched) == (outcome.status == "ok"), outcome
            for full in touched:
                assert inside(root, full), f"{tool} reached {full} through {path!r}"
                rel = relative(full, root)
                decision = await harness.decide(
                    principal=ALICE, tool=f"files.{tool}", arguments=arguments | {"path": rel}
                )
                assert decision.outcome == "allow", (path, rel, decision.reasons)
                if tool == "write_file":
                    remark(full, marks)
        assert untouched(outside)


HOSTS = ["example.com", "mail.example.co.uk", "a.b.github.io", "xn--mnchen-3ya.de"]


@st.composite
def host_spellings(draw: st.DrawFn) -> tuple[str, str]:
    host = draw(st.sampled_from(HOSTS))
    chars = list(host)
    for i, c in enumerate(chars):
        kind = draw(st.sampled_from(["same", "upper", "escape", "fullwidth"]))
        if c.isalpha() and kind == "upper":
            chars[i] = c.upper()
        elif c.isalpha() and kind == "escape":
            chars[i] = f"%{ord(c):02x}"
        elif c.isalnum() and kind == "fullwidth" and "xn--" not in host:
            chars[i] = chr(ord(c) + 0xFEE0)
    spelled = "".join(chars) + draw(st.sampled_from(["", "."]))
    return host, spelled


@given(
    spelled=host_spellings(),
    scheme=st.sampled_from(["https", "HTTPS", "Https"]),
    port=st.sampled_from(["", ":443"]),
    path=st.sampled_from(["/x", "/./x", "/a/../x", "/%2e/x", "/x/."]),
    deny=st.sampled_from(HOSTS),
)
def test_r11_spellings_of_one_url_are_one_fact(
    spelled: tuple[str, str], scheme: str, port: str, path: str, deny: str
) -> None:
    host, text = spelled
    canon = UrlFact().canonicalize(f"{scheme}://{text}{port}{path}")
    plain = UrlFact().canonicalize(f"https://{host}{path if path != '/x/.' else '/x/'}")
    assert canon.fact["host"] == host
    assert canon.fact["domain"] == plain.fact["domain"]
    assert UrlFact().canonicalize(canon.value).value == canon.value
    assert (canon.fact["host"] == deny) == (host == deny)


@given(spelled=host_spellings(), local=st.sampled_from(["bob", "BoB", "BOB"]))
def test_r11_spellings_of_one_address_are_one_fact(spelled: tuple[str, str], local: str) -> None:
    host, text = spelled
    canon = EmailFact().canonicalize(f"{local}@{text}")
    assert canon.value == f"bob@{host}"
    assert EmailFact().canonicalize(canon.value).value == canon.value


@given(
    number=st.integers(min_value=-(10**12), max_value=10**12),
    form=st.sampled_from(["{}", "{}.0", "{}.000", "{}e0", "{}.0E+0", "{}E0"]),
    deny=st.integers(min_value=-3, max_value=3),
)
def test_r11_spellings_of_one_number_get_one_decision(number: int, form: str, deny: int) -> None:
    value = json.loads(form.format(number))
    canon = NumberFact().canonicalize(value)
    assert canon.value == number and type(canon.value) is int
    outcome = anyio.run(pay, value, deny)
    assert outcome == anyio.run(pay, number, deny)
    assert (outcome == "denied") == (number == deny)


async def pay(to: Any, deny: int) -> str:
    registry = ToolRegistry()
    registry.register(
        "bank",
        [
            Tool(
                "pay",
                lambda arguments, ctx: "paid",
                input_schema={
                    "type": "object",
                    "properties": {"to": {"type": "integer"}},
                    "required": ["to"],
                    "additionalProperties": False,
                },
                facts={"/to": "number"},
            )
        ],
    )
    evaluator = LocalEvaluator(allow=["bank.pay"], deny=[f"bank.pay(to={deny})"])
    async with Harness(registry, evaluator=evaluator) as harness:
        session = await harness.create_session(principal=ALICE)
        return (await session.call_tool("bank.pay", {"to": to})).status
