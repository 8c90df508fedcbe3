"""docs/hosts.md "Many hosts, one store" (once in the PAGE): its Python example runs as
written (against a schema of its own on the test server), and its configuration line is one
``load_config`` takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from postgres_support import PG_URL, fresh_schema

from clearance.config import load_config
from clearance.errors import ConfigError

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hosts.md"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Many hosts, one store")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_two_hosts_example_runs() -> None:
    (code,) = re.findall(r"^```python\n(.*?)^```$", _section(), re.DOTALL | re.MULTILINE)
    written = 'STORE = "postgresql://postgres@127.0.0.1:5432/test?schema=clearance"'
    assert written in code
    with fresh_schema(PG_URL) as (url, _):
        code = code.replace(written, f"STORE = {url!r}")
        exec(compile(code, "docs/hosts.md (Many hosts, one store)", "exec"), {"__name__": "readme"})


def test_the_store_line_is_a_configuration(tmp_path: Path) -> None:
    (line,) = re.findall(r"^store = .*$", _section(), re.MULTILINE)
    config = tmp_path / "clearance.toml"
    config.write_text(f'{line}\n[evaluator]\nkind = "noop"\n')
    assert load_config(config).store == "postgresql://clearance@db.internal:5432/clearance"
    config.write_text('store = "sqlite:///x.db"\n[evaluator]\nkind = "noop"\n')
    with pytest.raises(ConfigError, match=r"clearance.toml:1: store must be a PostgreSQL URL"):
        load_config(config)
    config.write_text('[evaluator]\nkind = "noop"\n')
    assert load_config(config).store is None


@pytest.mark.anyio
async def test_build_harness_picks_the_postgres_stores_and_closes_them(tmp_path: Path) -> None:
    from clearance.config import build_harness
    from clearance.harness.ask_store_postgres import PostgresAskStore
    from clearance.harness.grants_postgres import PostgresGrantStore
    from clearance.harness.journal import PostgresJournal

    with fresh_schema() as (url, schema):
        config = tmp_path / "clearance.toml"
        config.write_text(
            f'store = "{url}"\n[evaluator]\nkind = "local"\nallow = ["files.*"]\n'
            f'[tools.files]\nroot = "{tmp_path}"\n'
        )
        (tmp_path / "notes.txt").write_text("hello")
        harness = build_harness(load_config(config))
        assert isinstance(harness.grants, PostgresGrantStore)
        assert isinstance(harness.ask_store, PostgresAskStore)
        assert isinstance(harness.journal, PostgresJournal)
        from clearance import Principal

        async with harness:
            session = await harness.create_session(principal=Principal("User", "alice"))
            read = await session.call_tool("files__read_file", {"path": "notes.txt"})
            assert read.ok and "hello" in read.text
        assert harness.grants.database.closed
        events = PostgresJournal(url, host="reader")
        try:
            assert [e.type for e in events.events()][:2] == ["session_created", "call_decided"]
        finally:
            events.close()
        assert schema
