"""The approval inbox: pending asks in a browser, answered by a person.

:class:`Inbox` serves one page on ``127.0.0.1`` where the people it names see the asks that
wait in an ask store, live (a new ask appears without reloading), and answer each with
``deny``, ``allow_once``, ``allow_session`` or ``allow_always`` and one of the scopes the
ask suggests. An answer goes to the ask store (``answer(ask_id, decision, by=<the
person>, via="inbox")``, or :meth:`Harness.answer_ask
<clearance.harness.session.Harness.answer_ask>` when the inbox runs beside the harness),
so the host waiting on it goes on, in this process or any other sharing the store; the
host journals the answer (``permission_decided`` with ``by`` and ``via``) when it applies
it. ``clearance inbox`` runs one over the CLI's SQLite ask store.

Who may answer: each person gets a one-time login link at start. Opening it and pressing
"Sign in" sets an ``HttpOnly``, ``SameSite=Strict`` session cookie and burns the link.
Every answer carries the session's CSRF token, checked on the server; every request must
name this inbox's own address in ``Host`` (and ``Origin``, when sent), against DNS
rebinding; the page allows no inline script and no framing. Everything that comes from the
store (model-chosen arguments, reasons, names) is shown with its control and bidi
characters spelled out and HTML-escaped. See ``docs/inbox.md``.

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
