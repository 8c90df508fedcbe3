"""clearance's evaluators served as an OpenID AuthZEN PDP (``clearance pdp``).

Another gateway, an API gateway or an identity provider that speaks the AuthZEN
Authorization API 1.0 asks clearance: ``POST /access/v1/evaluation`` (and
``/access/v1/evaluations``) with a bearer token, and gets the Decision the configured
Cedar policies, pack or local rules give, with the same schema check and canonical facts
(rule R11) as a call in clearance's own pipeline. The metadata document is at
``/.well-known/authzen-configuration``. How a request becomes a call is in
:mod:`clearance.pdp._requests`; the routes, refusals and answers in
:mod:`clearance.pdp._app`; serving in :mod:`clearance.pdp._serve`. See ``docs/authzen.md``.

:class:`AuthZenPdp` is a plain ASGI application (no extra needed to import it);
:func:`serve_pdp` needs uvicorn, from the optional ``authzen`` extra, and raises
:class:`~clearance.errors.MissingExtraError` saying how to install it.
"""

from clearance.pdp._app import AuthZenPdp, answer_of, shaped
from clearance.pdp._requests import (
    BadRequest,
    Evaluation,
    evaluation,
    evaluations,
    request_part,
    tool_part,
    wants_context,
)
from clearance.pdp._serve import PdpStarted, serve_pdp

__all__ = [
    "AuthZenPdp",
    "BadRequest",
    "Evaluation",
    "PdpStarted",
    "answer_of",
    "evaluation",
    "evaluations",
    "request_part",
    "serve_pdp",
    "shaped",
    "tool_part",
    "wants_context",
]
