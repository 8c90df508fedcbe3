"""LocalEvaluator: numbers compare as numbers (issue 12 item 4, rule R11).

A deny rule on ``to_account=666`` used to compare ``json.dumps`` text, so ``666.0`` and
``6.66e2`` walked past it. These tests pin the documented semantics: a plain number in a
rule matches every spelling of that number, wildcards match the canonical text, booleans are
not numbers, and huge values neither crash nor hang.
"""

import json
import time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import ALICE

from clearance import CallContext, Harness, MemoryJournal, Tool, ToolRegistry
from clearance.errors import RuleError
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo


def request(tool: str, **arguments: object) -> AuthzRequest:
    ns, _, name = tool.partition(".")
    return AuthzRequest(ALICE, ToolInfo(tool, ns, name, False), arguments, SessionInfo("s"))


def effect(ev: LocalEvaluator, tool: str, **arguments: object) -> str:
    return ev.evaluate(request(tool, **arguments)).effect


SPELLINGS_OF_666 = [666, 666.0, json.loads("6.66e2"), json.loads("666.0"), json.loads("6660e-1")]


@pytest.mark.parametrize("value", SPELLINGS_OF_666, ids=repr)
def test_deny_rule_on_a_number_catches_every_spelling(value: object) -> None:
    ev = LocalEvaluator(allow=["bank.pay"], deny=["bank.pay(to_account=666)"])
    assert effect(ev, "bank.pay", to_account=value) == "deny"
    assert effect(ev, "bank.pay", to_account=667) == "allow"
    assert effect(ev, "bank.pay", to_account=666.5) == "allow"


@pytest.mark.parametrize("rule_value", ["666", "666.0", "6.66e2", "6.66E+2", "+666", "0666"])
@pytest.mark.parametrize("value", SPELLINGS_OF_666, ids=repr)
def test_a_rule_number_in_any_spelling_is_one_value(rule_value: str, value: object) -> None:
    ev = LocalEvaluator(
        allow=[f"bank.pay(to_account={rule_value})"],
        ask=[f"bank.ask(to_account={rule_value})"],
        deny=[f"bank.deny(to_account={rule_value})"],
    )
    assert effect(ev, "bank.pay", to_account=value) == "allow"
    assert effect(ev, "bank.ask", to_account=value) == "ask"
    verdict = ev.evaluate(request("bank.deny", to_account=value))
    assert verdict.effect == "deny" and verdict.reasons == (
        f"deny:bank.deny(to_account={rule_value})",
    )
    assert effect(ev, "bank.pay", to_account=665) == "deny"  # default deny


def test_numbers_in_arrays_compare_as_numbers() -> None:
    ev = LocalEvaluator(allow=["bank.pay(to=[0-9]*)"], deny=["bank.pay(to=666)"])
    assert effect(ev, "bank.pay", to=[1, 2.0, 3]) == "allow"
    assert effect(ev, "bank.pay", to=[1, json.loads("6.66e2")]) == "deny"
    allow_only = LocalEvaluator(allow=["bank.pay(to=666)"])
    assert effect(allow_only, "bank.pay", to=[666, 666.0]) == "allow"
    assert effect(allow_only, "bank.pay", to=[666, 667]) == "deny"


@pytest.mark.parametrize(
    ("glob", "value", "matches"),
    [
        ("66*", 666.0, True),  # an integral float is written as the integer: '666'
        ("66*", json.loads("6.66e2"), True),
        ("*.0", 666.0, False),
        ("666", 666.0, True),
        ("0.*", 0.5, True),
        ("0.*", json.loads("5e-1"), True),
        ("1e-0?", json.loads("0.00001"), True),  # other floats: Python's shortest repr
        ("-*", -3, True),
        ("1*", 1e308, True),  # 1e308 in full: 309 digits
        ("???", 1e308, False),
        ("1000000000000000000000000000000", 10**30, True),
        ("0x*", 2**3000, True),  # beyond 2,000 bits: hexadecimal
    ],
)
def test_wildcards_match_the_canonical_text(glob: str, value: object, matches: bool) -> None:
    ev = LocalEvaluator(allow=[f"x.y(n={glob})"])
    assert (effect(ev, "x.y", n=value) == "allow") is matches


@pytest.mark.parametrize(
    ("rule_value", "value"),
    [("1", True), ("0", False), ("1.0", True), ("true", 1), ("false", 0), ("false", 0.0)],
)
def test_booleans_are_not_numbers(rule_value: str, value: object) -> None:
    ev = LocalEvaluator(allow=["x.y", f"x.z(flag={rule_value})"], deny=[f"x.y(flag={rule_value})"])
    assert effect(ev, "x.y", flag=value) == "allow"  # the deny rule does not match
    assert effect(ev, "x.z", flag=value) == "deny"  # nor does the allow rule


def test_booleans_still_match_their_json_text() -> None:
    ev = LocalEvaluator(allow=["x.y(flag=true)"])
    assert effect(ev, "x.y", flag=True) == "allow"
    assert effect(ev, "x.y", flag=False) == "deny"


def test_strings_are_text_not_numbers() -> None:
    ev = LocalEvaluator(allow=["bank.pay(to=666)"])
    assert effect(ev, "bank.pay", to="666") == "allow"
    assert effect(ev, "bank.pay", to="666.0") == "deny"


def test_nested_numbers_are_written_canonically() -> None:
    ev = LocalEvaluator(allow=['x.y(o={"a": 666})'])
    assert effect(ev, "x.y", o={"a": 666.0}) == "allow"
    assert effect(ev, "x.y", o={"a": json.loads("6.66e2")}) == "allow"
    assert effect(ev, "x.y", o={"a": 666.5}) == "deny"


def test_a_deny_number_also_matches_what_a_double_reading_tool_sees() -> None:
    # Past 2**53 the integer and the float differ in Python, but a tool server that reads
    # JSON numbers as doubles (JavaScript) takes both for the same account.
    big = 12345678901234567890
    ev = LocalEvaluator(allow=["bank.pay"], deny=[f"bank.pay(to={big})"])
    assert effect(ev, "bank.pay", to=big) == "deny"
    assert effect(ev, "bank.pay", to=json.loads(f"{big}.0")) == "deny"
    assert effect(ev, "bank.pay", to=float(big)) == "deny"
    assert effect(ev, "bank.pay", to=big + 10_000) == "allow"
    deny_exp = LocalEvaluator(allow=["bank.pay"], deny=["bank.pay(to=1e30)"])
    assert effect(deny_exp, "bank.pay", to=10**30) == "deny"
    # An allow rule stays exact: it does not widen to a neighbouring integer.
    allow = LocalEvaluator(allow=[f"bank.pay(to={big})"])
    assert effect(allow, "bank.pay", to=big) == "allow"
    assert effect(allow, "bank.pay", to=big + 1) == "deny"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e308, "allow"),
        (-1e308, "ask"),
        (10**30, "allow"),
        (-(10**30), "ask"),
        (10**5000, "deny"),  # as a double (JavaScript) it is infinity: 1e400
        (-(10**100_000), "ask"),
        (float("inf"), "deny"),
        (5e-324, "allow"),
    ],
    ids=lambda v: f"{type(v).__name__}:{v.bit_length() if isinstance(v, int) else v}",
)
def test_huge_numbers_neither_crash_nor_hang(value: float, expected: str) -> None:
    ev = LocalEvaluator(
        allow=["x.y(n=*)", "x.y(n=1e308)"],
        ask=["x.y(n=-*)"],
        deny=["x.y(n=666)", "x.y(n=1e400)"],  # 1e400 reads as infinity, as JSON reads it
    )
    started = time.perf_counter()
    verdict = ev.evaluate(request("x.y", n=value))
    assert time.perf_counter() - started < 0.5
    assert verdict.effect == expected, verdict
    assert not verdict.errors


def test_a_huge_integer_value_is_hexadecimal_and_never_decimal() -> None:
    ev = LocalEvaluator(allow=["x.y(n=0x1*)"], deny=["x.y(n=*9*)"])
    started = time.perf_counter()
    assert effect(ev, "x.y", n=2**4_000_000) == "allow"  # '0x1000…': no digit 9, no hang
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("rule_value", ["1" * 601, "-" + "9" * 700])
def test_a_rule_number_with_too_many_digits_is_refused(rule_value: str) -> None:
    with pytest.raises(RuleError, match="at most 600 digits"):
        LocalEvaluator(deny=[f"x.y(n={rule_value})"])


# --- the property: equivalent spellings get one decision -------------------------------


@st.composite
def spellings(draw: st.DrawFn) -> list[object]:
    """A decimal number c x 10**e written many ways, each read as JSON reads it, plus the
    Python int and float when they are exactly that value."""
    c = draw(st.integers(-(10**9), 10**9))
    e = draw(st.integers(-12, 6))
    exact = Decimal(c).scaleb(e)
    texts = [
        f"{c}e{e}",
        f"{c}E{e:+d}",
        f"{c * 10}e{e - 1}",
        f"{c * 1000}e{e - 3}",
        format(exact, "f"),
        format(exact, "e"),
    ]
    if exact == exact.to_integral_value():
        texts.append(f"{int(exact)}.0")
        texts.append(f"{int(exact)}.000e0")
    values: list[object] = [json.loads(t) for t in texts]
    if exact == exact.to_integral_value():
        values += [int(exact), float(int(exact))]  # |value| < 2**53: both exact
    first = values[0]
    assert all(v == first for v in values), texts  # one value, however it is spelled
    return values


def number_globs() -> st.SearchStrategy[str]:
    near = st.builds(
        lambda c, e, form: form.format(c=c, e=e, x=Decimal(c).scaleb(e)),
        st.integers(-(10**4), 10**4),
        st.integers(-3, 3),
        st.sampled_from(["{c}e{e}", "{x:f}", "{x:e}", "{c}"]),
    )
    wild = st.sampled_from(
        ["*", "-*", "*0", "1*", "*.*", "*5", "?", "??", "[0-9]*", "*e-*", "0.*", "*00*", "-?*"]
    )
    return st.one_of(near, wild)


rule_lists = st.lists(number_globs().map(lambda g: f"bank.pay(to={g})"), max_size=4)


@given(
    values=spellings(),
    allow=rule_lists,
    ask=rule_lists,
    deny=rule_lists,
)
def test_r11_equivalent_number_spellings_get_one_decision(
    values: list[object], allow: list[str], ask: list[str], deny: list[str]
) -> None:
    ev = LocalEvaluator(allow=allow, ask=ask, deny=deny)
    verdicts = {repr(v): ev.evaluate(request("bank.pay", to=v)) for v in values}
    decisions = {(v.effect, v.reasons) for v in verdicts.values()}
    assert len(decisions) == 1, verdicts


@given(values=spellings())
def test_r11_a_rule_naming_the_number_matches_every_spelling(values: list[object]) -> None:
    for spelled in {format(Decimal(repr(values[0])), "e"), repr(values[0])}:
        ev = LocalEvaluator(allow=["bank.pay"], deny=[f"bank.pay(to={spelled})"])
        assert {effect(ev, "bank.pay", to=v) for v in values} == {"deny"}, spelled


# --- through a real harness -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_denied_account_never_runs_however_the_number_is_written() -> None:
    paid: list[Any] = []

    async def pay(arguments: dict[str, Any], ctx: CallContext) -> str:
        paid.append(arguments["to_account"])
        return "paid"

    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"to_account": {"type": "integer"}, "amount": {"type": "number"}},
        "required": ["to_account", "amount"],
        "additionalProperties": False,
    }
    registry.register("bank", [Tool("pay", pay, input_schema=schema)])
    evaluator = LocalEvaluator(allow=["bank.pay"], deny=["bank.pay(to_account=666)"])
    async with Harness(registry, evaluator=evaluator, journal=MemoryJournal()) as harness:
        session = await harness.create_session(principal=ALICE)
        for i, text in enumerate(["666", "666.0", "6.66e2", "6660e-1", "0.666e3"]):
            arguments = json.loads(f'{{"to_account": {text}, "amount": 5}}')
            outcome = await session.call_tool("bank__pay", arguments, call_id=f"c{i}")
            assert outcome.status == "denied", (text, outcome)
        outcome = await session.call_tool(
            "bank__pay", {"to_account": 667, "amount": 5}, call_id="ok"
        )
        assert outcome.status == "ok"
    assert paid == [667]


def test_a_rule_number_with_an_upper_case_exponent_is_a_number() -> None:
    ev = LocalEvaluator(allow=["bank.pay(to=1E3)"])
    assert effect(ev, "bank.pay", to=1000) == "allow"
    assert effect(ev, "bank.pay", to=1000.0) == "allow"
    assert effect(ev, "bank.pay", to=1001) == "deny"


def test_a_rule_number_of_600_digits_is_the_longest_accepted() -> None:
    longest = "9" * 600
    ev = LocalEvaluator(allow=[f"x.y(n={longest})"])
    assert effect(ev, "x.y", n=int(longest)) == "allow"
    with pytest.raises(RuleError, match="at most 600 digits"):
        LocalEvaluator(allow=[f"x.y(n=1{longest})"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2**2000 - 1, str(2**2000 - 1)),  # 2,000 bits: still decimal
        (2**2000, hex(2**2000)),  # 2,001 bits: hexadecimal
    ],
    ids=["2000-bits", "2001-bits"],
)
def test_integers_past_2000_bits_are_written_in_hexadecimal(value: int, text: str) -> None:
    # At the top level, in an object and in an array in an array.
    ev = LocalEvaluator(allow=[f"x.y(n={text[:6]}*)", f"x.y(o=*{text[:6]}*, a=*{text[:6]}*)"])
    assert effect(ev, "x.y", n=value) == "allow"
    assert effect(ev, "x.y", o={"n": value}, a=[[value]]) == "allow"


def test_objects_match_as_json_with_sorted_keys_and_canonical_numbers() -> None:
    # ('[' starts a class in a glob: '?' stands for the brackets.)
    ev = LocalEvaluator(allow=['x.y(o=\'{"a": ?1, 2.5?, "b": {"c": 3}}\')'])
    assert effect(ev, "x.y", o={"b": {"c": 3.0}, "a": [1.0, 2.5]}) == "allow"
    assert effect(ev, "x.y", o={"a": [1, 2.5], "b": {"c": 3}}) == "allow"
    assert effect(ev, "x.y", o={"a": [1, 2.6], "b": {"c": 3}}) == "deny"
