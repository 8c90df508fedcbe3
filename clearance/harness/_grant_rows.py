"""What the SQLite and PostgreSQL grant stores share: the persisted grants as rows
``(grant_id, body)`` of a ``grants`` table, parsed once and kept in memory, brought up to
date either wholly or by the rows a change feed names, and read filtered for
``clearance grants list``.

Each store reads its database its own way (a file under a lock, a pool of connections);
what it read comes here as rows, and what a row means (a grant, or one skipped with a
warning: it authorizes nothing) is decided here once for both.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Iterable, Sequence

from clearance.harness.grants import Grant, MemoryGrantStore

__all__ = ["FEED_KEPT", "PersistedGrantStore", "Row"]

_log = logging.getLogger("clearance")

Row = tuple[str, str]
"""``(grant_id, body)``: one stored grant, its body ``Grant.to_json()`` as JSON text."""

FEED_KEPT = 10_000
"""Changes a change feed keeps: a store further behind reloads every grant."""


class PersistedGrantStore(MemoryGrantStore):
    """A grant store whose ``always`` grants live in a database table (see the module
    docstring); session grants stay in memory."""

    reads_database = True
    """Lookups query the database: the pipeline runs them off the event loop."""

    path: str
    """Where the grants are, for messages (a file, or the database's name)."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, tuple[str, Grant]] = {}
        """Each persisted grant with its stored text: a reload parses only changed rows."""
        self._skipped: set[str] = set()
        """Rows already warned about (each is warned about once)."""

    def _apply_rows(self, rows: Sequence[Row], changed: Sequence[str] | None) -> None:
        """Bring the persisted grants in memory to what the database holds: ``rows`` are
        every row (``changed`` is ``None``), or the rows now stored of the ids the change
        feed named (``changed``: an id without a row was removed)."""
        if changed is None:
            self._replace_always(self._parse_all(rows))
            return
        present = {grant_id for grant_id, _ in rows}
        gone = [g for g in changed if g not in present]
        for grant_id in gone:
            self._rows.pop(grant_id, None)
        self._apply_always(self._parse_some(rows), gone)

    def _filtered(
        self, rows: Iterable[Row], principal: str | None, tool: str | None
    ) -> builtins.list[Grant]:
        """The grants of ``rows`` (read with the filters applied in the query) that are
        readable and match them: the query filters what the body says, this checks it
        once more on the parsed grant."""
        found = [self._parse_row(grant_id, body) for grant_id, body in rows]
        return [
            g
            for g in found
            if g is not None
            and (principal is None or g.principal == principal)
            and (tool is None or g.tool == tool)
        ]

    def _parse_some(self, rows: Iterable[Row]) -> builtins.list[Grant]:
        """Parse changed rows into ``_rows``; the grants read (an unreadable row is
        dropped from memory: it authorizes nothing)."""
        grants = []
        for grant_id, body in rows:
            self._rows.pop(grant_id, None)
            grant = self._parse_row(grant_id, body)
            if grant is None:
                held = self._grants.get(grant_id)
                if held is not None and held.kind == "always":
                    self._forget(grant_id)
                continue
            self._rows[grant_id] = (body, grant)
            grants.append(grant)
        return grants

    def _parse_row(self, grant_id: str, body: str) -> Grant | None:
        try:
            grant = Grant.from_json(json.loads(body))
            if grant.kind != "always" or grant.grant_id != grant_id:
                raise ValueError("not a persisted grant")
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            if grant_id not in self._skipped:
                self._skipped.add(grant_id)
                _log.warning("%s: skipping grant %r: %s", self.path, grant_id, exc)
            return None
        return grant

    def _parse_all(self, rows: Iterable[Row]) -> tuple[Grant, ...]:
        """Every row, parsed (a row whose text did not change is not parsed again)."""
        known, self._rows = self._rows, {}
        for grant_id, body in rows:
            cached = known.get(grant_id)
            if cached is not None and cached[0] == body:
                self._rows[grant_id] = cached
                continue
            grant = self._parse_row(grant_id, body)
            if grant is not None:
                self._rows[grant_id] = (body, grant)
        return tuple(grant for _, grant in self._rows.values())
