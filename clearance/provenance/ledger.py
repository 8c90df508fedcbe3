"""The ledger of one session: the values that entered it, and where each argument came from.

A :class:`Provenance` records the user's and system's messages and every tool result, as
the canonical keys of :mod:`clearance.provenance.values`, each with the places it was seen
in (``"user"``, ``"system"``, ``"tool:<qualified name>"``). :meth:`Provenance.describe`
says, for each top-level argument of a call, where its value came from: the record policies
read as ``context.provenance.<argument>``::

    sources           Set<String>  every place the value was found ("tool:*": maybe in a
                                   result the ledger could not keep, see Bounds)
    user              Bool         every unit of the value is the user's: found in a user
                                   message or a trusted source (the trust list)
    tool              Bool         some unit is not the user's and was found in a tool
                                   result (or another untrusted source)
    made_up           Bool         some unit was found nowhere
    untrusted_values  Bool         some value inside the text (a host, an e-mail address,
                                   an IBAN-like id) is not the user's and was found in a
                                   tool result
    made_up_values    Bool         some value inside the text was found nowhere
    tool_values       Set<String>  the inside values that are not the user's, canonical

A *unit* is the argument itself when it is a string or a number, each element of an array,
each string or number leaf of an object; booleans and null are not units. A string unit is
found where its literal (:func:`~clearance.provenance.values.literal`) appears in a user or
system message as a whole phrase, where it equals a string, a line, the value of a
``name: value`` line or an identifier-like word of a result, or where the canonical fact it
is as a whole (an address, a URL or host, an IBAN-like id, a number) was found.

Precedence: a unit the user named is ``user`` even when a tool result has it too; a tool
result never makes a value ``user`` unless the trust list names its tool, whatever it
contains (a result that echoes the user's text adds tool places, not user ones).

Bounds (per ledger, fail safe): at most ``max_values`` distinct keys, ``max_scan``
characters read per message or result, ``max_phrase_text`` characters of messages kept for
phrase matching. A key that does not fit, or text past ``max_scan``, is forgotten and sets
:attr:`Provenance.overflowed`; from then on a unit (or inside value) found nowhere counts as
from a tool, with the source ``"tool:*"``, never as made up and never as the user's.
Messages past ``max_phrase_text`` are not phrase-matched: their literals stop counting as
the user's (more denies, never fewer).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Literal

from clearance.provenance.trust import TrustList
from clearance.provenance.values import (
    MIN_LITERAL,
    clean_text,
    field_values,
    json_strings_and_numbers,
    literal,
    literal_keys,
    names_in,
    number_key,
    pointed_candidates,
    read_string,
    text_keys,
    values_in,
)

__all__ = [
    "ORIGIN_ATTRIBUTES",
    "Described",
    "Provenance",
    "ReportedProvenance",
    "origin_label",
    "values_label",
]

ORIGIN_ATTRIBUTES: Mapping[str, str] = {
    "sources": "Set<String>",
    "user": "Bool",
    "tool": "Bool",
    "made_up": "Bool",
    "untrusted_values": "Bool",
    "made_up_values": "Bool",
    "tool_values": "Set<String>",
}
"""The attributes of one argument's provenance record and their types (the Cedar schema
is generated from it, as a fact kind's record is)."""

MAX_VALUES = 20_000
MAX_SCAN = 256 * 1024
MAX_PHRASE_TEXT = 1024 * 1024
_PENDING_CHARS = 1024 * 1024
"""Text recorded and not yet scanned, at most (see ``Provenance._defer``)."""
_MAX_UNITS = 4096
"""Leaves of one argument looked at; past it the rest counts as found nowhere."""

_BEFORE = frozenset(" \n\t\"'([{<,;:*")
_AFTER = frozenset(" \n\t\"')]}>,;:*!?")
_CLOSING = frozenset(" \n\t\"')]}>")

Role = Literal["user", "system"]


def origin_label(record: Mapping[str, Any]) -> str:
    """One word for where an argument came from: ``user``, ``tool``, ``made_up`` or
    ``none`` (no units), in that precedence (local rules match ``<arg>.from`` on it)."""
    if record.get("user"):
        return "user"
    if record.get("tool"):
        return "tool"
    if record.get("made_up"):
        return "made_up"
    return "none"


def values_label(record: Mapping[str, Any]) -> str:
    """One word for the values inside an argument: ``tool`` if one came from a tool, else
    ``made_up`` if one was found nowhere, else ``user`` (every one, if any, is the user's)
    (local rules match ``<arg>.values_from`` on it)."""
    if record.get("untrusted_values"):
        return "tool"
    if record.get("made_up_values"):
        return "made_up"
    return "user"


def _phrase_in(phrase: str, text: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as a whole phrase: not inside a longer word,
    host, address or path (``bob@x.com`` is not in ``alice.bob@x.com``, ``evil.com`` is
    not in ``evil.com.au``)."""
    start = text.find(phrase)
    n = len(phrase)
    while start != -1:
        end = start + n
        if start == 0 or text[start - 1] in _BEFORE:
            after = text[end : end + 1]
            if not after or after in _AFTER:
                return True
            if after == ".":
                following = text[end + 1 : end + 2]
                if not following or following in _CLOSING:
                    return True
        start = text.find(phrase, start + 1)
    return False


class Provenance:
    """The values that entered one session, and where each came from (see the module
    docstring). A session has one (``session.provenance``); build one yourself to decide
    calls of a recorded conversation (``harness.decide(..., provenance=p)``).

    Not thread-safe: use one ledger from one event loop or thread.

    Args:
        trust: which sources count as the user's own (default: system messages do, no
            tool does); :meth:`describe` and :meth:`origin` may be given another.
        max_values: distinct keys kept (see Bounds in the module docstring).
        max_scan: characters read of one message or result.
        max_phrase_text: characters of messages kept for phrase matching.
        enabled: ``False`` records nothing and fails safe: every value counts as from a
            tool (``"tool:*"``), never as the user's nor as made up, so that a policy that
            reads provenance denies rather than trusts (``Harness(provenance=False)``:
            for applications whose policies never read it; it then costs nothing).
    """

    __slots__ = (
        "_bits",
        "_calls_tainted",
        "_marks",
        "_masks",
        "_pending",
        "_pending_chars",
        "_phrase_chars",
        "_phrases",
        "_places",
        "_record_pointers",
        "_tainted",
        "_tools",
        "_tools_trust",
        "_trusted",
        "enabled",
        "max_phrase_text",
        "max_scan",
        "max_values",
        "messages",
        "overflowed",
        "results",
        "trust",
    )

    def __init__(
        self,
        *,
        trust: TrustList | None = None,
        max_values: int = MAX_VALUES,
        max_scan: int = MAX_SCAN,
        max_phrase_text: int = MAX_PHRASE_TEXT,
        enabled: bool = True,
    ) -> None:
        self.trust = trust if trust is not None else TrustList()
        self.enabled = enabled
        self.max_values = max_values
        self.max_scan = max_scan
        self.max_phrase_text = max_phrase_text
        self.overflowed = not enabled
        """Some value was forgotten (a bound was reached, or the ledger is disabled):
        values found nowhere count as from a tool from now on."""
        self.messages = 0
        """Messages recorded."""
        self.results = 0
        """Tool results recorded."""
        self._marks: dict[str, int] = {}
        self._places: list[str] = []
        self._bits: dict[str, int] = {}
        self._phrases: dict[int, str] = {}
        self._phrase_chars = 0
        self._masks: dict[int, list[str]] = {}
        self._trusted: dict[TrustList, tuple[int, int]] = {}
        self._pending: list[tuple[int, list[str], Any, bool]] = []
        self._pending_chars = 0
        self._tainted = False
        """An untrusted result came: no record is one the user pointed to from now on."""
        self._calls_tainted = False
        """An untrusted result that no one pointed to came (a page she pointed to does not
        count): no call is one the user pointed to from now on."""
        self._record_pointers = 0
        """The bits of the places of records the user pointed to (``pointed_records``):
        a value found there may point to a call (``pointed_calls``)."""
        self._tools: dict[str, tuple[int, frozenset[str], frozenset[str]]] = {}
        """Tool -> (its place's bit, its trusted fields, the arguments that point to its
        calls, under ``_tools_trust``)."""
        self._tools_trust: TrustList | None = None

    @classmethod
    def from_conversation(
        cls, entries: Iterable[Mapping[str, Any]], *, trust: TrustList | None = None
    ) -> Provenance:
        """A ledger of a recorded conversation, in the replay corpus's shape (see
        docs/replay.md): ``{"role": "user" | "system", "content": text}`` for a message,
        ``{"role": "tool", "tool": qualified name, "call_id": id, "content": result}`` for
        a tool result (``"arguments"``: its call's, optionally).

        Raises:
            ValueError: an entry is not one of those.
        """
        ledger = cls(trust=trust)
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise ValueError(f"conversation entry {index} is not an object")
            role = entry.get("role")
            content = entry.get("content")
            if role == "user" or role == "system":
                if not isinstance(content, str):
                    raise ValueError(f"conversation entry {index}: content must be text")
                ledger.add_message(role, content)
            elif role == "tool":
                tool, call_id = entry.get("tool"), entry.get("call_id", "")
                if not isinstance(tool, str) or not tool or not isinstance(call_id, str):
                    raise ValueError(
                        f"conversation entry {index}: a tool result names its tool and call_id"
                    )
                arguments = entry.get("arguments")
                if arguments is not None and not isinstance(arguments, Mapping):
                    raise ValueError(
                        f"conversation entry {index}: a tool result's arguments are an object"
                    )
                ledger.add_result(tool, call_id, content, arguments)
            else:
                raise ValueError(
                    f"conversation entry {index}: role must be user, system or tool, not {role!r}"
                )
        return ledger

    # -- recording ------------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        """Nothing is kept: every value is made up (or, overflowed or disabled, from a
        tool)."""
        return not self._marks and not self._phrases and not self._pending

    @property
    def places(self) -> tuple[str, ...]:
        """The places values were recorded from, in order of first sight."""
        return tuple(self._places)

    def add_message(self, role: Role, text: str) -> None:
        """Record a message of the user or the system (the application's instructions).

        Raises:
            ValueError: ``role`` is neither ``"user"`` nor ``"system"``.
            TypeError: ``text`` is not a string.
        """
        if role != "user" and role != "system":
            raise ValueError(f"role must be 'user' or 'system', not {role!r}")
        if not isinstance(text, str):
            raise TypeError(f"a message is a string, not {type(text).__name__}")
        if not self.enabled:
            return
        self.messages += 1
        bit = self._bit(role)
        if len(text) > self.max_scan:
            text = text[: self.max_scan]
            self.overflowed = True
        cleaned = clean_text(text)
        self._defer(bit, [cleaned], (), message=True)
        self._add_phrase(bit, literal(cleaned))
        self._add_names(f"{role}#name", cleaned)
        # What she wrote as a value, whole, that no canonical form already pins down (an
        # address, a URL, an IBAN, a number, a date are exact already): the place a policy
        # may require of a value a common word of her sentence must not stand for (a
        # password, a code).
        values = [v for v in values_in(cleaned) if not read_string(v)[1]]
        if values:
            self._mark({"l:" + literal(v) for v in values}, self._bit(f"{role}#value"))

    def _add_names(self, place: str, text: str) -> None:
        """Record the names ``text`` gives (:func:`~clearance.provenance.values.names_in`)
        under ``place`` (``user#name``, ``pointed:<tool>#name``): a source a policy may
        require of a person's name, never a trusted one by itself."""
        names = names_in(text)
        if names:
            self._mark(
                {"l:" + key for key in map(literal, names) if len(key) >= MIN_LITERAL},
                self._bit(place),
            )

    def add_result(
        self,
        tool: str,
        call_id: str,
        value: Any,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        """Record what a call of ``tool`` (its qualified name) returned to the model: a
        string or a JSON value (its strings and numbers are read). ``arguments`` are the
        call's (its final arguments): read only when the trust list's ``pointed_calls``
        names the tool, to tell whether the user pointed to the call."""
        del call_id  # places are tools: a value is "from tool X", whichever call it was
        if not self.enabled:
            return
        self.results += 1
        # A tool's place and trusted fields are the same for each of its results: found
        # once per tool (again when the ledger's trust list is replaced).
        if self._tools_trust is not self.trust:
            self._tools.clear()
            self._tools_trust = self.trust
        known = self._tools.get(tool)
        if known is None:
            known = self._tools[tool] = (
                self._bit(f"tool:{tool}"),
                self.trust.fields_of(tool),
                self.trust.pointing_arguments_of(tool),
            )
        bit, fields, pointing = known
        strings = _plain_strings(value, self.max_scan)
        if strings is not None:  # a list of a few strings (a text result): read as is
            numbers: Any = ()
        else:
            strings, numbers, complete = json_strings_and_numbers(value, self.max_scan)
            if not complete:
                self.overflowed = True
        self._defer(bit, strings, numbers, message=False)
        for field in fields:
            # A field the trust list trusts is a place of its own ("tool:x#recipient").
            found, found_numbers = field_values(value, field, self.max_scan)
            if found or found_numbers:
                self._defer(self._bit(f"tool:{tool}#{field}"), found, found_numbers, message=False)
        if self.trust.trusts_tool(tool):
            return
        if (
            pointing
            and arguments is not None
            and not self._calls_tainted
            and self._points_to(pointing, arguments)
        ):
            self._add_pointed(tool, strings, numbers)
            # Its text may still tell the model which channel to read: no record is
            # pointed to after it (a page she named is a page someone else wrote).
            if not self._tainted:
                self._tainted = self.overflowed or _holds_values(strings, numbers)
            return
        if not self._tainted:
            self._point(tool, value, strings, numbers)
        elif self.trust.pointed_fields_of(tool):
            # A field of a record she named is hers whenever it is read: which record is
            # read may follow an injection, what she named it by may not.
            fields = self.trust.pointers_of(tool)
            records, _ = pointed_candidates(value)
            self._flush()
            trusted = self._trusted_mask(self.trust)
            self._point_fields(
                tool, [r for r in records if self._names_a_pointer(r, fields, trusted)]
            )
        if self._tainted and not self._calls_tainted:
            # What no one pointed to: from now on no call is pointed to either.
            self._calls_tainted = self.overflowed or _holds_values(strings, numbers)

    def _points_to(self, names: frozenset[str], arguments: Mapping[str, Any]) -> bool:
        """Whether the user pointed to a call with ``arguments``: it has at least one of
        ``names``, and every unit of each it has is the user's own or found in a record
        she pointed to, so far (the page she named, a link of a message she pointed to;
        not a link of a page, even one she pointed to)."""
        if self.overflowed:
            return False
        given = [arguments[name] for name in names if name in arguments]
        if not given:
            return False
        self._flush()  # what the user named so far
        mask = self._trusted_mask(self.trust) | self._record_pointers
        return all(self._record(value, mask)["user"] for value in given)

    def _add_pointed(self, tool: str, strings: list[str], numbers: Any) -> None:
        """Record a result of a call the user pointed to, whole, under ``pointed:<tool>``
        (names in its sentences found as in a message). It does not taint the ledger."""
        bit = self._bit(f"pointed:{tool}")
        self._defer(bit, strings, numbers, message=False)
        for text in strings:
            cleaned = clean_text(text)
            self._add_phrase(bit, literal(cleaned))
            self._add_names(f"pointed:{tool}#name", cleaned)

    def _point(self, tool: str, value: Any, strings: list[str], numbers: Any) -> None:
        """Record the records of an untrusted result that the user pointed to (the trust
        list's ``pointed_records``) under ``pointed:<tool>``. Anything else in it that
        holds a value (another record, text that is not those records) taints the ledger:
        from then on the model may read what it reads because an untrusted result told it
        to, and no record counts as pointed to. Past the scan limit, it taints too."""
        pointers = self.trust.pointers_of(tool)
        if not pointers:
            self._tainted = self.overflowed or _holds_values(strings, numbers)
            return
        records, rest = pointed_candidates(value)
        pointed: list[Any] = []
        if records:
            self._flush()  # what the user named so far, trusted results included
            trusted = self._trusted_mask(self.trust)
            for record in records:
                (pointed if self._names_a_pointer(record, pointers, trusted) else rest).append(
                    record
                )
        if pointed:
            found, found_numbers, complete = json_strings_and_numbers(pointed, self.max_scan)
            bit = self._bit(f"pointed:{tool}")
            self._record_pointers |= bit
            self._defer(bit, found, found_numbers, message=False)
            self._point_fields(tool, pointed)
            for text in found:  # a name in a sentence of it is found, as in a message
                cleaned = clean_text(text)
                self._add_phrase(bit, literal(cleaned))
                self._add_names(f"pointed:{tool}#name", cleaned)
            self._tainted = not complete
        if rest:
            found, found_numbers, complete = json_strings_and_numbers(rest, self.max_scan)
            if not complete or _holds_values(found, found_numbers):
                self._tainted = True

    def _point_fields(self, tool: str, pointed: list[Any]) -> None:
        """Record what records she pointed to hold under the fields the trust list's
        ``pointed_fields`` names (the participants of the meeting she named), each under a
        place of its own, ``pointed:<tool>#<field>``."""
        for field in self.trust.pointed_fields_of(tool):
            strings, numbers = field_values(pointed, field, self.max_scan)
            if strings or numbers:
                self._defer(self._bit(f"pointed:{tool}#{field}"), strings, numbers, message=False)

    def _names_a_pointer(
        self, record: Mapping[str, Any], pointers: frozenset[str], trusted: int
    ) -> bool:
        """Whether the value of ``record`` under one of ``pointers`` is the user's (named
        in a message or a trusted source)."""
        for field in pointers:
            named = record.get(field)
            if isinstance(named, str):
                phrase, whole, _ = read_string(named)
                if self._string_mask(phrase, whole) & trusted:
                    return True
        return False

    def _defer(self, bit: int, strings: list[str], numbers: Any, *, message: bool) -> None:
        """Keep what was read until a record is asked for: the text is scanned then, once
        (a session whose policies never read provenance never scans it). Past
        ``_PENDING_CHARS`` it is scanned now, so that what waits stays bounded. A string
        too short to be a literal and without a digit holds no value ("ok"): dropped."""
        if not message:
            strings = [t for t in strings if len(t) >= MIN_LITERAL or _has_digit(t)]
            if not strings and not numbers:
                return
        self._pending.append((bit, strings, numbers, message))
        self._pending_chars += sum(map(len, strings))
        if self._pending_chars > _PENDING_CHARS:
            self._flush()

    def _flush(self) -> None:
        """Scan everything recorded since the last record was asked for, in order."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_chars = 0
        trusted = self._trusted_mask(self.trust)
        for bit, strings, numbers, message in pending:
            self._mark(numbers, bit)
            for text in strings:
                cleaned = text if message else clean_text(text)
                self._mark(text_keys(cleaned), bit)
                if not message:
                    self._mark(literal_keys(cleaned), bit)
                    if bit & trusted:
                        # A trusted tool's text is the user's own: its phrases count as
                        # a message's do (under the ledger's own trust list).
                        self._add_phrase(bit, literal(cleaned))

    def _add_phrase(self, bit: int, phrase: str) -> None:
        """Keep ``phrase`` for phrase matching, while the bound allows."""
        if phrase and self._phrase_chars + len(phrase) < self.max_phrase_text:
            self._phrase_chars += len(phrase) + 1
            known = self._phrases.get(bit)
            self._phrases[bit] = phrase if known is None else f"{known}\n{phrase}"

    def _bit(self, place: str) -> int:
        bit = self._bits.get(place)
        if bit is None:
            bit = self._bits[place] = 1 << len(self._places)
            self._places.append(place)
        return bit

    def _mark(self, keys: Any, bit: int) -> None:
        marks = self._marks
        limit = self.max_values
        for key in keys:
            known = marks.get(key)
            if known is not None:
                marks[key] = known | bit
            elif len(marks) < limit:
                marks[key] = bit
            else:
                self.overflowed = True

    # -- describing -----------------------------------------------------------------------

    def describe(self, arguments: Mapping[str, Any], trust: TrustList | None = None) -> Described:
        """The provenance record of each top-level argument (see the module docstring), a
        mapping that computes each record when it is first read and then keeps it: a
        policy that reads one argument's provenance pays for that one, and one that reads
        none pays for none (:attr:`Described.computed` holds what was read)."""
        return Described(self, arguments, trust or self.trust)

    def origin(self, value: Any, trust: TrustList | None = None) -> dict[str, Any]:
        """The provenance record of one value (a string, a number, an array or object)."""
        self._flush()
        return self._record(value, self._trusted_mask(trust or self.trust))

    def _trusted_mask(self, trust: TrustList) -> int:
        count = len(self._places)
        cached = self._trusted.get(trust)
        if cached is not None and cached[0] == count:
            return cached[1]
        mask = 0
        for index, place in enumerate(self._places):
            if trust.trusts(place):
                mask |= 1 << index
        if len(self._trusted) > 64:
            self._trusted.clear()
        self._trusted[trust] = (count, mask)
        return mask

    def _record(self, value: Any, trusted: int) -> dict[str, Any]:
        found = 0
        units = 0
        user = True
        tool = made_up = unseen = False
        inside_tool = inside_made_up = False
        tool_values: list[str] = []
        overflowed = self.overflowed
        marks = self._marks
        units_of = _one_unit(value)
        for kind, item in units_of if units_of is not None else _units(value):
            units += 1
            if kind == "s":
                phrase, whole, inside = read_string(item)
                mask = self._string_mask(phrase, whole)
                if overflowed and mask == 0:
                    unseen = True
                for shown, key in inside:
                    m = marks.get(key, 0)
                    if m & trusted:
                        continue
                    if m or overflowed:
                        inside_tool = True
                        if shown not in tool_values:
                            tool_values.append(shown)
                    else:
                        inside_made_up = True
            elif kind == "n":
                mask = marks.get(item, 0)
                if overflowed and mask == 0:
                    unseen = True
            else:  # past _MAX_UNITS: not looked at
                mask = 0
            found |= mask
            if mask & trusted:
                continue
            user = False
            if mask or overflowed:
                tool = True
            else:
                made_up = True
        sources = list(self._sources(found)) if found else []
        if unseen:
            sources.append("tool:*")
        return {
            "sources": sources,
            "user": user and units > 0,
            "tool": tool,
            "made_up": made_up,
            "untrusted_values": inside_tool,
            "made_up_values": inside_made_up,
            "tool_values": sorted(tool_values),
        }

    def _string_mask(self, phrase: str, whole: tuple[str, ...]) -> int:
        """Where a string unit was found: its literal in a result or as a phrase of a
        message, or the canonical fact it is as a whole."""
        marks = self._marks
        mask = 0
        if len(phrase) >= MIN_LITERAL:
            mask = marks.get("l:" + phrase, 0)
            for bit, joined in self._phrases.items():
                if not mask & bit and _phrase_in(phrase, joined):
                    mask |= bit
        for key in whole:
            mask |= marks.get(key, 0)
        return mask

    def _sources(self, mask: int) -> list[str]:
        cached = self._masks.get(mask)
        if cached is None:
            places = self._places
            cached = sorted(places[i] for i in range(len(places)) if mask >> i & 1)
            if len(self._masks) < 4096:
                self._masks[mask] = cached
        return cached

    def __repr__(self) -> str:
        return (
            f"Provenance(messages={self.messages}, results={self.results}, "
            f"values={len(self._marks)}, overflowed={self.overflowed})"
        )


def _has_digit(text: str) -> bool:
    # A letter is never a digit: a word ("ok", "no") is answered without a loop.
    return not text.isalpha() and any(c.isdigit() for c in text)


def _holds_values(strings: list[str], numbers: Any) -> bool:
    """Whether what was read of a result holds a value (what ``_defer`` keeps)."""
    return bool(numbers) or any(len(t) >= MIN_LITERAL or _has_digit(t) for t in strings)


def _plain_strings(value: Any, limit: int) -> list[str] | None:
    """What :func:`~clearance.provenance.values.json_strings_and_numbers` reads of
    ``value`` when it is a list of strings that fits in ``limit`` characters (its strings,
    in the order that function gives them, all read); None for anything else."""
    if type(value) is not list or len(value) > 8:
        return None
    total = 0
    for item in value:
        if type(item) is not str:
            return None
        total += len(item)
    if total > limit:
        return None
    return value[::-1]


def _one_unit(value: Any) -> tuple[tuple[str, Any], ...] | None:
    """The units of a string or a number (the common arguments), without a generator;
    None for anything else."""
    kind = type(value)
    if kind is str:
        return (("s", value),)
    if kind is int or kind is float:
        key = number_key(value)
        return (("n", key),) if key is not None else ()
    return None


def _units(value: Any) -> Iterator[tuple[str, Any]]:
    """``("s", text)`` and ``("n", key)`` for each unit of an argument value."""
    if type(value) is str:
        yield "s", value
        return
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        key = number_key(value)
        if key is not None:
            yield "n", key
        return
    if not isinstance(value, dict | list | tuple):
        return
    stack: list[Any] = [value]
    seen = 0
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
        elif isinstance(item, str) or (
            isinstance(item, int | float | Decimal) and not isinstance(item, bool)
        ):
            seen += 1
            if seen > _MAX_UNITS:
                yield "x", None
                return
            if isinstance(item, str):
                yield "s", item
            else:
                key = number_key(item)
                if key is not None:
                    yield "n", key


class Described(Mapping[str, Mapping[str, Any]]):
    """The provenance records of one call's arguments (:meth:`Provenance.describe`): each
    computed when first read, then kept, so that the evaluator, the guardrails and the
    record all see one record per argument."""

    __slots__ = ("_arguments", "_given", "_ledger", "_trust", "_trusted", "computed")

    def __init__(
        self,
        ledger: Provenance,
        arguments: Mapping[str, Any],
        trust: TrustList,
        given: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._ledger = ledger
        self._arguments = arguments
        self._trust = trust
        self._given = given
        """Records reported by another enforcement point (:class:`ReportedProvenance`),
        used as they are for the arguments they name."""
        self._trusted = -1
        self.computed: dict[str, dict[str, Any]] = {}
        """The records read so far, by argument."""

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        record = self.computed.get(name)
        if record is None and self._given is not None and name in self._given:
            if name not in self._arguments:  # only an argument of the call has a record
                raise KeyError(name)
            record = self.computed[name] = dict(self._given[name])
        if record is None:
            value = self._arguments[name]
            ledger = self._ledger
            if ledger._pending:
                ledger._flush()
            trusted = self._trusted
            if trusted < 0:
                trusted = self._trusted = ledger._trusted_mask(self._trust)
            record = ledger._record(value, trusted)
            self.computed[name] = record
        return record

    def get(self, name: str, default: Any = None) -> Any:  # without Mapping's try/except
        if name in self._arguments:
            return self[name]
        return default

    def __contains__(self, name: object) -> bool:
        return name in self._arguments

    def __iter__(self) -> Iterator[str]:
        return iter(self._arguments)

    def __len__(self) -> int:
        return len(self._arguments)


class ReportedProvenance(Provenance):
    """The provenance records another enforcement point sent with a call (``clearance
    pdp``: the request's ``context.provenance``, as ``AuthZenEvaluator`` sends it): an
    argument it reported a record for is described by that record, as given; any other
    argument as by a disabled ledger (from a tool, never the user's: a missing record never
    trusts). The caller's word is taken as its principal and arguments are: it is the
    enforcement point, authenticated by its token.

    Args:
        records: each reported argument's record, with the attributes of
            :data:`ORIGIN_ATTRIBUTES` (checked by the caller of this class).
    """

    def __init__(
        self, records: Mapping[str, Mapping[str, Any]], *, trust: TrustList | None = None
    ) -> None:
        super().__init__(trust=trust, enabled=False)
        self.records = {name: dict(record) for name, record in records.items()}

    def describe(self, arguments: Mapping[str, Any], trust: TrustList | None = None) -> Described:
        return Described(self, arguments, trust or self.trust, self.records)
