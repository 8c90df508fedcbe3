"""What a ``tools/call`` request may carry into the gateway.

Everything a client chose and the gateway passes on (the request id, which becomes part of
the call id and of the journal's records; the tool name, shown in errors and logs; the
arguments, recorded and sent to an upstream server; an answer's content; the request state
and progress token) is checked here, before the request touches a session, and a bad value
refuses that one request with ``INVALID_PARAMS`` and a sentence naming what was wrong:

- text must be valid UTF-8 (a 2026-07-28 request is parsed by ``json.loads``, which accepts
  a lone surrogate such as ``"\\ud800"``; neither SQLite, PostgreSQL nor an MCP server
  can take one) and names hold no NUL;
- arguments nest at most :data:`~clearance._limits.MAX_DEPTH` deep and hold only JSON
  (no ``NaN``);
- a tool name is at most :data:`MAX_NAME` characters, a request state at most
  :data:`MAX_STATE`.

The request id is never refused for its length: :func:`request_label` keeps a short one as
it is and hashes a long one, so a call id stays short whatever the client sends.
The request body as a whole is bounded by the HTTP gateway's ``max_request_bytes``.
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types
from mcp.shared.exceptions import MCPError

from clearance._limits import bounded_label, json_fault, text_fault

__all__ = ["MAX_NAME", "MAX_STATE", "check_call", "request_label"]

MAX_NAME: Final = 256
"""The longest tool name a request may carry."""
MAX_STATE: Final = 256
"""The longest request state a retry may carry (the gateway's own are 32 characters)."""


def request_label(request_id: Any) -> str:
    """The request id as it goes into a call id and a record: itself when short printable
    ASCII, else a hash of it (see :func:`~clearance._limits.bounded_label`).

    Raises:
        MCPError: the id is text that is not valid UTF-8.
    """
    if isinstance(request_id, str):
        fault = text_fault(request_id)
        if fault is not None:
            raise _refused(f"the request id {fault}")
    return bounded_label(request_id)


def check_call(params: mcp_types.CallToolRequestParams) -> None:
    """Refuse a ``tools/call`` whose name, arguments, answers, state or progress token
    cannot go on (see the module docstring).

    Raises:
        MCPError: ``INVALID_PARAMS``, naming what was wrong.
    """
    name = params.name
    fault = text_fault(name)
    if fault is not None:
        raise _refused(f"the tool name {fault}")
    if len(name) > MAX_NAME:
        raise _refused(f"the tool name is longer than {MAX_NAME} characters")
    if params.arguments is not None:
        fault = json_fault(params.arguments)
        if fault is not None:
            raise _refused(f"the arguments, {fault}")
    state = params.request_state
    if state is not None:
        fault = text_fault(state)
        if fault is None and len(state) > MAX_STATE:
            fault = f"is longer than {MAX_STATE} characters"
        if fault is not None:
            raise _refused(f"the requestState {fault}")
    if params.input_responses:
        fault = json_fault({key: _plain(value) for key, value in params.input_responses.items()})
        if fault is not None:
            raise _refused(f"the inputResponses, {fault}")
    meta = params.meta
    token = None
    if isinstance(meta, dict):
        token = meta.get("progress_token", meta.get("progressToken"))
    if isinstance(token, str):
        fault = text_fault(token)
        if fault is None and len(token) > MAX_NAME:
            fault = f"is longer than {MAX_NAME} characters"
        if fault is not None:
            raise _refused(f"the progressToken {fault}")


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(by_alias=True) if callable(dump) else value


def _refused(why: str) -> MCPError:
    return MCPError(code=mcp_types.INVALID_PARAMS, message=f"Invalid params: {why}")
