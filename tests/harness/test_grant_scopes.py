"""A grant's scope covers every field that matters (issue 19), and any string can be asked
about and granted (issue 12 item 16)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

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
        ({"kind": "everything"}, "kind is one of"),
        ({"kind": "prefix", "prefixes": {}}, "at least one field"),
        ({"kind": "prefix", "prefixes": {"path": "src/"}}, "must start with '/'"),
        ({"kind": "prefix", "prefixes": {"": "src/"}}, "not a JSON pointer to a field"),
        ({"kind": "prefix", "prefixes": {"/path": ""}}, "non-empty string"),
        ({"kind": "prefix", "prefixes": {"/path": 3}}, "non-empty string"),
        ({"kind": "prefix", "prefixes": ["/path", "src/"]}, "are a JSON object"),
        ({"kind": "prefix", "field": None, "prefix": None}, "not a JSON pointer"),
        (
            {"kind": "prefix", "field": "/source", "prefix": "src/", "prefixes": {"/a": "b/"}},
            "disagree",
        ),
        ({"kind": "exact", "arguments_hash": None}, "needs the hash"),
        ({"kind": "tool", "arguments_hash": "ab"}, "has no arguments hash"),
    ],
)
def test_bad_scope_json_is_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GrantScope.from_json(raw)


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
    without = suggest_scopes(
        {"attachment": "docs/r.pdf"}, path_fields=["attachment"], other_facts=["to"]
    )
    assert [s.kind for s in without] == ["exact", "prefix", "tool"]
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
    evaluator = LocalEvaluator(ask=["files.write_file"])

    def widen(ask: PermissionAsk) -> PermissionDecision:
        (scope,) = [s for s in ask.suggestions if s.kind == "prefix"]
        return PermissionDecision("allow_always", scope=scope)

    store = stores.grants()
    async with harness(coding_registry(rec), evaluator=evaluator, grant_store=store) as h:
        s = await h.create_session(principal=ALICE, on_permission_ask=widen)
        assert (await s.call_tool("files__write_file", {"path": f"d{LONE}/a", "content": ""})).ok
    store.close()
    reopened = stores.grants()
    (grant,) = reopened.list()
    assert grant.scope.prefixes == ((("/path", f"d{LONE}/"),))
    found = reopened.find(ALICE_ID, "files.write_file", {"path": f"d{LONE}/b", "content": ""}, "s")
    assert found == grant
    reopened.close()
