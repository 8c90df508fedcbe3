"""Declared facts: rules over them must be written in the canonical spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearance.facts import EmailFact, NumberFact, PathFact, UrlFact
from clearance.facts.base import Canonical, FactError
from clearance.facts.declared import FactsError, apply_facts, declare_facts, pattern_problem


@pytest.mark.parametrize(
    ("kind", "pattern"),
    [
        (EmailFact(), "*@Competitor.com"),
        (UrlFact(), "HTTPS://evil.example/**"),
        (UrlFact(), "https://Evil.example/**"),
        (UrlFact(), "https://evil.example:443/**"),
        (UrlFact(), "http://evil.example:80"),
    ],
)
def test_patterns_that_can_never_match_a_canonical_value(kind: object, pattern: str) -> None:
    assert pattern_problem(kind, pattern) is not None  # type: ignore[arg-type]


@pytest.mark.parametrize("pattern", ["/etc/**", "~/x", "src/../x", "./src/*", "a//b", "src/./x"])
def test_path_patterns_that_are_not_canonical(tmp_path: Path, pattern: str) -> None:
    assert pattern_problem(PathFact(tmp_path), pattern) is not None


@pytest.mark.parametrize(
    ("kind", "pattern"),
    [
        (EmailFact(), "*@competitor.com"),
        (UrlFact(), "https://evil.example:8443/**"),
        (UrlFact(), "https://*.example/Path/**"),
        (UrlFact(), "*"),
        (NumberFact(), "666"),
    ],
)
def test_canonical_patterns_are_fine(kind: object, pattern: str) -> None:
    assert pattern_problem(kind, pattern) is None  # type: ignore[arg-type]


def test_canonical_path_patterns_are_fine(tmp_path: Path) -> None:
    for pattern in ("src/**", "**/.env", "*.py", "docs/"):
        assert pattern_problem(PathFact(tmp_path), pattern) is None, pattern


NULLABLE_LIST = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}


def test_a_nullable_array_takes_element_facts() -> None:
    """pydantic writes ``list[str] | None`` as a union with null: its elements are facts,
    null has none."""
    schema = {"type": "object", "properties": {"cc": NULLABLE_LIST}}
    declared = declare_facts({"/cc/*": "email"}, root=None, schema=schema)
    canonical, facts = apply_facts(declared, {"cc": ["Bob@Example.COM"]})
    assert canonical == {"cc": ["bob@example.com"]}
    assert facts["cc"]["address"] == ["bob@example.com"]
    assert apply_facts(declared, {"cc": None}) == ({"cc": None}, {})


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string"},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
    ],
)
def test_element_facts_need_an_array(prop: dict[str, object]) -> None:
    schema = {"type": "object", "properties": {"cc": prop}}
    with pytest.raises(FactsError, match="not declared as an array"):
        declare_facts({"/cc/*": "email"}, root=None, schema=schema)


def test_a_nullable_value_is_checked_as_its_type() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    }
    with pytest.raises(FactsError, match="reads integer/number values, but the argument is string"):
        declare_facts({"/n": "number"}, root=None, schema=schema)


# --- declaring facts: what each declaration means, and each one refused ------------------

STRINGS = {"type": "string"}


def schema_of(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties}


def test_each_built_in_name_is_its_kind(tmp_path: Path) -> None:
    from clearance.facts.command import CommandFact

    schema = schema_of(p=STRINGS, e=STRINGS, c=STRINGS, u=STRINGS, m=STRINGS, n={"type": "integer"})
    spec = {"/p": "path", "/e": "path_entry", "/c": "command", "/u": "url", "/m": "email"}
    declared = declare_facts({**spec, "/n": "number"}, root=tmp_path, schema=schema)
    kinds = {fact.field: fact.kind for fact in declared}
    assert [fact.pointer for fact in declared] == [*spec, "/n"]  # in the order declared
    path, entry, command = kinds["p"], kinds["e"], kinds["c"]
    assert isinstance(path, PathFact) and path.follow_final is True
    assert isinstance(entry, PathFact) and entry.follow_final is False  # the entry itself
    assert path.root == entry.root == str(tmp_path.resolve())
    # a command's words are checked under the tool's root
    assert isinstance(command, CommandFact) and command.root == str(tmp_path.resolve())
    assert isinstance(kinds["u"], UrlFact)
    assert isinstance(kinds["m"], EmailFact)
    assert isinstance(kinds["n"], NumberFact)
    # without a root a command is checked lexically only
    (lexical,) = declare_facts({"/c": "command"}, root=None, schema=schema)
    assert isinstance(lexical.kind, CommandFact) and lexical.kind.root is None


@pytest.mark.parametrize("name", ["path", "path_entry"])
def test_a_path_fact_needs_a_root(name: str) -> None:
    with pytest.raises(FactsError) as info:
        declare_facts({"/p": name}, root=None, schema=schema_of(p=STRINGS))
    assert str(info.value) == f"/p: a '{name}' fact needs the tool's root="


def test_an_unknown_kind_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(FactsError) as info:
        declare_facts({"/p": "Path"}, root=None, schema=schema_of(p=STRINGS))
    assert str(info.value) == (
        "/p: unknown fact kind 'Path' (built-in: path, path_entry, patch, git_ref, command, url, email, number)"
    )


def test_a_declared_fact_names_its_argument_and_whether_it_is_an_array() -> None:
    schema = schema_of(to={"type": "array", "items": STRINGS}, subject=STRINGS)
    to, subject = declare_facts({"/to/*": "email", "/subject": "url"}, root=None, schema=schema)
    assert (to.pointer, to.field, to.many) == ("/to/*", "to", True)
    assert (subject.pointer, subject.field, subject.many) == ("/subject", "subject", False)


def test_an_array_fact_reads_each_attribute_as_a_set() -> None:
    from clearance.facts.command import CommandFact
    from clearance.facts.declared import set_type

    assert set_type("String") == "Set<String>"
    assert set_type("Bool") == "Set<Bool>"
    assert set_type("Set<String>") == "Set<String>"  # sets are united, not nested
    schema = schema_of(cmds={"type": "array", "items": STRINGS}, cmd=STRINGS)
    many, one = declare_facts({"/cmds/*": "command", "/cmd": "command"}, root=None, schema=schema)
    assert one.attributes == CommandFact().attributes
    assert many.attributes == {
        name: typ if typ.startswith("Set<") else f"Set<{typ}>"
        for name, typ in CommandFact().attributes.items()
    }
    assert many.attributes["program"] == "Set<String>"
    assert many.attributes["outside_root"] == "Set<Bool>"
    assert many.attributes["args"] == "Set<String>"


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({"path": "url"}, "'path' is not a JSON pointer like '/path'"),
        ({1: "url"}, "1 is not a JSON pointer like '/path'"),
        ({"/a/b": "url"}, "/a/b: facts name a top-level argument ('/path') or its array elements"),
        ({"/a/*/*": "url"}, "/a/*/*: facts name a top-level"),
        ({"/a~1b": "url"}, "/a~1b: facts name a top-level"),
        ({"/a~0/*": "url"}, "/a~0/*: facts name a top-level"),
        ({"/a/*": "email", "/a": "url"}, "/a: the argument 'a' has two facts"),
        ({"/b": "url"}, "/b: 'b' is not an argument in the input schema"),
        ({"/a": 5}, "/a: 5 is not a fact kind"),
    ],
)
def test_declarations_refused_in_their_words(facts: dict[object, object], message: str) -> None:
    schema = schema_of(a={"type": "array", "items": STRINGS}, **{"a~1b": STRINGS})
    with pytest.raises(FactsError) as info:
        declare_facts(facts, root=None, schema=schema)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)


def test_facts_must_be_a_mapping() -> None:
    with pytest.raises(FactsError) as info:
        declare_facts([("/a", "url")], root=None, schema=schema_of(a=STRINGS))  # type: ignore[arg-type]
    assert str(info.value) == 'facts must be a mapping like {"/path": "path"}'


@pytest.mark.parametrize("schema", [{"type": "object"}, {"type": "object", "properties": True}])
def test_an_argument_must_be_in_the_schema_properties(schema: dict[str, object]) -> None:
    with pytest.raises(FactsError, match="'a' is not an argument in the input schema"):
        declare_facts({"/a": "url"}, root=None, schema=schema)


def test_a_kind_object_and_a_function_are_kinds() -> None:
    from clearance.facts import CustomFact

    def ticket(value: str) -> str:
        return value.upper()

    schema = schema_of(a=STRINGS, b=STRINGS)
    email = EmailFact()
    a, b = declare_facts({"/a": email, "/b": ticket}, root=None, schema=schema)
    assert a.kind is email
    assert isinstance(b.kind, CustomFact) and b.kind.name == "ticket"
    assert apply_facts((b,), {"b": "t-1"}) == ({"b": "T-1"}, {"b": {"value": "T-1"}})


class _Kind:
    """A fact kind whose record shape and canonical form a test chooses."""

    def __init__(self, attributes: dict[str, str], result: object = None) -> None:
        self.name = "odd"
        self.attributes = attributes
        self.json_types = frozenset({"string"})
        self.result = result

    def canonicalize(self, value: object) -> Canonical:
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result  # type: ignore[return-value]  # what a faulty kind returns


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"a": "Set<Long>"}, "/a: kind 'odd' has bad attribute types {'Set<Long>'}"),
        ({"a": "String", "b": "int"}, "/a: kind 'odd' has bad attribute types {'int'}"),
        ({}, "/a: kind 'odd' has bad attribute types set()"),
    ],
)
def test_a_kind_with_bad_attribute_types_is_refused(
    attributes: dict[str, str], message: str
) -> None:
    with pytest.raises(FactsError) as info:
        declare_facts({"/a": _Kind(attributes)}, root=None, schema=schema_of(a=STRINGS))
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("prop", "pointer", "kind"),
    [
        ({"type": "integer"}, "/a", "email"),
        ({"type": ["string", "integer"]}, "/a", "email"),
        ({"type": ["integer", "null"]}, "/a", "url"),
        ({"type": "string"}, "/a", "number"),
        ({"oneOf": [{"type": "string"}, {"type": "null"}]}, "/a", "number"),
        ({"anyOf": [{"type": "null"}, {"type": "boolean"}]}, "/a", "command"),
        # a union of one branch is that branch
        ({"anyOf": [{"type": "integer"}]}, "/a", "email"),
        ({"oneOf": [{"type": "string"}]}, "/a", "number"),
        ({"anyOf": [{"type": "array", "items": {"type": "integer"}}]}, "/a/*", "email"),
        ({"type": "array", "items": {"type": "integer"}}, "/a/*", "email"),
        (
            {"anyOf": [{"type": "array", "items": {"type": "boolean"}}, {"type": "null"}]},
            "/a/*",
            "url",
        ),
    ],
)
def test_an_argument_of_another_json_type_is_refused(
    prop: dict[str, object], pointer: str, kind: str
) -> None:
    with pytest.raises(FactsError, match="values, but the argument is"):
        declare_facts({pointer: kind}, root=None, schema=schema_of(a=prop))


def test_the_type_refusal_names_both_types() -> None:
    with pytest.raises(FactsError) as info:
        declare_facts({"/a": "number"}, root=None, schema=schema_of(a={"type": ["string", "null"]}))
    assert str(info.value) == (
        "/a: a 'number' fact reads integer/number values, but the argument is string"
    )
    with pytest.raises(FactsError) as info:
        declare_facts({"/a": "email"}, root=None, schema=schema_of(a={"type": ["object", "array"]}))
    assert (
        str(info.value)
        == "/a: a 'email' fact reads string values, but the argument is array/object"
    )


@pytest.mark.parametrize(
    ("prop", "pointer", "kind"),
    [
        ({"type": "integer"}, "/a", "number"),
        ({"type": ["integer", "number", "null"]}, "/a", "number"),
        ({"type": "null"}, "/a", "email"),  # only null: never a value to read
        ({}, "/a", "email"),  # any type: the values are checked when a call comes
        (True, "/a", "email"),
        # a union of several types: its values are checked when a call comes
        ({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, "/a", "email"),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}, "/a", "email"),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "/a", "url"),
        ({"type": "array"}, "/a/*", "email"),  # items of any type
        ({"type": "array", "items": True}, "/a/*", "email"),
        ({"type": "array", "items": {"type": ["string", "null"]}}, "/a/*", "email"),
        ({"oneOf": [{"type": "null"}, {"type": "array", "items": STRINGS}]}, "/a/*", "url"),
    ],
)
def test_arguments_a_kind_can_read_are_accepted(prop: object, pointer: str, kind: str) -> None:
    (declared,) = declare_facts({pointer: kind}, root=None, schema=schema_of(a=prop))
    assert declared.field == "a"


# --- applying facts ---------------------------------------------------------------------


def test_apply_facts_canonicalizes_each_declared_argument_and_only_those() -> None:
    schema = schema_of(to={"type": "array", "items": STRINGS}, url=STRINGS, n={"type": "number"})
    declared = declare_facts({"/to/*": "email", "/url": "url"}, root=None, schema=schema)
    arguments = {"to": ["A@X.com", "b@x.COM", "a@x.com"], "url": "HTTPS://X.com:443/p", "n": 1.0}
    canonical, facts = apply_facts(declared, arguments)
    assert canonical == {
        "to": ["a@x.com", "b@x.com", "a@x.com"],
        "url": "https://x.com/p",
        "n": 1.0,  # no fact declared: as given
    }
    assert arguments["to"] == ["A@X.com", "b@x.COM", "a@x.com"]  # the input is not changed
    assert set(facts) == {"to", "url"}
    assert facts["url"]["host"] == "x.com"
    # one value per distinct element, in the order the elements come
    assert facts["to"]["address"] == ["a@x.com", "b@x.com"]
    assert facts["to"]["domain"] == ["x.com"]


def test_an_array_fact_unites_set_attributes_in_order() -> None:
    schema = schema_of(cmds={"type": "array", "items": STRINGS})
    declared = declare_facts({"/cmds/*": "command"}, root=None, schema=schema)
    _, facts = apply_facts(declared, {"cmds": ["ls -l b a", "git diff a", "ls -l"]})
    record = facts["cmds"]
    assert record["program"] == ["ls", "git"]
    assert record["args"] == ["-l", "a", "b", "diff"]
    assert record["operands"] == ["a", "b"]
    assert record["outside_root"] == [False]
    assert set(record) == set(declared[0].kind.attributes)
    # an empty array: every attribute is present, with no values
    _, empty = apply_facts(declared, {"cmds": []})
    assert empty["cmds"] == {name: [] for name in declared[0].kind.attributes}


def test_absent_and_null_arguments_have_no_fact() -> None:
    schema = schema_of(a=STRINGS, b={"type": "number"})
    declared = declare_facts({"/a": "url", "/b": "number"}, root=None, schema=schema)
    assert apply_facts(declared, {}) == ({}, {})
    assert apply_facts(declared, {"a": None, "b": 0}) == (
        {"a": None, "b": 0},
        {"b": {"value": 0, "integer": True}},
    )
    # falsy values are values: an empty string is refused, not skipped
    with pytest.raises(FactError):
        apply_facts(declared, {"a": ""})


def test_a_refused_value_names_the_argument_and_its_kind() -> None:
    schema = schema_of(to={"type": "array", "items": STRINGS}, n={"type": "number"})
    declared = declare_facts({"/to/*": "email", "/n": "number"}, root=None, schema=schema)
    with pytest.raises(FactError) as info:
        apply_facts(declared, {"to": "a@x.com"})
    assert info.value.reason == "argument /to/* (email): expected an array"
    with pytest.raises(FactError) as info:
        apply_facts(declared, {"to": ["a@x.com", "not an address"]})
    assert info.value.reason == (
        "argument /to/* (email): give one bare address like name@example.com"
    )
    with pytest.raises(FactError) as info:
        apply_facts(declared, {"n": True})
    assert info.value.reason.startswith("argument /n (number): ")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ValueError("x"), "it cannot be read (ValueError)"),
        (TypeError("x"), "it cannot be read (TypeError)"),
        (OSError("x"), "it cannot be read (OSError)"),
        (RecursionError("x"), "it cannot be read (RecursionError)"),
        (FactError("its own words"), "its own words"),
    ],
)
def test_a_kind_that_fails_refuses_the_value(error: BaseException, reason: str) -> None:
    declared = declare_facts(
        {"/a": _Kind({"v": "String"}, error)}, root=None, schema=schema_of(a=STRINGS)
    )
    with pytest.raises(FactError) as info:
        apply_facts(declared, {"a": "x"})
    assert info.value.reason == f"argument /a (odd): {reason}"


def test_an_unexpected_exception_of_a_kind_is_not_swallowed() -> None:
    # the pipeline fails closed on it (R1) and reports it as a failure, not a refusal
    declared = declare_facts(
        {"/a": _Kind({"v": "String"}, KeyError("k"))}, root=None, schema=schema_of(a=STRINGS)
    )
    with pytest.raises(KeyError):
        apply_facts(declared, {"a": "x"})


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ("plain", "kind 'odd' did not return a Canonical"),
        (Canonical("x", {"v": "x"}), "kind 'odd' left out w, z"),
        (Canonical("x", {"v": "x", "w": "", "z": ""}), None),
    ],
)
def test_a_kind_must_return_every_attribute(result: object, reason: str | None) -> None:
    kind = _Kind({"v": "String", "z": "String", "w": "String"}, result)
    declared = declare_facts({"/a": kind}, root=None, schema=schema_of(a=STRINGS))
    if reason is None:
        assert apply_facts(declared, {"a": "x"}) == (
            {"a": "x"},
            {"a": {"v": "x", "w": "", "z": ""}},
        )
        return
    with pytest.raises(FactError) as info:
        apply_facts(declared, {"a": "x"})
    assert info.value.reason == f"argument /a (odd): {reason}"


# --- patterns in the canonical spelling ---------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "pattern", "problem"),
    [
        (
            EmailFact(),
            "*@Competitor.com",
            "e-mail addresses are compared in lower case: write '*@competitor.com'",
        ),
        (
            UrlFact(),
            "HTTPS://Evil.example/Path/**",
            "URL schemes and hosts are compared in lower case: "
            "write 'https://evil.example/Path/**'",
        ),
        (
            UrlFact(),
            "https://Evil.example",
            "URL schemes and hosts are compared in lower case: write 'https://evil.example'",
        ),
        (
            UrlFact(),
            "Http://x.example/A",
            "URL schemes and hosts are compared in lower case: write 'http://x.example/A'",
        ),
        (
            UrlFact(),
            "https://evil.example:443/**",
            "URLs are compared without their default port: drop ':443'",
        ),
        (UrlFact(), "http://x:80", "URLs are compared without their default port: drop ':80'"),
        (UrlFact(), "ws://x:80/", "URLs are compared without their default port: drop ':80'"),
        (UrlFact(), "ftp://x:21/", "URLs are compared without their default port: drop ':21'"),
        (
            UrlFact(),
            "https://[::1]:443/",
            "URLs are compared without their default port: drop ':443'",
        ),
    ],
)
def test_what_is_wrong_with_a_pattern_is_said(kind: object, pattern: str, problem: str) -> None:
    assert pattern_problem(kind, pattern) == problem  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "pattern",
    [
        "https://x:80/",  # not https's default port
        "http://x:443/",
        "gopher://x:70/",  # no default port known
        "https://x:/",
        "https://x:44a/",
        "mailto:Bob@X.com",  # not scheme://: not read
        "HTTPS:x",
        "https://x.example/UPPER/path",  # the path keeps its case
        "https://x.example/A?to=HTTP://Y",  # a URL in the path is not the pattern's
    ],
)
def test_url_patterns_that_can_match(pattern: str) -> None:
    assert pattern_problem(UrlFact(), pattern) is None


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("/etc/**", "paths are compared relative to the tool's root: write the path inside it"),
        ("~/x", "paths are compared relative to the tool's root; '~' is never one"),
        ("a/./b", "paths are compared canonical: no '.', '..' or empty segments"),
        ("a/..", "paths are compared canonical: no '.', '..' or empty segments"),
        (".", "paths are compared canonical: no '.', '..' or empty segments"),
        ("a//b", "paths are compared canonical: no '.', '..' or empty segments"),
        ("src/", None),  # a trailing '/' is not an empty segment in the middle
        ("a/.env", None),
        ("a/..b", None),
    ],
)
def test_path_patterns_said_wrong(tmp_path: Path, pattern: str, problem: str | None) -> None:
    assert pattern_problem(PathFact(tmp_path), pattern) == problem
    assert pattern_problem(PathFact(tmp_path, follow_final=False), pattern) == problem


def test_kinds_without_a_canonical_spelling_rule_accept_any_pattern() -> None:
    from clearance.facts.command import CommandFact

    for pattern in ("/etc/**", "Git *", "HTTPS://X:443"):
        assert pattern_problem(CommandFact(), pattern) is None
        assert pattern_problem(NumberFact(), pattern) is None
    assert pattern_problem(EmailFact(), "*@x.com") is None
