"""The approval inbox: pending asks in a browser, answered by a person.

:class:`Inbox` serves one page on ``127.0.0.1`` where the people it names see the asks that
wait in an ask store, a page at a time, filtered and grouped by host, tool, principal and
policy (in the store's query), live (the inbox pushes what changed as server-sent events:
a new ask appears without reloading), each counting down its time, and answer each, or a
group's at once, with ``deny``, ``allow_once``, ``allow_session`` or ``allow_always`` and
one of the scopes the ask suggests. An answer goes to the ask store (``answer(ask_id, decision, by=<the
person>, via="inbox")``, or :meth:`Harness.answer_ask
<clearance.harness.session.Harness.answer_ask>` when the inbox runs beside the harness),
so the host waiting on it goes on, in this process or any other sharing the store; the
host journals the answer (``permission_decided`` with ``by`` and ``via``) when it applies
it. ``clearance inbox`` runs one over the CLI's SQLite ask store.

Who may answer (rule R13): each person gets a token at start, printed in a link after
``#`` (a fragment never reaches a server). The page keeps it in the tab's
``sessionStorage`` and sends it as ``Authorization: Bearer``; the inbox sets and reads no
cookie, so another server on this machine that the browser visits holds nothing that
answers. Failed attempts are limited and logged. Over an ask store, each answer is sealed
with the person's approver key. Every request must name this inbox's own address in
``Host`` (and ``Origin``, when sent), against DNS rebinding; the page allows no inline
script and no framing. Everything that comes from the store (model-chosen arguments,
reasons, names) is shown with its control and bidi characters spelled out and
HTML-escaped. See ``docs/inbox.md``.

This package needs Starlette and uvicorn, which the optional ``mcp`` extra installs;
without them importing it raises :class:`~clearance.errors.MissingExtraError`, whose
message says how to install them.
"""

from clearance.errors import MissingExtraError as _MissingExtraError

try:
    import starlette  # noqa: F401  (the optional extra: checked before anything uses it)
    import uvicorn  # noqa: F401
except ImportError as exc:
    raise _MissingExtraError("mcp", "the approval inbox") from exc

from clearance.inbox._app import Inbox, InboxStarted

__all__ = ["Inbox", "InboxStarted"]
