"""A grant's scope covers every field that matters (issue 19), and any string can be asked
about and granted (issue 12 item 16)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any, Literal

import pytest
from postgres_support import sql
from store_backends import Stores, stores_fixture
from support import ALICE, Recorder, coding_registry, harness

from clearance import (
    AskError,
    GrantScope,
    PermissionAsk,
    PermissionDecision,
    SqliteGrantStore,
    ToolRegistry,
)
from clearance.harness.approvals import Answer, grant_from_answer, suggest_scopes
from clearance.harness.grants import Grant, MemoryGrantStore, arguments_hash, new_grant_id
from clearance.policy import LocalEvaluator
from clearance.toolsets.files import register_files

pytestmark = pytest.mark.anyio

stores = stores_fixture()  # the store tests below run on SQLite and on PostgreSQL

MOVE = {"source": "src/app.py", "destination": "public/app.py"}


# --- the scope itself ----------------------------------------------------------------------


def test_a_multi_field_scope_needs_every_field_under_its_own_prefix() -> None:
    scope = GrantScope.prefixes_of({"/source": "src/", "/destination": "public/"})
    assert scope.description == "source under src/ and destination under public/"
    assert scope.covers({"source": "src/b.py", "destination": "public/x/b.py"})
    assert not scope.covers({"source": ".env", "destination": "public/.env"})
    assert not scope.covers({"source": "src/a", "destination": "src/b"})
    assert not scope.covers({"source": "src/../.env", "destination": "public/e"})
    assert not scope.covers({"destination": "public/e"})  # a missing field is not free
    assert not scope.covers({"source": "src/a"})
    assert not scope.covers({"source": ["src/a"], "destination": "public/a"})
    assert scope.field is None and scope.prefix is None
    assert scope.fields == ("/source", "/destination")


def test_one_field_scopes_keep_their_shape() -> None:
    scope = GrantScope.prefix_of("/path", "src/")
    assert (scope.field, scope.prefix, scope.description) == ("/path", "src/", "path under src/")
    assert scope == GrantScope.prefixes_of({"/path": "src/"})
    assert GrantScope.prefix_of("/a b", "x/").description == '"/a b" under x/'
    three = GrantScope.prefixes_of({"/a": "x/", "/b": "y/", "/c": "z/"})
    assert three.description == "a under x/, b under y/ and c under z/"


@pytest.mark.parametrize(
    "scope",
    [
        GrantScope.exact({"path": "a\ud800", "n": 1}),
        GrantScope.prefix_of("/path", "src/"),
        GrantScope.prefixes_of({"/source": "src/", "/destination": "pub\udfff/"}),
        GrantScope.tool(),
    ],
)
def test_scopes_round_trip_through_json(scope: GrantScope) -> None:
    text = json.dumps(scope.to_json())  # ASCII JSON, as the grant store writes it
    assert GrantScope.from_json(json.loads(text)) == scope


def test_a_multi_field_scope_leaves_the_one_field_keys_empty() -> None:
    """A reader that knows only ``field``/``prefix`` (clearance before multi-field scopes)
    finds nothing to check and fails, rather than checking one field of two."""
    raw = GrantScope.prefixes_of({"/source": "src/", "/destination": "public/"}).to_json()
    assert raw["field"] is None and raw["prefix"] is None
    assert raw["prefixes"] == {"/source": "src/", "/destination": "public/"}


def test_old_one_field_json_still_loads() -> None:
    old = {
        "kind": "prefix",
        "arguments_hash": None,
        "field": "/path",
        "prefix": "src/",
        "description": "/path under src/",
    }
    assert GrantScope.from_json(old) == GrantScope.prefix_of("/path", "src/")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"kind": "everything"}, "a grant scope kind is one of exact, prefix, tool"),
        ({"kind": "prefix", "prefixes": {}}, "a prefix grant scope needs at least one field"),
        (
            {"kind": "prefix", "prefixes": {"path": "src/"}},
            "JSON pointer must start with '/': 'path'",
        ),
        ({"kind": "prefix", "prefixes": {"": "src/"}}, "'' is not a JSON pointer to a field"),
        (
            {"kind": "prefix", "prefixes": {"/path": ""}},
            "the prefix for /path must be a non-empty string",
        ),
        (
            {"kind": "prefix", "prefixes": {"/path": 3}},
            "the prefix for /path must be a non-empty string",
        ),
        (
            {"kind": "prefix", "prefixes": ["/path", "src/"]},
            "a prefix grant scope's prefixes are a JSON object",
        ),
        (
            {"kind": "prefix", "field": None, "prefix": None},
            "None is not a JSON pointer to a field",
        ),
        (
            {"kind": "prefix", "field": "/source", "prefix": "src/", "prefixes": {"/a": "b/"}},
            "a prefix grant scope's field and prefix disagree with prefixes",
        ),
        (
            {"kind": "exact", "arguments_hash": None},
            "an exact grant scope needs the hash of its arguments",
        ),
        ({"kind": "tool", "arguments_hash": "ab"}, "a tool grant scope has no arguments hash"),
        (["kind", "tool"], "a grant scope is a JSON object"),
    ],
)
def test_bad_scope_json_is_refused(raw: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        GrantScope.from_json(raw)
    assert str(info.value) == message


def test_only_a_prefix_scope_has_prefixes() -> None:
    with pytest.raises(ValueError) as info:
        GrantScope("tool", prefixes=(("/a", "b/"),))
    assert str(info.value) == "a tool grant scope has no prefixes"


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (
            GrantScope.tool(),
            {
                "kind": "tool",
                "arguments_hash": None,
                "field": None,
                "prefix": None,
                "prefixes": None,
                "description": "any arguments",
            },
        ),
        (
            GrantScope.exact({"path": "a"}),
            {
                "kind": "exact",
                "arguments_hash": None,
                "field": None,
                "prefix": None,
                "prefixes": None,
                "description": "this exact call",
            },
        ),
        (
            GrantScope.prefix_of("/path", "src/"),
            {
                "kind": "prefix",
                "arguments_hash": None,
                "field": "/path",
                "prefix": "src/",
                "prefixes": {"/path": "src/"},
                "description": "path under src/",
            },
        ),
    ],
)
def test_public_scope_json_is_the_documented_record(
    scope: GrantScope, expected: dict[str, Any]
) -> None:
    # Asks and journal records: no hash of the exact arguments (it can be reversed by
    # guessing a low-entropy secret).
    assert scope.to_json(public=True) == expected
    assert scope.to_json() == expected | {"arguments_hash": scope.arguments_hash}


def test_a_multi_field_grant_survives_the_store(stores: Stores) -> None:
    store = stores.grants()
    ask = _ask(MOVE)
    (prefix,) = [s for s in ask.suggestions if s.kind == "prefix"]
    grant = grant_from_answer(ask, PermissionDecision("allow_always", scope=prefix), MOVE)
    assert grant is not None
    store.add(grant)
    store.close()
    reopened = stores.grants()
    (loaded,) = reopened.list()
    assert loaded == grant
    args = {"source": ".env", "destination": "public/.env"}
    assert reopened.find(ALICE_ID, "files.move_file", args, "s") is None
    assert reopened.find(ALICE_ID, "files.move_file", {**MOVE, "source": "src/b"}, "s") == grant
    reopened.close()


def test_old_one_field_rows_still_load_from_the_store(stores: Stores) -> None:
    old = {
        "grant_id": "g_old",
        "principal": ALICE_ID,
        "tool": "files.write_file",
        "scope": {"kind": "prefix", "arguments_hash": None, "field": "/path", "prefix": "src/"},
        "kind": "always",
        "session_id": None,
        "created_at": 1.0,
        "expires_at": None,
        "decided_by": None,
        "widened_by": "alice",
    }
    if stores.kind == "sqlite":
        db = sqlite3.connect(stores.target)
        db.execute("CREATE TABLE grants (grant_id TEXT PRIMARY KEY, body TEXT NOT NULL)")
        db.execute("INSERT INTO grants VALUES (?, ?)", ("g_old", json.dumps(old)))
        db.commit()
        db.close()
    else:  # a row another client (an older clearance, psql) wrote into the store's table
        assert stores.grants().list() == []  # the schema, migrated on first use
        sql(stores.schema, "INSERT INTO {s}.grants VALUES (%s, %s)", ("g_old", json.dumps(old)))
    store = stores.grants()
    found = store.find(ALICE_ID, "files.write_file", {"path": "src/a", "content": "x"}, "s")
    assert found is not None and found.grant_id == "g_old"
    assert found.scope.description == "path under src/"
    store.close()


# --- suggestions -----------------------------------------------------------------------------

ALICE_ID = str(ALICE)


def _ask(
    arguments: dict[str, Any],
    *,
    withheld: tuple[str, ...] = (),
    path_fields: tuple[str, ...] | None = None,
) -> PermissionAsk:
    return PermissionAsk(
        ask_id="ask_1",
        session_id="s",
        turn_id=None,
        call_id="c",
        tool="files__move_file",
        qualified_name="files.move_file",
        model_alias="files__move_file",
        principal=ALICE_ID,
        arguments=dict(arguments),
        reason="r",
        suggestions=suggest_scopes(arguments, withheld=withheld, path_fields=path_fields),
    )


def test_one_prefix_scope_is_offered_and_it_constrains_every_path() -> None:
    kinds = [(s.kind, s.description) for s in suggest_scopes(MOVE)]
    assert kinds == [
        ("exact", "this exact call"),
        ("prefix", "source under src/ and destination under public/"),
        ("tool", "any arguments"),
    ]


@pytest.mark.parametrize(
    ("arguments", "withheld", "path_fields"),
    [
        # A path at the root has no directory to widen to: the source would be free.
        ({"source": "notes.txt", "destination": "public/notes.txt"}, (), None),
        # A withheld path is never shown as a prefix, so none is offered.
        (MOVE, ("/source",), None),
        (MOVE, ("",), None),
        # Declared path fields: a missing or non-string one cannot be constrained.
        ({"source": "src/a"}, (), ("source", "destination")),
        ({"source": "src/a", "destination": 3}, (), ("source", "destination")),
        # Not plainly under its directory.
        ({"source": "src/../x/a", "destination": "public/a"}, (), None),
        # No path field at all.
        ({"query": "a/b"}, (), None),
        (MOVE, (), ()),
    ],
)
def test_no_prefix_scope_when_a_path_would_stay_free(
    arguments: dict[str, Any], withheld: tuple[str, ...], path_fields: tuple[str, ...] | None
) -> None:
    scopes = suggest_scopes(arguments, withheld=withheld, path_fields=path_fields)
    assert [s.kind for s in scopes] == ["exact", "tool"]


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": "p_" + "0" * 32, "input": "x"},
        {"id": "p_" + "0" * 32, "path": "src/a.py"},  # a path beside it changes nothing
    ],
)
def test_a_pinned_field_is_offered_the_exact_call_only(arguments: dict[str, Any]) -> None:
    """A field naming something of the session (a process id): "any arguments" or a prefix
    would cover whatever the session holds later, so neither is offered, and an answer
    naming one is refused for leaving it free."""
    scopes = suggest_scopes(arguments, path_fields=(), other_facts=("id",), pinned=("id",))
    assert [s.kind for s in scopes] == ["exact"]
    ask = dataclasses.replace(_ask(arguments), suggestions=scopes)
    wider = [GrantScope.tool()]
    if "path" in arguments:  # a prefix that covers the call, and leaves the id free
        wider.append(GrantScope.prefix_of("/path", "src/"))
    for wide in wider:
        with pytest.raises(AskError, match="/id free"):
            grant_from_answer(
                ask,
                PermissionDecision("allow_session", scope=wide),
                arguments,
                path_fields=(),
                other_facts=("id",),
            )


def test_declared_path_fields_replace_the_name_guess() -> None:
    arguments = {"target": "out/a.txt", "path": "not a path: a label", "x": "y/z"}
    (prefix,) = [s for s in suggest_scopes(arguments, path_fields=["target"]) if s.widened][:1]
    assert prefix.kind == "prefix" and prefix.prefixes == (("/target", "out/"),)
    guessed = [s for s in suggest_scopes(arguments) if s.kind == "prefix"]
    assert guessed == []  # by name, "path" is a path, and it has no directory


def test_no_prefix_scope_while_another_deciding_field_is_present() -> None:
    """A directory prefix cannot constrain a recipient, a URL or a command: with one of
    those in the call, a prefix scope would leave it free."""
    send = {"attachment": "docs/report.pdf", "to": "bob@example.com"}
    offered = suggest_scopes(send, path_fields=["attachment"], other_facts=["to"])
    assert [s.kind for s in offered] == ["exact", "tool"]
    # Nor while the tool has one the call does not carry: a later call carrying it would
    # be covered with it free (send the same attachment to anyone).
    without = suggest_scopes(
        {"attachment": "docs/r.pdf"}, path_fields=["attachment"], other_facts=["to"]
    )
    assert [s.kind for s in without] == ["exact", "tool"]
    ask = _ask(send, path_fields=("attachment",))
    ask.suggestions = ()
    scope = GrantScope.prefix_of("/attachment", "docs/")
    with pytest.raises(AskError, match="leaves /to free"):
        grant_from_answer(
            ask,
            PermissionDecision("allow_session", scope=scope),
            send,
            path_fields=["attachment"],
            other_facts=["to"],
        )


# --- what an answer may choose -----------------------------------------------------------


def test_an_unoffered_scope_that_frees_a_path_is_refused() -> None:
    ask = _ask(MOVE)
    for scope, free in [
        (GrantScope.prefix_of("/destination", "public/"), "/source"),
        (GrantScope.prefix_of("/source", "src/"), "/destination"),
    ]:
        with pytest.raises(AskError, match=f"leaves {free} free"):
            grant_from_answer(ask, PermissionDecision("allow_always", scope=scope), MOVE)


def test_an_unoffered_tool_scope_is_refused_when_the_call_has_paths() -> None:
    ask = _ask(MOVE)
    ask.suggestions = ask.suggestions[:1]  # an ask that offered only the exact call
    with pytest.raises(AskError, match="leaves /destination, /source free"):
        grant_from_answer(ask, PermissionDecision("allow_session", scope=GrantScope.tool()), MOVE)
    # A call without paths: the tool scope covers it and frees nothing.
    plain = _ask({"query": "x"})
    plain.suggestions = ()
    decision = PermissionDecision("allow_session", scope=GrantScope.tool())
    assert grant_from_answer(plain, decision, {"query": "x"}) is not None


def test_fields_the_suggestions_constrain_are_required_too() -> None:
    """Path fields an offered scope constrains count even when no name guess finds them
    (declared path facts with other names, and no path_fields given to the check)."""
    arguments = {"from": "src/a", "to": "public/a"}
    ask = _ask(arguments, path_fields=("from", "to"))
    assert [s.kind for s in ask.suggestions] == ["exact", "prefix", "tool"]
    narrower = GrantScope.prefix_of("/to", "public/")
    with pytest.raises(AskError, match="leaves /from free"):
        grant_from_answer(ask, PermissionDecision("allow_always", scope=narrower), arguments)


def test_unoffered_scopes_that_cover_the_call_and_every_path_are_accepted() -> None:
    ask = _ask(MOVE)
    wider = GrantScope.prefixes_of({"/source": "sr", "/destination": "pub"})
    exact = GrantScope.exact(dict(MOVE))
    for scope in (wider, exact):
        grant = grant_from_answer(ask, PermissionDecision("allow_session", scope=scope), MOVE)
        assert grant is not None and grant.scope == scope
    elsewhere = GrantScope.prefixes_of({"/source": "lib/", "/destination": "public/"})
    with pytest.raises(AskError, match="does not cover the asked call"):
        grant_from_answer(ask, PermissionDecision("allow_session", scope=elsewhere), MOVE)
    # path_fields given to the check: a declared field the scope leaves free is refused.
    both = GrantScope.prefixes_of({"/source": "src/", "/destination": "public/"})
    ask.suggestions = ()
    with pytest.raises(AskError, match="leaves /label free"):
        grant_from_answer(
            ask,
            PermissionDecision("allow_session", scope=both),
            {**MOVE, "label": "x/y"},
            path_fields=["source", "destination", "label"],
        )


# --- the move_file attack, through a real harness and real files --------------------------


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for name, text in {
        "src/app.py": "print('app')\n",
        "src/lib.py": "print('lib')\n",
        ".env": "SECRET=1\n",
        "notes.txt": "notes\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "public").mkdir()
    return root


async def test_a_destination_grant_does_not_free_the_source(tmp_path: Path) -> None:
    """Issue 19: approving a move from src/ into public/ "for this directory" must not let
    the agent move .env (or anything else outside src/) into public/ unasked."""
    root = _workspace(tmp_path)
    registry = ToolRegistry()
    register_files(registry, root)
    asks: list[PermissionAsk] = []

    def answer(ask: PermissionAsk) -> PermissionDecision:
        asks.append(ask)
        if len(asks) > 1:
            return PermissionDecision("deny")
        # The person picks the offered directory scope that mentions public/.
        (scope,) = [s for s in ask.suggestions if s.kind == "prefix" and "public/" in s.description]
        return PermissionDecision("allow_session", scope=scope)

    evaluator = LocalEvaluator(allow=["files.read_file"], ask=["files.move_file"])
    async with harness(registry, evaluator=evaluator) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=answer)
        first = await s.call_tool("files__move_file", MOVE)
        assert first.ok, first.text
        covered = await s.call_tool(
            "files__move_file", {"source": "src/lib.py", "destination": "public/lib.py"}
        )
        assert covered.ok and covered.grant is not None and len(asks) == 1
        env = await s.call_tool("files__move_file", {"source": ".env", "destination": "public/e"})
        notes = await s.call_tool(
            "files__move_file", {"source": "notes.txt", "destination": "public/notes.txt"}
        )
    assert env.status == "denied" and notes.status == "denied"
    assert len(asks) == 3  # both were asked again, and the answer was no
    assert (root / ".env").read_text() == "SECRET=1\n" and not (root / "public" / "e").exists()
    assert (root / "notes.txt").exists() and not (root / "public" / "notes.txt").exists()
    assert sorted(p.name for p in (root / "public").iterdir()) == ["app.py", "lib.py"]
    offered = [s.description for s in asks[0].suggestions]
    assert offered == [
        "this exact call",
        "source under src/ and destination under public/",
        "any arguments",
    ]


async def test_a_hand_made_destination_scope_is_refused(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    registry = ToolRegistry()
    register_files(registry, root)
    answers = iter(
        [
            PermissionDecision(
                "allow_always", scope=GrantScope.prefix_of("/destination", "public/")
            ),
            PermissionDecision("deny"),
        ]
    )
    store = SqliteGrantStore(tmp_path / "g.db")
    evaluator = LocalEvaluator(ask=["files.move_file"])
    async with harness(registry, evaluator=evaluator, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=lambda ask: next(answers))
        out = await s.call_tool("files__move_file", MOVE)
    assert out.status == "denied" and "could not be applied" in out.text
    assert (root / "src" / "app.py").exists() and store.list() == []
    store.close()


# --- any string ----------------------------------------------------------------------------

LONE = "\ud800"


async def test_an_ask_with_a_lone_surrogate_is_asked_and_granted_always(stores: Stores) -> None:
    """Issue 12 item 16: such calls were denied "the approval could not be recorded"."""
    rec = Recorder()
    asks: list[PermissionAsk] = []
    evaluator = LocalEvaluator(ask=["files.write_file"])
    arguments = {"path": f"src/a{LONE}.py", "content": f"x\udfff{LONE}"}

    def always(ask: PermissionAsk) -> Answer:
        asks.append(ask)
        return "allow_always"

    store = stores.grants()
    async with harness(coding_registry(rec), evaluator=evaluator, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=always)
        first = await s.call_tool("files__write_file", arguments)
        assert first.ok, first.text
        assert len(asks) == 1 and asks[0].arguments == arguments
        (grant,) = store.list()
        s.on_permission_ask = lambda ask: "deny"
        again = await s.call_tool("files__write_file", dict(arguments))
        other = await s.call_tool("files__write_file", {**arguments, "content": "y"})
    assert again.ok and again.grant == grant.grant_id
    assert other.status == "denied"
    assert rec.calls == [("files.write_file", arguments)] * 2
    store.close()
    # Persisted: a new store (as after a restart) matches the same call, and only it.
    reopened = stores.grants()
    assert reopened.find(ALICE_ID, "files.write_file", arguments, "s2") == grant
    assert reopened.find(ALICE_ID, "files.write_file", {**arguments, "path": "src/a"}, "s2") is None
    reopened.close()


async def test_a_prefix_grant_with_a_lone_surrogate_persists(stores: Stores) -> None:
    rec = Recorder()
    # list_dir takes only a path (a closed schema): a prefix scope constrains all of it.
    evaluator = LocalEvaluator(ask=["files.list_dir"])

    def widen(ask: PermissionAsk) -> PermissionDecision:
        (scope,) = [s for s in ask.suggestions if s.kind == "prefix"]
        return PermissionDecision("allow_always", scope=scope)

    store = stores.grants()
    async with harness(coding_registry(rec), evaluator=evaluator, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=widen)
        assert (await s.call_tool("files__list_dir", {"path": f"d{LONE}/a"})).ok
    store.close()
    reopened = stores.grants()
    (grant,) = reopened.list()
    assert grant.scope.prefixes == ((("/path", f"d{LONE}/"),))
    found = reopened.find(ALICE_ID, "files.list_dir", {"path": f"d{LONE}/b"}, "s")
    assert found == grant
    reopened.close()


# --- grants: their hash, their JSON, the memory store --------------------------------------


def test_the_arguments_hash_is_stable_across_key_order_and_releases() -> None:
    # Persisted exact grants keep matching: the hash is SHA-256 of the canonical JSON
    # (keys sorted, no spaces, non-ASCII as itself), whatever order the keys came in.
    arguments = {"b": [1, "é"], "a": None}
    assert arguments_hash(arguments) == arguments_hash({"a": None, "b": [1, "é"]})
    assert arguments_hash(arguments) == (
        "f8f17faab95c024891d173fa43442b0e52007736a1f36715ac721ab22deeefc5"
    )
    assert GrantScope.exact({"a": None, "b": [1, "é"]}).covers(arguments)


def test_the_first_suggestion_is_exactly_the_asked_call() -> None:
    exact = suggest_scopes(MOVE)[0]
    assert exact == GrantScope.exact(MOVE)
    assert exact.covers(dict(MOVE))
    assert not exact.covers({**MOVE, "destination": "public/other.py"})


@pytest.mark.parametrize(
    ("path", "prefix"),
    [
        ("/srv/ws/a.txt", "/srv/ws/"),  # an absolute path widens to its own directory
        ("/x", None),  # a file at the file system's root: no directory to widen to
        ("/srv/../etc/passwd", None),
        ("src/a.py", "src/"),
    ],
)
def test_a_prefix_scope_widens_a_path_to_its_directory(path: str, prefix: str | None) -> None:
    offered = [s.prefix for s in suggest_scopes({"path": path}) if s.kind == "prefix"]
    assert offered == ([] if prefix is None else [prefix])


def test_a_grant_round_trips_through_json_and_public_json_has_no_hash() -> None:
    grant = Grant(
        grant_id=new_grant_id(),
        principal="User::alice",
        tool="files.move_file",
        scope=GrantScope.exact(MOVE),
        kind="session",
        session_id="s1",
        created_at=1.5,
        expires_at=99.0,
        decided_by="bob",
        widened_by=None,
    )
    assert Grant.from_json(json.loads(json.dumps(grant.to_json()))) == grant
    assert grant.to_json()["scope"]["arguments_hash"] == arguments_hash(MOVE)
    public = grant.to_json(public=True)
    assert public["scope"]["arguments_hash"] is None
    assert public["session_id"] == "s1" and public["decided_by"] == "bob"


def test_grant_ids_are_g_and_16_hex_digits_never_twice() -> None:
    ids = {new_grant_id() for _ in range(1000)}
    assert len(ids) == 1000
    for grant_id in ids:
        assert grant_id[:2] == "g_" and len(grant_id) == 18
        int(grant_id[2:], 16)


def test_ending_a_session_drops_its_session_grants_only() -> None:
    store = MemoryGrantStore()

    def grant(kind: Literal["session", "always"], session_id: str | None) -> Grant:
        made = Grant(
            new_grant_id(), "User::alice", "files.read_file", GrantScope.tool(), kind, session_id
        )
        store.add(made)
        return made

    mine, theirs, always = grant("session", "s1"), grant("session", "s2"), grant("always", "s1")
    store.end_session("s1")
    assert {g.grant_id for g in store.list()} == {theirs.grant_id, always.grant_id}
    assert store.find("User::alice", "files.read_file", {}, "s1") == always
    assert mine not in store.list()


def test_revoke_says_whether_the_store_held_the_grant() -> None:
    store = MemoryGrantStore()
    grant = Grant(new_grant_id(), "User::alice", "files.read_file", GrantScope.tool(), "always")
    store.add(grant)
    assert store.find("User::alice", "files.read_file", {}, "s") == grant
    assert store.revoke(grant.grant_id) is True
    assert store.find("User::alice", "files.read_file", {}, "s") is None
    assert store.revoke(grant.grant_id) is False
    assert store.revoke("g_unknown") is False


@pytest.mark.parametrize(
    "path",
    [
        "src/a b",  # whitespace, control characters and DEL: never a plain path
        "src/a\u2003b",
        "src/a\tb",
        "src/a\x00b",
        "src/a\x1fb",
        "src/a\x7fb",
        "src/a\\..\\..\\x",  # a backslash is a separator somewhere
        "src/%2e%2e/.env",  # encoded dots and slashes
        "src/%2E%2E/.env",
        "src/a%2fb",
        "src/a%2Fb",
        "src/../.env",
        "src/./a",
        "src//a",
        "src/",
        "/src/a",  # absolute, under a relative prefix
        "lib/src/a",
    ],
)
def test_a_prefix_scope_covers_only_plain_paths_under_its_prefix(path: str) -> None:
    scope = GrantScope.prefix_of("/path", "src/")
    assert not scope.covers({"path": path})
    assert scope.covers({"path": "src/a!b.py"})
    assert scope.covers({"path": "src/a/b-c_d.e"})


@pytest.mark.parametrize(
    ("prefixes", "message"),
    [
        ((), "a prefix grant scope needs at least one field"),
        ([("/a", "x/")], "a prefix grant scope needs at least one field"),  # not a tuple
        ((("/a", "x/", "y/"),), "a prefix grant scope's prefixes are (pointer, prefix) pairs"),
        ((["/a", "x/"],), "a prefix grant scope's prefixes are (pointer, prefix) pairs"),
        ((("/a", "x/"), ("/a", "y/")), "/a appears twice in a prefix grant scope"),
        ((("a", "x/"),), "JSON pointer must start with '/': 'a'"),
        ((("", "x/"),), "'' is not a JSON pointer to a field"),
        ((("/a", ""),), "the prefix for /a must be a non-empty string"),
    ],
)
def test_a_prefix_scope_built_by_hand_is_checked(prefixes: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        GrantScope("prefix", prefixes=prefixes)
    assert str(info.value) == message


def test_grant_json_without_the_optional_fields_loads_with_their_defaults() -> None:
    raw = {
        "grant_id": "g_1",
        "principal": "User::alice",
        "tool": "files.read_file",
        "scope": {"kind": "tool"},
        "kind": "always",
    }
    grant = Grant.from_json(raw)
    assert (grant.session_id, grant.created_at, grant.expires_at) == (None, 0.0, None)
    assert (grant.decided_by, grant.widened_by) == (None, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "forever"}, "not a grant: bad id, principal, tool or kind"),
        ({"principal": 5}, "not a grant: bad id, principal, tool or kind"),
        ({"grant_id": None}, "not a grant: bad id, principal, tool or kind"),
        ({"expires_at": "tomorrow"}, "not a grant: expires_at is not a number"),
        ({"expires_at": True}, "not a grant: expires_at is not a number"),
        (
            {"tool": None} | {"scope": {"kind": "tool"}},
            "not a grant: bad id, principal, tool or kind",
        ),
        ({"created_at": None}, "not a grant: TypeError("),
    ],
)
def test_bad_grant_json_is_refused(change: dict[str, Any], message: str) -> None:
    raw = {
        "grant_id": "g_1",
        "principal": "User::alice",
        "tool": "files.read_file",
        "scope": {"kind": "tool"},
        "kind": "session",
        "session_id": "s1",
    }
    assert Grant.from_json(raw).kind == "session"
    with pytest.raises(ValueError) as info:
        Grant.from_json(raw | change)
    assert str(info.value).startswith(message)
    missing = {k: v for k, v in raw.items() if k != "tool"}
    with pytest.raises(ValueError, match=r"^not a grant: KeyError\('tool'\)$"):
        Grant.from_json(missing)


def test_a_session_grant_covers_only_its_session_and_no_grant_outlives_its_expiry() -> None:
    def grant(kind: Literal["session", "always"], expires_at: float | None = None) -> Grant:
        return Grant(
            "g_1",
            "User::alice",
            "files.read_file",
            GrantScope.tool(),
            kind,
            "s1" if kind == "session" else None,
            created_at=0.0,
            expires_at=expires_at,
        )

    session = grant("session")
    assert session.covers("User::alice", "files.read_file", {}, "s1", now=5.0)
    assert not session.covers("User::alice", "files.read_file", {}, "s2", now=5.0)
    assert not session.covers("User::bob", "files.read_file", {}, "s1", now=5.0)
    assert not session.covers("User::alice", "files.write_file", {}, "s1", now=5.0)
    always = grant("always", expires_at=10.0)
    assert always.covers("User::alice", "files.read_file", {}, "s2", now=9.999)
    assert not always.covers("User::alice", "files.read_file", {}, "s2", now=10.0)
    assert not always.covers("User::alice", "files.read_file", {}, "s2", now=11.0)
