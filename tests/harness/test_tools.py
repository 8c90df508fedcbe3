import base64
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from clearance import (
    CallContext,
    CallToolResult,
    Tool,
    ToolImageResult,
    ToolRegistrationError,
    ToolRegistry,
    UnknownToolError,
)
from clearance.harness.tools import ResultError, normalize_result


def noop(arguments: dict[str, Any], ctx: CallContext) -> str:
    return "ok"


OBJ = {"type": "object", "properties": {"path": {"type": "string"}}}


def test_register_gives_qualified_name_and_alias() -> None:
    registry = ToolRegistry()
    (tool,) = registry.register(
        "files", [Tool("read_file", noop, input_schema=OBJ, read_only=True)]
    )
    assert tool.qualified_name == "files.read_file"
    assert tool.model_alias == "files__read_file"
    assert registry.get("files.read_file") is registry.get("files__read_file") is tool
    assert "files__read_file" in registry
    with pytest.raises(UnknownToolError):
        registry.get("files.nope")


@pytest.mark.parametrize(
    ("namespace", "tool", "reason"),
    [
        ("files", Tool("read_file", noop, input_schema={"type": "string"}), "root of input_schema"),
        (
            "files",
            Tool("read_file", noop, input_schema={"type": "objekt"}),
            "not valid JSON Schema",
        ),
        (
            "files",
            Tool("read_file", noop, input_schema={"type": "object", "minProperties": -1}),
            "not valid",
        ),
        ("clearance", Tool("x", noop), "reserved"),
        ("mcp", Tool("x", noop), "reserved"),
        ("Files", Tool("x", noop), "namespace"),
        ("files", Tool("Read File", noop), "name"),
        ("files", Tool("x.y", noop), "name"),
        ("files", Tool("x", "not callable"), "callable"),  # type: ignore[arg-type]
        ("files", Tool("x", noop, concurrency=0), "concurrency"),
        ("files", Tool("x", noop, timeout=-1), "timeout"),
        ("files", Tool("x", noop, read_only="yes"), "read_only"),  # type: ignore[arg-type]
        ("files", Tool("x", noop, sensitive=["token"]), "JSON pointer"),
        ("files", Tool("x", noop, sensitive="/token"), "sensitive"),
        ("a__b", Tool("x", noop), "ambiguous"),
        ("files", Tool("_x", noop), "ambiguous"),
    ],
)
def test_bad_registrations_name_tool_and_reason(namespace: str, tool: Tool, reason: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(namespace, [tool])
    assert reason in info.value.reason
    assert info.value.tool.startswith(namespace)
    assert len(registry) == 0


def test_duplicates_and_alias_collisions_are_refused_all_or_nothing() -> None:
    registry = ToolRegistry()
    registry.register("files", [Tool("read", noop)])
    with pytest.raises(ToolRegistrationError, match="already registered"):
        registry.register("files", [Tool("other", noop), Tool("read", noop)])
    assert [t.qualified_name for t in registry] == ["files.read"]
    with pytest.raises(ToolRegistrationError, match="already registered"):
        registry.register("web", [Tool("get", noop), Tool("get", noop)])


def test_unknown_options_are_refused() -> None:
    with pytest.raises(TypeError):
        Tool("x", noop, colour="red")  # type: ignore[call-arg]
    registry = ToolRegistry()
    with pytest.raises(ToolRegistrationError, match=r"unknown option.*colour"):
        registry.tool("a.b", colour="red")


def test_registry_freezes() -> None:
    registry = ToolRegistry()
    registry.freeze()
    with pytest.raises(ToolRegistrationError, match="frozen"):
        registry.register("files", [Tool("x", noop)])


def test_decorator_derives_schema_from_signature() -> None:
    registry = ToolRegistry()

    @registry.tool("app.show_status", read_only=True)
    async def show_status(text: str, ctx: CallContext, level: int = 1) -> dict[str, Any]:
        """Show a status line."""
        return {"text": text, "level": level}

    tool = registry.get("app__show_status")
    assert tool.description == "Show a status line."
    assert tool.read_only and tool.is_async
    schema = tool.input_schema
    assert schema["properties"]["text"] == {"type": "string"}
    assert schema["properties"]["level"]["type"] == "integer"
    assert schema["required"] == ["text"]
    assert schema["additionalProperties"] is False
    assert "ctx" not in schema["properties"]


def test_decorator_requires_namespace() -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolRegistrationError, match=r"namespace\.name"):
        registry.tool("plain")


def test_select_by_globs_and_unknown_pattern() -> None:
    registry = ToolRegistry()
    registry.register("files", [Tool("read", noop), Tool("write", noop)])
    registry.register("web", [Tool("get", noop)])
    assert sorted(registry.select(["files.*"])) == ["files.read", "files.write"]
    assert sorted(registry.select(None)) == ["files.read", "files.write", "web.get"]
    with pytest.raises(UnknownToolError):
        registry.select(["git.*"])


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16


def test_normalize_results() -> None:
    assert normalize_result("hi").text == "hi"
    r = normalize_result({"a": 1})
    assert r.structured_content == {"a": 1} and r.text == '{"a": 1}'
    r = normalize_result(CallToolResult("nope", is_error=True))
    assert r.is_error
    with pytest.raises(ResultError):
        normalize_result(object())
    with pytest.raises(ResultError):
        normalize_result(float("nan"))


def test_image_results_checked_by_signature_and_size() -> None:
    r = normalize_result(ToolImageResult({"w": 1}, PNG))
    image = r.to_json()["content"][1]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == PNG
    assert (
        normalize_result(ToolImageResult({}, base64.b64encode(JPEG).decode())).to_json()["content"][
            1
        ]["mimeType"]
        == "image/jpeg"
    )
    with pytest.raises(ResultError, match="neither PNG nor JPEG"):
        normalize_result(ToolImageResult({}, b"GIF89a" + b"\x00" * 10))
    with pytest.raises(ResultError, match="768000"):
        normalize_result(ToolImageResult({}, PNG + b"\x00" * 600_000))
    with pytest.raises(ResultError, match="128000"):
        normalize_result(ToolImageResult({"m": "x" * 130_000}, PNG))
    with pytest.raises(ResultError, match="base64"):
        normalize_result(ToolImageResult({}, "not base64!!"))


# --- nothing is fetched while compiling a schema (issue 19) ---------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a schema, and records that it was asked."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.requests.append(self.path)
        body = json.dumps({"type": "string"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 serving schemas: its base URL and the paths asked."""
    requests: list[str] = []
    handler = type("Handler", (_Recorder,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _object(**extra: Any) -> dict[str, Any]:
    return {"type": "object", **extra}


REMOTE_SCHEMAS = {
    "ref": lambda base: _object(properties={"a": {"$ref": f"{base}/a.json"}}),
    "unused $defs ref": lambda base: _object(**{"$defs": {"x": {"$ref": f"{base}/x.json"}}}),
    "relative to a remote $id": lambda base: _object(
        **{"$id": f"{base}/root.json"}, properties={"a": {"$ref": "b.json"}}
    ),
    "$schema": lambda base: _object(**{"$schema": f"{base}/meta.json"}),
    "nested $schema": lambda base: _object(
        properties={"a": {"$schema": f"{base}/m.json", "type": "string"}}
    ),
    "$dynamicRef": lambda base: _object(properties={"a": {"$dynamicRef": f"{base}/d.json"}}),
}


@pytest.mark.parametrize("kind", sorted(REMOTE_SCHEMAS))
def test_no_request_leaves_while_registering_a_tool(
    schema_server: tuple[str, list[str]], kind: str
) -> None:
    base, requests = schema_server
    schema = REMOTE_SCHEMAS[kind](base)
    registry = ToolRegistry()
    try:
        registry.register("up", [Tool("t", noop, input_schema=schema)])
    except ToolRegistrationError as exc:
        assert exc.tool == "up.t"
        if kind not in ("nested $schema",):
            assert "outside the schema" in exc.reason and base in exc.reason, exc.reason
            assert "nothing is fetched" in exc.reason
    else:
        # Only a schema that needs nothing from outside may register.
        assert kind == "nested $schema"
    assert requests == []


def test_a_file_ref_is_refused_not_read(tmp_path: Path) -> None:
    target = tmp_path / "secret.json"
    target.write_text(json.dumps({"type": "string"}))
    schema = _object(properties={"a": {"$ref": target.as_uri()}})
    with pytest.raises(ToolRegistrationError, match="outside the schema") as caught:
        ToolRegistry().register("up", [Tool("t", noop, input_schema=schema)])
    assert target.as_uri() in caught.value.reason


def test_local_refs_and_standard_meta_schemas_still_resolve() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"path": {"type": "string", "minLength": 1}},
        "properties": {"path": {"$ref": "#/$defs/path"}, "tree": {"$ref": "#"}},
    }
    (tool,) = ToolRegistry().register("up", [Tool("t", noop, input_schema=schema)])
    assert tool.validator.is_valid({"path": "a", "tree": {"path": "b"}})
    assert not tool.validator.is_valid({"path": ""})
    assert not tool.validator.is_valid({"tree": {"path": 1}})


def test_a_deeply_nested_schema_is_refused_cleanly() -> None:
    schema: dict[str, Any] = {"type": "object"}
    inner = schema
    for _ in range(5000):
        inner["properties"] = {"a": {"type": "object"}}
        inner = inner["properties"]["a"]
    with pytest.raises(ToolRegistrationError, match="nested too deeply"):
        ToolRegistry().register("up", [Tool("t", noop, input_schema=schema)])
