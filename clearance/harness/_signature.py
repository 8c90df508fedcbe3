"""A tool from a plain function: its input schema derived from the signature (through
pydantic), and the ``(arguments, ctx)`` handler that calls it."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import pydantic

from clearance.errors import ToolRegistrationError
from clearance.harness._context import CallContext, Handler

__all__ = ["from_signature", "is_async_handler"]


def is_async_handler(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (through ``functools.partial`` and
    callable objects too)."""
    while hasattr(fn, "func"):  # functools.partial
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__  # callable objects with an async __call__
    )


def from_signature(qualified: str, fn: Callable[..., Any]) -> tuple[dict[str, Any], Handler]:
    """Derive a JSON Schema from ``fn``'s parameters and an ``(arguments, ctx)`` adapter."""
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolRegistrationError(qualified, f"cannot read the signature: {exc}") from None
    fields: dict[str, Any] = {}
    ctx_param: str | None = None
    for pname, param in signature.parameters.items():
        annotation = hints.get(pname, Any)
        if annotation is CallContext:
            ctx_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolRegistrationError(qualified, f"*{pname} parameters cannot become a schema")
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, default)
    try:
        model = pydantic.create_model(
            f"{qualified}.arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
    except Exception as exc:
        raise ToolRegistrationError(
            qualified, f"cannot derive a schema from the signature: {exc}"
        ) from None
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)

    if is_async_handler(fn):

        async def handler(arguments: dict[str, Any], ctx: CallContext) -> Any:
            kwargs = dict(model.model_validate(arguments))
            if ctx_param:
                kwargs[ctx_param] = ctx
            return await fn(**kwargs)

    else:

        def handler(arguments: dict[str, Any], ctx: CallContext) -> Any:  # type: ignore[misc]
            kwargs = dict(model.model_validate(arguments))
            if ctx_param:
                kwargs[ctx_param] = ctx
            return fn(**kwargs)

    return schema, handler
