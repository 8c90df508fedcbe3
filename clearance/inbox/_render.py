"""The inbox's HTML: the page, one card per ask, and the small pages around them.

Everything that comes from the ask store was chosen, at least in part, by a model (the
arguments, the reason a guardrail quotes, a call id) or a server. Each such text goes
through :func:`_h`: first :func:`clearance._text.printable` (control, bidi and invisible
characters spelled as visible escapes, so ``txt.exe`` cannot be shown for ``exe.txt``),
then ``html.escape`` with quotes (safe in text and in attribute values). No value from the
store is ever put anywhere else: not in a tag name, a URL path or a script. The page's
script (``inbox.js``) only moves these server-made cards around and writes answers'
messages with ``textContent``.

Arguments are laid out as every approval surface lays them (:func:`ask_lines`): the
deciding fields first and whole, then the rest, long values elided in the middle, with
every argument whole one click away.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

from clearance._text import json_text, printable
from clearance.harness.ask_display import ask_lines, deciding_fields
from clearance.harness.ask_query import GROUPS
from clearance.harness.ask_store import ASK_LIFE, HOST_GONE, StoredAsk

__all__ = [
    "ANSWER_LABELS",
    "ask_card",
    "ask_list",
    "inbox_page",
    "message_page",
    "seen_digest",
    "time_left",
]

ANSWER_LABELS: Mapping[str, str] = {
    "deny": "Deny",
    "allow_once": "Allow once",
    "allow_session": "Allow for this session",
    "allow_always": "Allow always",
}
"""The answer buttons, in page order: deny first (the default of a form sent with Enter)."""

_WIDTH = 160
"""The longest line of a non-deciding argument before its value is elided."""


def _h(text: Any) -> str:
    """Untrusted text made inert in HTML (see the module docstring)."""
    return escape(printable(text), quote=True)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _argument_rows(ask: StoredAsk, *, elide_values: bool) -> tuple[str, bool]:
    """The arguments as rows (deciding first, whole), and whether a value was elided."""
    arguments = dict(ask.arguments)
    deciding = [n for n in dict.fromkeys(deciding_fields(ask)) if n in arguments]
    order = deciding + [n for n in arguments if n not in deciding]
    rows, elided = [], False
    for name in order:
        decides = name in deciding
        # One argument at a time, so that its value is split from its name exactly.
        (line,) = ask_lines(
            {name: arguments[name]},
            [name] if decides else [],
            width=_WIDTH,
            elide_values=elide_values,
        )
        label = printable(name)
        value = line[len(label) + 2 :]
        full = ask_lines({name: arguments[name]}, [], width=_WIDTH, elide_values=False)[0]
        elided = elided or line != full
        rows.append(
            f'<div class="arg{" deciding" if decides else ""}">'
            f'<span class="name">{_h(label)}</span>'
            f'<span class="value">{_h(value)}</span></div>'
        )
        note = ask.notes.get(name) if decides else None
        if note:  # a look-alike value: say so, with its canonical form
            rows.append(f'<div class="note" role="alert">{_h(note)}</div>')
    return "".join(rows), elided


def _mapping_rows(values: Mapping[str, Any]) -> str:
    return "".join(
        f'<div class="arg"><span class="name">{_h(name)}</span>'
        f'<span class="value">{_h(json_text(value, default=str))}</span></div>'
        for name, value in values.items()
    )


def _scopes(ask: StoredAsk) -> str:
    if not ask.suggestions:
        return ""
    options = "".join(
        f'<label><input type="radio" name="scope" value="{index}"'
        f"{' checked' if index == 1 else ''}> {_h(scope.description or scope.kind)}</label>"
        for index, scope in enumerate(ask.suggestions, 1)
    )
    return (
        '<fieldset class="scopes"><legend>A session or always answer covers</legend>'
        f"{options}</fieldset>"
    )


_SHOWN = (
    "ask_id", "principal", "tool", "call_id", "session_id", "host", "arguments", "reason",
    "policies", "suggestions", "deciding", "facts", "notes", "created_at",
)  # fmt: skip
"""What a card shows of an ask (``StoredAsk.to_json``'s fields)."""


def seen_digest(ask: StoredAsk) -> str:
    """A digest of everything the card of ``ask`` shows, and of the call's arguments hash:
    the card's form carries it, and an answer whose digest is not the ask's now is
    refused (the person answers the call they were shown, never another)."""
    shown = {k: v for k, v in ask.to_json().items() if k in _SHOWN}
    shown["arguments_hash"] = ask.arguments_hash
    text = json.dumps(shown, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


def time_left(seconds: float) -> str:
    """How long an ask can still be answered, as the page's countdown says it."""
    if seconds <= 0:
        return "expired"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"expires in {hours} h {minutes:02d} min"
    if minutes:
        return f"expires in {minutes} min {secs:02d} s"
    return f"expires in {secs} s"


def _group_data(ask: StoredAsk) -> str:
    """The card's ``data-`` attributes the page groups cards by."""
    values = {
        "host": ask.host,
        "tool": ask.tool,
        "principal": ask.principal,
        "policy": ask.policies[0] if ask.policies else "",
    }
    assert tuple(values) == GROUPS
    return "".join(f' data-{name}="{_h(value)}"' for name, value in values.items())


def ask_card(ask: StoredAsk, *, expires_at: float | None = None, now: float | None = None) -> str:
    """One ask as an ``<article>``: what it is, why it asks, how long it can still be
    answered (until ``expires_at``, by default a stored ask's life after it was asked;
    counted down by the page from ``now``), and the answer form."""
    if expires_at is None:
        expires_at = ask.created_at + ASK_LIFE
    if now is None:
        now = time.time()
    rows, elided = _argument_rows(ask, elide_values=True)
    whole = ""
    if elided:
        all_rows, _ = _argument_rows(ask, elide_values=False)
        whole = (
            '<details class="whole"><summary>Every argument whole</summary>'
            f'<div class="args">{all_rows}</div></details>'
        )
    facts = (
        '<details class="facts" open><summary>Facts</summary>'
        f'<div class="args">{_mapping_rows(ask.facts)}</div></details>'
        if ask.facts
        else ""
    )
    provenance_of = getattr(ask, "provenance", None)  # carried by asks that know it
    provenance = (
        f'<section class="provenance"><h3>Provenance</h3><div class="args">'
        f"{_mapping_rows(provenance_of)}</div></section>"
        if isinstance(provenance_of, Mapping) and provenance_of
        else ""
    )
    policies = (
        f'<p class="policies"><span class="label">Asked by</span> '
        f"{', '.join(f'<code>{_h(p)}</code>' for p in ask.policies)}</p>"
        if ask.policies
        else ""
    )
    buttons = "".join(
        f'<button type="submit" name="decision" value="{value}" class="{value}">{label}</button>'
        for value, label in ANSWER_LABELS.items()
    )
    ask_id = _h(ask.ask_id)
    gone = ask.closed_why == HOST_GONE
    form = (
        f'<p class="gone" role="alert">Its host <code>{_h(ask.host or "?")}</code> is gone: '
        "the process whose call waited on this ask stopped, the call ended interrupted, "
        "and the ask cannot be answered.</p>"
        if gone
        else '<form method="post" action="/answer">'
        f'<input type="hidden" name="ask_id" value="{ask_id}">'
        f'<input type="hidden" name="seen" value="{seen_digest(ask)}">'
        f'<fieldset class="controls">{_scopes(ask)}<div class="buttons">{buttons}</div>'
        "</fieldset></form>"
    )
    expires = (
        ""
        if gone
        else f'<span class="expires" data-expires="{expires_at:.3f}">'
        f"{time_left(expires_at - now)}</span>"
    )
    return (
        f'<article class="ask{" host-gone" if gone else ""}" id="ask-{ask_id}" '
        f'data-ask-id="{ask_id}"{_group_data(ask)}>'
        f'<header><h2 class="tool">{_h(ask.tool)}</h2>'
        f'<span class="who">{_h(ask.principal)}</span>'
        f'<span class="host">host <code>{_h(ask.host or "-")}</code></span>'
        f'<time datetime="{_h(_iso(ask.created_at))}">{_h(_when(ask.created_at))}</time>'
        f"{expires}</header>"
        f'<p class="reason"><span class="label">Why</span> {_h(ask.reason)}</p>'
        f"{policies}"
        f'<div class="args">{rows}</div>{whole}{facts}{provenance}'
        f'<p class="ids">ask <code>{ask_id}</code> · call <code>{_h(ask.call_id)}</code> · '
        f"session <code>{_h(ask.session_id)}</code> · host <code>{_h(ask.host or '-')}</code>"
        "</p>"
        f"{form}"
        '<p class="result" role="status"></p>'
        "</article>"
    )


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def ask_list(
    asks: Sequence[StoredAsk], *, max_age: float = ASK_LIFE, now: float | None = None
) -> str:
    """The cards of ``asks``, each answerable for ``max_age`` seconds from its asking."""
    now = time.time() if now is None else now
    return "".join(ask_card(a, expires_at=a.created_at + max_age, now=now) for a in asks)


def _document(title: str, body: str, *, data: Mapping[str, str] | None = None) -> str:
    attributes = "".join(f' data-{k}="{_h(v)}"' for k, v in (data or {}).items())
    script = '<script src="/static/inbox.js" defer></script>' if data is not None else ""
    return (
        "<!doctype html>"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_h(title)}</title>"
        '<link rel="stylesheet" href="/static/inbox.css">'
        f"{script}</head><body{attributes}>{body}</body></html>"
    )


_FILTER_LABELS = {"host": "Host", "tool": "Tool", "principal": "Principal", "policy": "Policy"}


def _filters() -> str:
    """The filter and group controls: their options are the store's values and counts,
    which the script fills in (as text, never as markup)."""
    selects = "".join(
        f'<label>{label} <select name="{name}" id="filter-{name}">'
        f'<option value="">any</option></select></label>'
        for name, label in _FILTER_LABELS.items()
    )
    groups = "".join(
        f'<option value="{name}">{label.lower()}</option>' for name, label in _FILTER_LABELS.items()
    )
    return (
        f'<form id="filters" class="filters">{selects}'
        f'<label>Group by <select name="group" id="group"><option value="">nothing</option>'
        f"{groups}</select></label></form>"
    )


def inbox_page(*, store: str, page_size: int) -> str:
    """The inbox: a shell with no ask and nothing secret on it. Its script signs in with
    the token in the link's fragment, then fills in who is signed in, the filters and the
    cards of one page (``page_size`` asks), and keeps them live from the inbox's events."""
    body = (
        '<header class="top"><h1>clearance inbox</h1>'
        f'<span class="store">{_h(store)}</span>'
        '<span class="user" id="user" hidden>signed in as <strong id="who"></strong></span>'
        '<button type="button" id="signout" hidden>Sign out</button></header>'
        '<div id="outage" class="outage" role="alert" hidden></div>'
        f"<main>{_filters()}"
        '<p class="summary"><span id="count"></span>'
        ' <span id="status" role="status">Signing in</span></p>'
        '<p id="signin" hidden>Not signed in: open the link <code>clearance inbox</code> '
        "printed for you (each person has their own).</p>"
        '<p id="empty" hidden>No asks waiting. New ones appear here as hosts raise them.</p>'
        '<div id="asks"></div>'
        '<nav id="pager" class="pager" hidden><button type="button" id="prev">Previous</button>'
        ' <span id="range"></span> <button type="button" id="next">Next</button></nav>'
        "</main>"
    )
    return _document("clearance inbox", body, data={"page-size": str(page_size)})


def message_page(title: str, message: str, *, back: bool = True) -> str:
    """A page that says one thing (a refusal, an answer given without the script)."""
    link = '<p><a href="/">Back to the inbox</a></p>' if back else ""
    body = (
        f'<main class="narrow"><h1>{_h(title)}</h1>'
        f'<p class="message">{_h(message)}</p>{link}</main>'
    )
    return _document(title, body)
