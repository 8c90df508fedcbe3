"""Attacks on the ``url`` fact: one address, two spellings, two decisions.

``UrlFact`` promises that "a policy that denies ``127.0.0.1`` must see
``http://2130706433/`` and ``http://0x7f.1/`` as that address" (rule R11: equivalent
spellings of one value get one decision). An IPv4-mapped IPv6 literal,
``http://[::ffff:127.0.0.1]/``, is another spelling of the same IPv4 address: the fact's
host is ``::ffff:7f00:1``, so a Cedar ``forbid`` on ``context.facts.url.host ==
"127.0.0.1"`` (the usual SSRF rule, also for ``169.254.169.254``) does not match, while a
real HTTP client (urllib here, httpx alike) given the canonical URL connects to
127.0.0.1.

The test runs a real HTTP server on 127.0.0.1 and a real ``web.fetch`` tool whose handler
fetches the canonical URL with ``urllib.request``.
"""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from clearance import CallContext, Harness, MemoryJournal, Principal, Tool, ToolRegistry
from clearance.facts import UrlFact
from clearance.policy import CedarEvaluator

pytestmark = pytest.mark.anyio

ALICE = Principal("User", "alice")

POLICIES = """
@id("fetch")
permit (principal, action == Action::"web.fetch", resource);

@id("no-internal-addresses")
forbid (principal, action == Action::"web.fetch", resource)
when { ["127.0.0.1", "169.254.169.254"].contains(context.facts.url.host) };
"""


def _mapped_loopback_reachable() -> bool:
    """Whether this machine routes IPv4-mapped IPv6 to 127.0.0.1 (dual-stack sockets)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    probe.listen(1)
    try:
        with socket.create_connection(("::ffff:127.0.0.1", probe.getsockname()[1]), 2):
            return True
    except OSError:
        return False
    finally:
        probe.close()


@pytest.fixture
def internal_server() -> Iterator[tuple[int, list[str]]]:
    """An HTTP server on 127.0.0.1 that records the paths it was asked for."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"internal secret")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()


def fetch_registry() -> ToolRegistry:
    def fetch(arguments: dict[str, Any], ctx: CallContext) -> str:
        with urllib.request.urlopen(arguments["url"], timeout=5) as response:
            return str(response.read().decode())

    reg = ToolRegistry()
    reg.register(
        "web",
        [
            Tool(
                "fetch",
                fetch,
                read_only=True,
                input_schema={
                    "type": "object",
                    "properties": {"url": {"type": "string"}},
                    "required": ["url"],
                    "additionalProperties": False,
                },
                facts={"/url": UrlFact()},
            )
        ],
    )
    return reg


@pytest.mark.skipif(
    not _mapped_loopback_reachable(), reason="IPv4-mapped IPv6 does not reach 127.0.0.1 here"
)
async def test_a_forbidden_ipv4_address_is_forbidden_in_its_ipv6_mapped_spelling(
    internal_server: tuple[int, list[str]],
) -> None:
    port, hits = internal_server
    evaluator = CedarEvaluator(policies=POLICIES)
    async with Harness(fetch_registry(), evaluator=evaluator, journal=MemoryJournal()) as h:
        session = await h.create_session(principal=ALICE)
        plain = await session.call_tool("web__fetch", {"url": f"http://127.0.0.1:{port}/a"})
        assert plain.status == "denied"  # the rule works on the plain spelling
        assert hits == []
        mapped = await session.call_tool(
            "web__fetch", {"url": f"http://[::ffff:127.0.0.1]:{port}/b"}
        )
    assert hits == [], f"the internal server was fetched: {mapped.status}, {mapped.text!r}"
