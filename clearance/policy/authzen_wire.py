"""The AuthZEN wire format, as both ends of clearance speak it.

OpenID AuthZEN Authorization API 1.0 (``docs/authzen.md``): a policy enforcement point
(PEP) POSTs a JSON evaluation request (``subject``, ``action``, ``resource``, ``context``)
to a policy decision point (PDP), which answers a Decision (``{"decision": true|false,
"context": {...}}``). :class:`~clearance.policy.authzen.AuthZenEvaluator` is a PEP;
``clearance pdp`` (:mod:`clearance.pdp`) is a PDP. What they share lives here:

- the default endpoint paths and :func:`pdp_url`, which checks a PDP's URL (HTTPS, or
  plain HTTP to this machine only: a bearer token never crosses a network in clear);
- :func:`loads`, the one JSON reader for what the other end sent: I-JSON (a member named
  twice, ``NaN`` or a lone surrogate is refused, never resolved one way or the other);
- :func:`evaluation_request`, one tool call as an evaluation request (the mapping below);
- :func:`verdict_from_decision`, a Decision as a :class:`~clearance.policy.Verdict`,
  refusing every shape the specification does not allow (:class:`MalformedAnswer`).

The mapping of a call
---------------------
=============  =====================================================================
``subject``    ``{"type": principal.type, "id": principal.id, "properties": attrs}``;
               the principal's parents, when it has some, as
               ``properties.parents = [{"type", "id"}, ...]``
``action``     ``{"name": "<qualified tool name>"}`` (``files.read_file``)
``resource``   ``{"type": "tool", "id": "<qualified tool name>", "properties":
               {"namespace", "name", "read_only", "source", "server", "annotations"}}``
``context``    ``session`` (``id``, ``turn``); ``arguments`` (the final, canonical
               arguments; unless the PEP is told not to send them); ``facts`` (the
               canonical facts, by argument); ``provenance`` (each argument's record,
               where configured)
=============  =====================================================================

The same names as clearance's Cedar convention (``Action::"files.read_file"`` on
``Tool::"files.read_file"``), so a policy ports between the two. The enforcement point adds
``"options": {"decision_context": true}``: ``clearance pdp`` then answers with each
Decision's context (reasons, an ask); another PDP ignores a member it does not know.

Reading a Decision
------------------
``decision`` must be a JSON boolean and ``context``, when present, an object; anything else
is malformed, and a malformed answer denies (R1). Then, in order: a ``context.error`` denies
(an answer that reports an error is never an allow); the context field the PEP was told
means "ask a person" (``ask_field``: ``true``, a string (the reason shown) or an object,
such as the ``access_request`` of the Access Request and Approval profile) makes an ask;
``true`` allows; anything else denies. ``context.reasons`` (a list of strings) become the
verdict's reasons, ``context.message`` (else ``context.reason``) its message.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from clearance.policy.base import AuthzRequest, Verdict, provenance_of

__all__ = [
    "EVALUATIONS_PATH",
    "EVALUATION_PATH",
    "METADATA_PATH",
    "SEMANTICS",
    "MalformedAnswer",
    "dumps",
    "evaluation_request",
    "is_loopback",
    "loads",
    "metadata_url",
    "pdp_url",
    "verdict_from_decision",
]

EVALUATION_PATH = "/access/v1/evaluation"
"""The Access Evaluation API's default path, below the PDP's URL."""
EVALUATIONS_PATH = "/access/v1/evaluations"
"""The Access Evaluations (batch) API's default path."""
METADATA_PATH = "/.well-known/authzen-configuration"
"""Where a PDP publishes its metadata (inserted between the host and the URL's path)."""
SEMANTICS = ("execute_all", "deny_on_first_deny", "permit_on_first_permit")
"""The values of ``options.evaluations_semantic`` (``execute_all`` is the default)."""

_MAX_TEXT = 1000
"""The longest reason or message kept from a Decision's context (characters)."""
_MAX_REASONS = 64
"""The most reasons kept from one Decision."""


class MalformedAnswer(ValueError):
    """What the other end sent is not what the specification allows (the call is denied).

    Attributes:
        reason: what was wrong, in one phrase.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- URLs -------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def pdp_url(url: str) -> str:
    """``url`` checked as a PDP's URL (its identifier), without a trailing ``/``.

    HTTPS, or ``http://`` to a loopback address (``127.0.0.1``, ``::1``, ``localhost``);
    no user, password, query or fragment (credentials come from the environment, and the
    specification's identifier has neither query nor fragment).

    Raises:
        ValueError: the URL is none of these, with the reason.
    """
    if not isinstance(url, str) or not url:
        raise ValueError("the PDP's URL must be a non-empty string")
    if not url.isprintable() or any(ch.isspace() for ch in url):
        raise ValueError("the PDP's URL must not hold spaces or control characters")
    if not url.isascii():
        raise ValueError("the PDP's URL must be ASCII (a host in punycode, a path percent-encoded)")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError as exc:
        raise ValueError(f"the PDP's URL is not a URL: {exc}") from None
    if parts.scheme not in ("https", "http"):
        raise ValueError("the PDP's URL must start with https:// (or http:// to this machine)")
    if not host:
        raise ValueError("the PDP's URL has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "the PDP's URL must not carry a user or password (the token comes from the environment)"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError("the PDP's URL must have no query or fragment")
    if parts.scheme == "http" and not is_loopback(host):
        raise ValueError(
            "the PDP's URL must use https:// unless it is on this machine (127.0.0.1, ::1, "
            "localhost): the bearer token would cross the network in clear"
        )
    return url.rstrip("/")


def metadata_url(pdp: str) -> str:
    """Where the PDP ``pdp`` (a URL :func:`pdp_url` accepted) publishes its metadata: the
    well-known path between the host and the URL's own path (``https://h/t1`` ->
    ``https://h/.well-known/authzen-configuration/t1``)."""
    parts = urlsplit(pdp)
    return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path.rstrip('/')}"


# --- JSON ---------------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise MalformedAnswer(f"the member {key!r} appears twice in one object")
            seen.add(key)
    return value


def _constant(name: str) -> Any:
    raise MalformedAnswer(f"{name} is not a JSON number")


def loads(data: bytes | str) -> Any:
    """The JSON value of ``data``, read as I-JSON (RFC 7493): UTF-8, no member named twice
    in one object, no ``NaN`` or ``Infinity``, no lone surrogate.

    Raises:
        MalformedAnswer: ``data`` is none of that, or nested too deeply to read.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except MalformedAnswer:
        raise
    except UnicodeDecodeError:
        raise MalformedAnswer("the body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise MalformedAnswer(f"the body is not JSON ({exc.msg} at {exc.pos})") from None
    except RecursionError:
        raise MalformedAnswer("the JSON is nested too deeply") from None
    _check_strings(value)
    return value


def _check_strings(value: Any) -> None:
    """Refuse lone surrogates (``"\\ud800"``), which JSON's escapes can spell and UTF-8
    cannot: two readers would disagree on them. (A loop, not recursion: the value may be
    as deep as the JSON reader allowed.)"""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedAnswer("a string holds a lone surrogate") from None
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a JSON number")
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"a {type(value).__name__} cannot be sent as JSON")


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (sets as sorted lists; no ``NaN``).

    Raises:
        ValueError: a value cannot be written as I-JSON (``NaN``, an object that is not
            JSON, a lone surrogate).
    """
    try:
        text = json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
        )
        return text.encode("utf-8")
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone surrogate") from None
    except RecursionError:
        raise ValueError("the value is nested too deeply") from None


# --- the request ------------------------------------------------------------------------------


def evaluation_request(
    request: AuthzRequest, *, arguments: bool = True, provenance: bool = False
) -> dict[str, Any]:
    """One call as an AuthZEN evaluation request (see the module docstring).

    Args:
        request: the call, as an evaluator sees it.
        arguments: send the call's arguments as ``context.arguments``.
        provenance: send each argument's provenance record as ``context.provenance``.

    Raises:
        ValueError: the principal's attributes hold a ``parents`` key while it has parents
            (the two would collide in ``subject.properties``).
    """
    principal = request.principal
    subject: dict[str, Any] = {"type": principal.type, "id": principal.id}
    properties = dict(principal.attrs)
    if principal.parents:
        if "parents" in properties:
            raise ValueError(
                "the principal has parents and an attribute named 'parents': they would "
                "collide in subject.properties"
            )
        properties["parents"] = [{"type": t, "id": i} for t, i in principal.parents]
    if properties:
        subject["properties"] = properties
    tool = request.tool
    described: dict[str, Any] = {
        "namespace": tool.namespace,
        "name": tool.name,
        "read_only": tool.read_only,
        "source": tool.source,
    }
    if tool.server is not None:
        described["server"] = tool.server
    if tool.annotations:
        described["annotations"] = dict(tool.annotations)
    session: dict[str, Any] = {"id": request.session.id}
    if request.session.turn_id is not None:
        session["turn"] = request.session.turn_id
    context: dict[str, Any] = {"session": session}
    if arguments:
        context["arguments"] = dict(request.arguments)
    if request.facts:
        context["facts"] = dict(request.facts)
    if provenance:
        context["provenance"] = {
            name: dict(record) for name, record in provenance_of(request).items()
        }
    return {
        "subject": subject,
        "action": {"name": tool.qualified_name},
        "resource": {"type": "tool", "id": tool.qualified_name, "properties": described},
        "context": context,
    }


# --- the answer ---------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value[:_MAX_TEXT]
    return None


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        status = error.get("status")
        message = error.get("message")
        parts = [str(status)] if isinstance(status, int | str) and status != "" else []
        if isinstance(message, str) and message:
            parts.append(message)
        return " ".join(parts)[:_MAX_TEXT] or "an error (no message)"
    if isinstance(error, str) and error:
        return error[:_MAX_TEXT]
    return "an error (no message)"


def verdict_from_decision(value: Any, *, evaluator: str, ask_field: str | None = None) -> Verdict:
    """A Decision object (``{"decision": bool, "context": {...}}``) as a verdict (see the
    module docstring for the order of the rules).

    Args:
        value: the Decision, as :func:`loads` read it.
        evaluator: the name the verdict gives its evaluator.
        ask_field: the context member that, when set, means "ask a person".

    Raises:
        MalformedAnswer: ``value`` is not a Decision, or ``ask_field`` holds something that
            is neither ``true``, a string nor an object.
    """
    if not isinstance(value, dict):
        raise MalformedAnswer("a decision must be a JSON object")
    decision = value.get("decision")
    if not isinstance(decision, bool):
        shown = "missing" if "decision" not in value else f"{type(decision).__name__}"
        raise MalformedAnswer(f"'decision' must be true or false, not {shown}")
    context = value.get("context", {})
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise MalformedAnswer("a decision's 'context' must be a JSON object")
    reasons: tuple[str, ...] = ()
    listed = context.get("reasons")
    if isinstance(listed, list):
        reasons = tuple(r[:_MAX_TEXT] for r in listed[:_MAX_REASONS] if isinstance(r, str) and r)
    message = _text(context.get("message")) or _text(context.get("reason"))
    if "error" in context and context["error"] is not None:
        error = _error_text(context["error"])
        return Verdict(
            "deny",
            reasons,
            (f"the PDP reported an error: {error}",),
            message or f"the PDP could not decide: {error}",
            evaluator,
        )
    if ask_field is not None:
        asked = context.get(ask_field)
        if asked is not None and asked is not False:
            if asked is True or isinstance(asked, str | dict):
                reason = _text(asked) or message or "the PDP asks for a person's approval"
                return Verdict("ask", reasons, (), reason, evaluator)
            raise MalformedAnswer(
                f"context.{ask_field} must be true, a string or an object, "
                f"not {type(asked).__name__}"
            )
    if decision:
        return Verdict("allow", reasons, (), message, evaluator)
    return Verdict("deny", reasons, (), message or "denied by the PDP", evaluator)
