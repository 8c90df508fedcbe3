"""What a person is shown of an ask store, a page at a time: the asks waiting (and those
whose host is gone), filtered by host, tool, principal and policy, grouped, and counted.

An inbox over 10,000 pending asks cannot read them all for every look (issue 38: a 17 MB
page, a core busy): each bundled store answers these in its query, with the filter in
SQL, a page of rows parsed and only counts for the rest:

- :func:`shown_page`: one page of the shown asks matching an :class:`AskFilter`, oldest
  first (or grouped: by the group's value, then oldest first), and how many match in all;
- :func:`shown_groups`: the values of one field (``host``, ``tool``, ``principal``,
  ``policy``) among the matching asks, with how many asks each has;
- :func:`shown_states`: every shown ask's id and state (``pending`` or ``host gone``):
  what an inbox compares to tell its pages what changed; :class:`States` keeps them up
  to date reading only the pending asks' ids and the hosts' leases, and reads the few asks
  that came or went (each look at 10,000 asks parses no body).

A store without these methods (one written elsewhere) is read whole through
:func:`~clearance.harness.ask_store.shown_asks` and filtered here: the same answer, at the
old cost. :func:`shown_sql` is the shared core of the SQLite and PostgreSQL queries: the
two differ only in how they read a field of the JSON body (their dialect).

"Shown" is the inbox's set (:func:`~clearance.harness.ask_store.shown_asks`): pending
asks, and asks closed because their host is gone, raised since ``since``. A pending ask
whose host's lease has lapsed is counted as pending until a page reads it (reading it
closes it, as every read does).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, NamedTuple

from clearance.harness.ask_store import HOST_GONE, StoredAsk, shown_asks

__all__ = [
    "GROUPS",
    "MAX_GROUPS",
    "AskFilter",
    "ShownPage",
    "States",
    "Dialect",
    "GroupBy",
    "group_key",
    "group_sql",
    "groups_sql",
    "page_sql",
    "shown_groups",
    "shown_page",
    "shown_sql",
    "shown_states",
    "states_of",
]

GroupBy = Literal["host", "tool", "principal", "policy"]

GROUPS: Final[tuple[GroupBy, ...]] = ("host", "tool", "principal", "policy")
"""The fields asks are filtered and grouped by."""

MAX_GROUPS: Final = 100
"""Values of one field reported at most (the most common first)."""


@dataclass(frozen=True, slots=True)
class AskFilter:
    """Which shown asks a page holds: each field given must match exactly (``policy``:
    one of the ask's policies); ``since``: raised at or after this time."""

    host: str | None = None
    tool: str | None = None
    principal: str | None = None
    policy: str | None = None
    since: float = 0.0

    def matches(self, ask: StoredAsk) -> bool:
        """Whether ``ask`` (as its store reports it) is one this filter holds."""
        return (
            ask.created_at >= self.since
            and (self.host is None or ask.host == self.host)
            and (self.tool is None or ask.tool == self.tool)
            and (self.principal is None or ask.principal == self.principal)
            and (self.policy is None or self.policy in ask.policies)
        )

    def without(self, name: GroupBy) -> AskFilter:
        """This filter, whatever ``name`` is (the choices a filter's menu offers)."""
        cleared: dict[str, Any] = {name: None}
        return replace(self, **cleared)


class ShownPage(NamedTuple):
    """A page of shown asks, and counts of every ask its filter holds."""

    asks: list[StoredAsk]
    total: int
    """Every shown ask the filter holds (pending, and with its host gone)."""
    waiting: int
    """Those of them that are pending."""


def group_key(ask: StoredAsk, by: GroupBy) -> str:
    """The value ``ask`` is grouped under by ``by`` (its first policy for ``policy``)."""
    if by == "policy":
        return ask.policies[0] if ask.policies else ""
    return str(getattr(ask, by))


def _is_shown(ask: StoredAsk) -> bool:
    return ask.status == "pending" or ask.closed_why == HOST_GONE


def shown_page(
    store: Any,
    where: AskFilter,
    *,
    offset: int = 0,
    limit: int = 50,
    group: GroupBy | None = None,
) -> ShownPage:
    """One page of the shown asks ``where`` holds (``limit`` from ``offset``), oldest
    first, or by ``group``'s value and then oldest first; and how many it holds in all."""
    own = getattr(store, "shown_page", None)
    if callable(own):
        page, total, waiting = own(where, offset=offset, limit=limit, group=group)
        return ShownPage(list(page), int(total), int(waiting))
    found = [a for a in shown_asks(store, since=where.since) if where.matches(a)]
    # The stores' order: the group's value, then oldest first, then by id.
    found.sort(key=lambda a: (group_key(a, group) if group else "", a.created_at, a.ask_id))
    waiting = sum(1 for a in found if a.status == "pending")
    return ShownPage(found[offset : offset + limit], len(found), waiting)


def shown_groups(store: Any, where: AskFilter, by: GroupBy) -> list[tuple[str, int]]:
    """The values of ``by`` among the shown asks ``where`` holds, each with how many asks
    have it, the most common first (at most :data:`MAX_GROUPS`)."""
    own = getattr(store, "shown_groups", None)
    if callable(own):
        return [(str(v), int(n)) for v, n in own(where, by)]
    counts: Counter[str] = Counter()
    for ask in shown_asks(store, since=where.since):
        if where.matches(ask):
            counts.update(ask.policies if by == "policy" else [group_key(ask, by)])
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:MAX_GROUPS]


def shown_states(store: Any, since: float) -> dict[str, str]:
    """Every shown ask raised since ``since``, by id: ``pending``, or ``host gone``."""
    own = getattr(store, "shown_states", None)
    if callable(own):
        return dict(own(since))
    return {
        a.ask_id: "pending" if a.status == "pending" else HOST_GONE
        for a in shown_asks(store, since=since)
        if _is_shown(a)
    }


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells what :func:`shown_sql` needs."""

    mark: str
    """A parameter's placeholder (``?``, ``%s``)."""
    field: Callable[[str], str]
    """The SQL of a text field of the row's JSON ``body`` (``host``, ``closed_why``)."""
    policies: str
    """A row source of the body's policies with one text column ``value``, for a join
    (``json_each(body, '$.policies')``)."""
    first_policy: str
    """The SQL of the body's first policy."""


def shown_sql(
    dialect: Dialect, table: str, where: AskFilter, *, by_policy: bool = False
) -> tuple[str, list[Any]]:
    """``FROM ... WHERE ...`` of the shown asks ``where`` holds in ``table``, and its
    parameters; with ``by_policy``, one row per (ask, policy) with the policy as ``p.value``.
    The filter is in the query: only matching rows leave the database."""
    m = dialect.mark
    clauses = [
        f"(status = 'pending' OR (status = 'closed' AND {dialect.field('closed_why')} = {m}))",
        f"created_at >= {m}",
    ]
    params: list[Any] = [HOST_GONE, where.since]
    for column, value in (("tool", where.tool), ("principal", where.principal)):
        if value is not None:
            clauses.append(f"{column} = {m}")
            params.append(value)
    if where.host is not None:
        clauses.append(f"{dialect.field('host')} = {m}")
        params.append(where.host)
    if where.policy is not None:
        clauses.append(f"EXISTS (SELECT 1 FROM {dialect.policies} q WHERE q.value = {m})")
        params.append(where.policy)
    source = f"{table}, {dialect.policies} p" if by_policy else table
    return f"FROM {source} WHERE {' AND '.join(clauses)}", params


def group_sql(dialect: Dialect, by: GroupBy | None) -> str:
    """The SQL of the value a row is grouped under (``None``: no grouping)."""
    if by is None:
        return ""
    if by == "host":
        return f"coalesce({dialect.field('host')}, ''), "
    if by == "policy":
        return f"coalesce({dialect.first_policy}, ''), "
    return f"{by}, "


def groups_sql(
    dialect: Dialect, table: str, where: AskFilter, by: GroupBy
) -> tuple[str, list[Any]]:
    """The query of :func:`shown_groups` in ``dialect``."""
    source, params = shown_sql(dialect, table, where, by_policy=by == "policy")
    value = {
        "host": f"coalesce({dialect.field('host')}, '')",
        "tool": "tool",
        "principal": "principal",
        "policy": "p.value",
    }[by]
    return (
        f"SELECT {value} AS v, count(*) AS n {source} GROUP BY v ORDER BY n DESC, v "
        f"LIMIT {MAX_GROUPS}",
        params,
    )


def page_sql(
    dialect: Dialect, table: str, columns: str, where: AskFilter, group: GroupBy | None
) -> tuple[str, str, list[Any]]:
    """The queries of :func:`shown_page` in ``dialect``: the page's rows (its last two
    parameters are the limit and offset, to add) and the counts (every row, the pending
    ones), with their parameters."""
    source, params = shown_sql(dialect, table, where)
    m = dialect.mark
    rows = (
        f"SELECT {columns} {source} ORDER BY {group_sql(dialect, group)}created_at, ask_id "
        f"LIMIT {m} OFFSET {m}"
    )
    counts = "SELECT count(*), coalesce(sum(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0)"
    return rows, f"{counts} {source}", params


def states_of(rows: Sequence[tuple[Any, ...]], gone: Mapping[str, bool]) -> dict[str, str]:
    """The states of ``(ask_id, status, instance)`` rows: a pending ask whose lease
    ``gone`` says is gone reads ``host gone``."""
    return {
        str(ask_id): "pending"
        if status == "pending" and not (instance and gone.get(str(instance), True))
        else HOST_GONE
        for ask_id, status, instance in rows
    }


class States:
    """The shown asks' states (:func:`shown_states`), kept up to date cheaply.

    A look reads the pending asks' ids (an indexed column, no body) and which hosts'
    leases are gone (a small table), then reads only the asks that appeared or stopped
    being pending (:meth:`get`, a few). It reads every state again (the full
    :func:`shown_states`) at the first look, when the leases that are gone changed (a
    pending ask whose host is gone reads ``host gone``), when more than
    :data:`MAX_FRESH` asks appeared, and every
    ``full_every`` seconds. A store without ``pending_ids`` and ``gone_leases`` is read in
    full at every look."""

    MAX_FRESH: Final = 200

    def __init__(self, store: Any, *, full_every: float = 60.0) -> None:
        self.store = store
        self.full_every = full_every
        self.states: dict[str, str] | None = None
        self._gone: frozenset[str] = frozenset()
        self._full_at = -math.inf
        self.full_looks = 0
        """How many looks read every state (the rest read the changes only)."""

    def reset(self) -> None:
        """Forget what was seen (after an outage): the next look reads every state."""
        self.states = None

    def look(self, since: float) -> dict[str, str]:
        """The states of the shown asks raised since ``since``, by id."""
        ids_of = getattr(self.store, "pending_ids", None)
        gone_of = getattr(self.store, "gone_leases", None)
        if not (callable(ids_of) and callable(gone_of)):
            return shown_states(self.store, since)
        gone = frozenset(gone_of())
        pending = set(ids_of(since))
        known = self.states
        fresh = pending if known is None else pending - known.keys()
        if (
            known is None
            or gone != self._gone
            or len(fresh) > self.MAX_FRESH
            or time.monotonic() - self._full_at > self.full_every
        ):
            self.states = shown_states(self.store, since)
            self._gone, self._full_at = gone, time.monotonic()
            self.full_looks += 1
            return dict(self.states)
        states = {i: state for i, state in known.items() if i in pending or state == HOST_GONE}
        left = [i for i in known if i not in states]
        for ask_id in [*left, *fresh]:
            found = self.store.get(ask_id)  # came, or stopped being pending: how it is now
            if found is not None and _is_shown(found) and found.created_at >= since:
                states[ask_id] = "pending" if found.status == "pending" else HOST_GONE
        self.states = states
        return dict(states)
