"""Compiling a tool's input schema into its validator, without fetching anything."""

from __future__ import annotations

import re
from typing import Any

import jsonschema_rs

from clearance.errors import ToolRegistrationError

__all__ = ["compile_schema"]

_NO_RETRIEVAL = jsonschema_rs.Registry([])
"""A registry that holds only the built-in meta-schemas and fetches nothing: given to
``meta.validate``, whose default would fetch an unknown ``$schema`` over the network."""
_OUTSIDE = re.compile(r"Resource '([^']*)' is not present in a registry")


def compile_schema(qualified: str, schema: dict[str, Any]) -> Any:
    """The validator of a tool's input schema, compiled without fetching anything.

    An input schema may come from an MCP server or any other party the registry does not
    trust. The schema library would follow a ``$ref`` (or ``$schema``) to ``http(s)://`` or
    ``file://`` and fetch it: a request to an address the server chose, or a local file
    read. Here every retrieval is refused, so only references inside the schema (such as
    ``#/$defs/name``) and the built-in meta-schemas resolve.

    Raises:
        ToolRegistrationError: the schema is not valid JSON Schema 2020-12, or it refers to
            a resource outside itself.
    """
    refused: list[str] = []

    def refuse(uri: str) -> Any:
        refused.append(uri)
        raise ValueError(f"clearance does not fetch {uri}")

    try:
        jsonschema_rs.meta.validate(schema, registry=_NO_RETRIEVAL)
        return jsonschema_rs.Draft202012Validator(schema, retriever=refuse)
    except Exception as exc:  # jsonschema_rs raises several types
        text = str(exc)
        outside = refused[:1] or _OUTSIDE.findall(text)[:1]
        if outside:
            raise ToolRegistrationError(
                qualified,
                f"input_schema refers to {outside[0]!r}, outside the schema: nothing is "
                "fetched while registering a tool, so only references inside it (like "
                "'#/$defs/name') and the standard meta-schemas are allowed",
            ) from None
        first = text.splitlines()[0] if text else type(exc).__name__
        raise ToolRegistrationError(
            qualified, f"input_schema is not valid JSON Schema 2020-12: {first}"
        ) from None
