"""The ledger's shortcuts for the common result (issue 18) record what the long way does."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from clearance.provenance import Provenance, TrustList
from clearance.provenance import ledger as ledger_module

TEXT = st.text(alphabet=st.sampled_from("ab1² .@-:\nxyzé٣"), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def state(p: Provenance) -> tuple[Any, ...]:
    p.origin("flush")  # scans what waits
    # In order: which keys a full ledger keeps depends on the order they were read in.
    return (list(p._marks.items()), p._phrases, p._places, p.overflowed, p.results)


def record(results: list[Any], max_scan: int, trust: TrustList | None = None) -> tuple[Any, ...]:
    p = Provenance(max_scan=max_scan, trust=trust)
    p.add_message("user", "send it to bob@example.com")
    for index, value in enumerate(results):
        p.add_result(f"ns.tool{index % 2}", f"c{index}", value)
    return state(p)


@given(
    st.lists(st.lists(TEXT, max_size=10) | JSON, max_size=6),
    st.sampled_from([4, 16, 256 * 1024]),
)
def test_a_list_of_strings_is_recorded_as_the_long_way_records_it(
    results: list[Any], max_scan: int
) -> None:
    fast = record(results, max_scan)
    with mock.patch.object(ledger_module, "_plain_strings", lambda value, limit: None):
        slow = record(results, max_scan)
    assert fast == slow


@given(TEXT)
def test_has_digit_is_any_digit(text: str) -> None:
    assert ledger_module._has_digit(text) == any(c.isdigit() for c in text)


def test_a_replaced_trust_list_applies_to_the_next_result() -> None:
    p = Provenance()
    p.add_result("bank.get", "c1", [{"recipient": "DE89370400440532013000"}])
    assert not p.origin("DE89370400440532013000")["user"]
    p.trust = TrustList(trusted_fields=(("bank.get", ("recipient",)),))
    p.add_result("bank.get", "c2", [{"recipient": "GB29NWBK60161331926819"}])
    assert p.origin("GB29NWBK60161331926819")["user"]
    assert p.origin("GB29NWBK60161331926819")["sources"] == [
        "tool:bank.get",
        "tool:bank.get#recipient",
    ]
