"""Tools, the registry that names them, the context a handler gets, and handler results.

A tool has a qualified name ``namespace.name`` (what policies and records use) and a model
alias ``namespace__name`` (what the model sees, since many model APIs refuse dots).
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import re
import threading
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import jsonschema_rs
import pydantic

from clearance import _pointer
from clearance.errors import ToolRegistrationError, UnknownToolError
from clearance.facts.base import FactError
from clearance.facts.declared import DeclaredFact, FactsError, declare_facts
from clearance.policy.base import Principal, ToolInfo

if TYPE_CHECKING:
    from clearance.harness.pipeline import Pipeline

__all__ = [
    "CallContext",
    "CallToolResult",
    "Handler",
    "Tool",
    "ToolImageResult",
    "ToolRegistry",
]

RESERVED_NAMESPACES = frozenset({"clearance", "mcp"})
_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
MAX_IMAGE_BASE64 = 768_000
MAX_IMAGE_METADATA = 128_000

Handler = Callable[[dict[str, Any], "CallContext"], Any]


@dataclass(slots=True)
class Tool:
    """A tool the model may call.

    Qualified name and model alias are set when the tool is registered under a namespace.
    """

    name: str
    """The tool's name inside its namespace: ``[a-z0-9_-]``, at most 64 characters."""
    handler: Handler
    """``(arguments, ctx) -> result``, sync (runs in a worker thread) or async."""
    description: str = ""
    input_schema: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    """JSON Schema 2020-12 of the arguments; the root must be an object schema."""
    read_only: bool = False
    """Read-only calls of a session may run together; mutating ones run alone."""
    concurrency: int | None = None
    """At most this many calls of this tool run at once (harness-wide)."""
    timeout: float | None = None
    """Seconds a call may run before it ends with status ``timeout``."""
    sensitive: Sequence[str] = ()
    """JSON pointers of arguments withheld from the journal and asks."""
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """Free-form hints (MCP-style ``title``, ``destructiveHint``...), visible to policies."""
    source: str = "callback"
    server: str | None = None
    root: str | os.PathLike[str] | None = None
    """The directory ``path`` and ``command`` facts are resolved against."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """How arguments are interpreted, by JSON pointer: ``{"/path": "path", "/to/*":
    "email"}`` (see :mod:`clearance.facts`). Each is canonicalized once per call, and every
    stage after schema validation, the handler included, sees the canonical value (R11)."""
    namespace: str = field(default="", init=False)
    qualified_name: str = field(default="", init=False)
    model_alias: str = field(default="", init=False)
    validator: Any = field(default=None, init=False, repr=False)
    is_async: bool = field(default=False, init=False, repr=False)
    info: ToolInfo = field(init=False, repr=False)
    declared_facts: tuple[DeclaredFact, ...] = field(default=(), init=False, repr=False)
    """The checked form of ``facts`` (set at registration)."""


class ToolRegistry:
    """Every tool a harness knows, by qualified name and by model alias.

    Register with :meth:`register` or the :meth:`tool` decorator. The registry freezes when
    the first session is created; registering after that raises ``ToolRegistrationError``.
    """

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._aliases: dict[str, Tool] = {}
        self._frozen = False

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> None:
        self._frozen = True

    def register(self, namespace: str, tools: Iterable[Tool]) -> list[Tool]:
        """Register ``tools`` under ``namespace``; all or nothing."""
        tools = list(tools)
        prepared = [self._prepare(namespace, tool) for tool in tools]
        seen: set[str] = set()
        for tool in prepared:
            for key in (tool.qualified_name, tool.model_alias):
                if key in self._tools or key in self._aliases or key in seen:
                    raise ToolRegistrationError(
                        tool.qualified_name,
                        f"the name {key!r} is already registered"
                        if key == tool.qualified_name
                        else f"its model alias {key!r} collides with another tool's",
                    )
                seen.add(key)
        for tool in prepared:
            self._tools[tool.qualified_name] = tool
            self._aliases[tool.model_alias] = tool
        return prepared

    def tool(
        self,
        qualified_name: str,
        *,
        description: str | None = None,
        read_only: bool = False,
        concurrency: int | None = None,
        timeout: float | None = None,
        sensitive: Sequence[str] = (),
        annotations: Mapping[str, Any] | None = None,
        **unknown: Any,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a function as a tool; its input schema comes from its signature.

        Parameters become the arguments (typed through pydantic); a parameter annotated
        ``CallContext`` receives the call context instead::

            @registry.tool("app.show_status")
            async def show_status(text: str, ctx: CallContext) -> dict: ...
        """
        if unknown:
            raise ToolRegistrationError(
                qualified_name, f"unknown option(s): {', '.join(sorted(unknown))}"
            )
        namespace, dot, name = qualified_name.partition(".")
        if not dot:
            raise ToolRegistrationError(qualified_name, "name it 'namespace.name'")

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            schema, handler = _from_signature(qualified_name, fn)
            doc = inspect.getdoc(fn) or ""
            self.register(
                namespace,
                [
                    Tool(
                        name,
                        handler,
                        description=description if description is not None else doc,
                        input_schema=schema,
                        read_only=read_only,
                        concurrency=concurrency,
                        timeout=timeout,
                        sensitive=sensitive,
                        annotations=dict(annotations or {}),
                    )
                ],
            )
            return fn

        return decorate

    def get(self, name: str) -> Tool:
        """Look a tool up by qualified name or model alias."""
        tool = self._tools.get(name) or self._aliases.get(name)
        if tool is None:
            raise UnknownToolError(name)
        return tool

    def find(self, name: str) -> Tool | None:
        return self._tools.get(name) or self._aliases.get(name)

    def select(self, patterns: Iterable[str] | None) -> dict[str, Tool]:
        """The tools matching qualified-name globs (all when ``patterns`` is None).

        A pattern that matches nothing raises ``UnknownToolError``: an agent that names a
        tool that does not exist is a configuration mistake, not a narrower agent.
        """
        if patterns is None:
            return dict(self._tools)
        chosen: dict[str, Tool] = {}
        for pattern in patterns:
            hits = [t for q, t in self._tools.items() if fnmatchcase(q, pattern)]
            if not hits:
                raise UnknownToolError(pattern, f"no registered tool matches {pattern!r}")
            for t in hits:
                chosen[t.qualified_name] = t
        return chosen

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._tools or name in self._aliases)

    def _prepare(self, namespace: str, tool: Tool) -> Tool:
        if self._frozen:
            raise ToolRegistrationError(
                f"{namespace}.{getattr(tool, 'name', '?')}",
                "the registry is frozen (a session was created); register tools before that",
            )
        if not isinstance(tool, Tool):
            raise ToolRegistrationError(f"{namespace}.?", f"expected a Tool, got {tool!r}")
        qualified = f"{namespace}.{tool.name}"
        if not isinstance(namespace, str) or not _NAME.match(namespace):
            raise ToolRegistrationError(
                qualified, f"namespace {namespace!r} is not [a-z0-9_-]{{1,64}}"
            )
        if namespace in RESERVED_NAMESPACES:
            raise ToolRegistrationError(qualified, f"the namespace {namespace!r} is reserved")
        if not isinstance(tool.name, str) or not _NAME.match(tool.name):
            raise ToolRegistrationError(qualified, f"name {tool.name!r} is not [a-z0-9_-]{{1,64}}")
        if "__" in namespace or namespace.endswith("_") or tool.name.startswith("_"):
            # The alias namespace__name must split back into exactly one tool.
            raise ToolRegistrationError(
                qualified, "names may not make the model alias ambiguous ('__' at the join)"
            )
        if not callable(tool.handler):
            raise ToolRegistrationError(qualified, "handler is not callable")
        if not isinstance(tool.read_only, bool):
            raise ToolRegistrationError(qualified, "read_only must be True or False")
        if tool.concurrency is not None and (
            not isinstance(tool.concurrency, int)
            or isinstance(tool.concurrency, bool)
            or tool.concurrency < 1
        ):
            raise ToolRegistrationError(qualified, "concurrency must be a positive integer")
        if tool.timeout is not None and (
            not isinstance(tool.timeout, int | float)
            or isinstance(tool.timeout, bool)
            or tool.timeout <= 0
        ):
            raise ToolRegistrationError(qualified, "timeout must be a positive number of seconds")
        if not isinstance(tool.description, str):
            raise ToolRegistrationError(qualified, "description must be a string")
        if isinstance(tool.sensitive, str):
            raise ToolRegistrationError(qualified, "sensitive must be a list of JSON pointers")
        for pointer in tool.sensitive:
            try:
                _pointer.parse(pointer)
            except (ValueError, AttributeError):
                raise ToolRegistrationError(
                    qualified, f"sensitive entry {pointer!r} is not a JSON pointer"
                ) from None
        if not isinstance(tool.annotations, Mapping):
            raise ToolRegistrationError(qualified, "annotations must be a mapping")
        schema = tool.input_schema
        if not isinstance(schema, Mapping):
            raise ToolRegistrationError(qualified, "input_schema must be a JSON object")
        schema = dict(schema)
        schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
        try:
            json.dumps(schema)
        except (TypeError, ValueError) as exc:
            raise ToolRegistrationError(qualified, f"input_schema is not JSON: {exc}") from None
        except RecursionError:
            raise ToolRegistrationError(qualified, "input_schema is nested too deeply") from None
        validator = _compile_schema(qualified, schema)
        if schema.get("type") != "object":
            raise ToolRegistrationError(
                qualified, 'the root of input_schema must be {"type": "object", ...}'
            )
        try:
            declared = declare_facts(tool.facts, root=tool.root, schema=schema)
        except (FactsError, FactError) as exc:
            raise ToolRegistrationError(qualified, f"facts: {exc}") from None
        tool = Tool(
            tool.name,
            tool.handler,
            description=tool.description,
            input_schema=schema,
            read_only=tool.read_only,
            concurrency=tool.concurrency,
            timeout=float(tool.timeout) if tool.timeout is not None else None,
            sensitive=tuple(tool.sensitive),
            annotations=dict(tool.annotations),
            source=tool.source,
            server=tool.server,
            root=tool.root,
            facts=dict(tool.facts),
        )
        tool.declared_facts = declared
        tool.namespace = namespace
        tool.qualified_name = qualified
        tool.model_alias = f"{namespace}__{tool.name}"
        tool.validator = validator
        tool.is_async = _is_async(tool.handler)
        tool.info = ToolInfo(
            qualified_name=qualified,
            namespace=namespace,
            name=tool.name,
            read_only=tool.read_only,
            annotations=tool.annotations,
            source=tool.source,
            server=tool.server,
        )
        return tool


_NO_RETRIEVAL = jsonschema_rs.Registry([])
"""A registry that holds only the built-in meta-schemas and fetches nothing: given to
``meta.validate``, whose default would fetch an unknown ``$schema`` over the network."""
_OUTSIDE = re.compile(r"Resource '([^']*)' is not present in a registry")


def _compile_schema(qualified: str, schema: dict[str, Any]) -> Any:
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


def _is_async(fn: Callable[..., Any]) -> bool:
    while hasattr(fn, "func"):  # functools.partial
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__  # callable objects with an async __call__
    )


def _from_signature(qualified: str, fn: Callable[..., Any]) -> tuple[dict[str, Any], Handler]:
    """Derive a JSON Schema from ``fn``'s parameters and an ``(arguments, ctx)`` adapter."""
    try:
        signature = inspect.signature(fn)
        hints = _type_hints(fn)
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

    if _is_async(fn):

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


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(fn, include_extras=True)


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallToolResult:
    """A tool result in the shape MCP uses.

    ``is_error=True`` is a domain error the model may act on (file not found), not a
    failure of the tool.
    """

    content: Sequence[Mapping[str, Any]] | str = ()
    """Content blocks (``{"type": "text", "text": ...}``) or plain text."""
    structured_content: Any = None
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        content = (
            [{"type": "text", "text": self.content}]
            if isinstance(self.content, str)
            else [dict(block) for block in self.content]
        )
        return {
            "content": content,
            "structured_content": self.structured_content,
            "is_error": self.is_error,
        }

    @property
    def text(self) -> str:
        """The text blocks joined, as a text-only model would see them."""
        if isinstance(self.content, str):
            return self.content
        parts = [str(b.get("text", "")) for b in self.content if b.get("type") == "text"]
        if not parts and self.structured_content is not None:
            return json.dumps(self.structured_content, ensure_ascii=False)
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class ToolImageResult:
    """One JPEG or PNG image (base64, at most 768,000 characters) with JSON metadata."""

    metadata: Mapping[str, Any]
    image: str | bytes
    """The image as base64 text, or raw bytes (encoded for you)."""


_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


class ResultError(ValueError):
    """A handler returned something that is not a valid tool result."""


def normalize_result(value: Any) -> CallToolResult:
    """Turn what a handler returned into a :class:`CallToolResult`.

    Raises:
        ResultError: the value is not a string, JSON value, ``CallToolResult`` or a valid
            ``ToolImageResult``.
    """
    if isinstance(value, CallToolResult):
        if not isinstance(value.is_error, bool):
            raise ResultError("CallToolResult.is_error must be a bool")
        content = value.content
        if not isinstance(content, str):
            if not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in content):
                raise ResultError("CallToolResult.content must be text or blocks with a 'type'")
        _check_json(value.to_json())
        return value
    if isinstance(value, ToolImageResult):
        return _image_result(value)
    if isinstance(value, str):
        return CallToolResult(value)
    _check_json(value)
    text = json.dumps(value, ensure_ascii=False)
    return CallToolResult([{"type": "text", "text": text}], structured_content=value)


def _check_json(value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ResultError(f"the result is not JSON-serializable: {exc}") from None


def _image_result(value: ToolImageResult) -> CallToolResult:
    image = value.image
    if isinstance(image, bytes | bytearray):
        raw = bytes(image)
        encoded = base64.b64encode(raw).decode("ascii")
    elif isinstance(image, str):
        encoded = image
        try:
            raw = base64.b64decode(image, validate=True)
        except ValueError:
            raise ResultError("ToolImageResult.image is not valid base64") from None
    else:
        raise ResultError("ToolImageResult.image must be base64 text or bytes")
    if len(encoded) > MAX_IMAGE_BASE64:
        raise ResultError(
            f"the image is {len(encoded)} base64 characters; the limit is {MAX_IMAGE_BASE64}"
        )
    if raw.startswith(_PNG):
        mime = "image/png"
    elif raw.startswith(_JPEG):
        mime = "image/jpeg"
    else:
        raise ResultError("the image is neither PNG nor JPEG (checked by its signature)")
    if not isinstance(value.metadata, Mapping):
        raise ResultError("ToolImageResult.metadata must be a JSON object")
    _check_json(dict(value.metadata))
    meta_text = json.dumps(dict(value.metadata), ensure_ascii=False)
    if len(meta_text) > MAX_IMAGE_METADATA:
        raise ResultError(
            f"image metadata is {len(meta_text)} characters; the limit is {MAX_IMAGE_METADATA}"
        )
    return CallToolResult(
        [{"type": "text", "text": meta_text}, {"type": "image", "data": encoded, "mimeType": mime}],
        structured_content=dict(value.metadata),
    )


# --- the context a handler gets ------------------------------------------------------------


class _Done:
    """An awaitable that is already complete (what ``progress`` returns in a worker thread)."""

    def __await__(self) -> Generator[Any, Any, None]:
        return
        yield


class CallContext:
    """What a handler knows about its call, and how it reports progress and sees cancellation."""

    __slots__ = (
        "_cancelled",
        "_done",
        "_loop_thread",
        "_pipeline",
        "call_id",
        "model_alias",
        "principal",
        "qualified_name",
        "session_id",
        "turn_id",
    )

    def __init__(
        self,
        *,
        session_id: str,
        turn_id: str | None,
        call_id: str,
        qualified_name: str,
        model_alias: str,
        principal: Principal,
        pipeline: Pipeline | None = None,
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.call_id = call_id
        self.qualified_name = qualified_name
        self.model_alias = model_alias
        self.principal = principal
        self._pipeline = pipeline
        self._cancelled = False
        self._done = False
        self._loop_thread = threading.get_ident()

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled or timed out (for sync handlers to poll)."""
        return self._cancelled

    def raise_if_cancelled(self) -> None:
        """Raise ``CancelledError`` in a sync handler whose call was cancelled."""
        if self._cancelled:
            raise CancelledError(f"call {self.call_id!r} was cancelled")

    def cancel(self) -> None:
        self._cancelled = True  # a plain store: sync handlers poll it from their thread

    def progress(self, message: str, data: Mapping[str, Any] | None = None) -> Awaitable[None]:
        """Report progress: ``await ctx.progress("step 2")`` in an async handler, or plain
        ``ctx.progress("step 2")`` in a sync handler (it returns once recorded)."""
        if self._pipeline is None or self._done:
            return _Done()
        coro = self._pipeline.progress(self, message, dict(data) if data else None)
        if threading.get_ident() != self._loop_thread:
            anyio.from_thread.run(lambda: coro)
            return _Done()
        return coro


class CancelledError(Exception):
    """Raised by ``CallContext.raise_if_cancelled`` in a sync handler."""
