"""A reload of the policies is seen where the decisions are (issue 32): each reload of a
watched or reloaded Cedar set, and each one that failed to load (the previous set staying
in force), is a ``policies_reloaded`` record before the next call's decision and a count in
``clearance.policy.reloads``, not only a log line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from clearance import Harness, Principal, Tool, ToolRegistry
from clearance.errors import PolicyError
from clearance.harness.journal import MemoryJournal, parse_event
from clearance.harness.telemetry import Telemetry
from clearance.policy.cedar import CedarEvaluator, PolicyReload

pytestmark = pytest.mark.anyio

READ = '@id("read") permit (principal, action == Action::"t.read", resource);\n'


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("t", [Tool("read", lambda arguments, ctx: "ok", read_only=True)])
    return registry


def _reloads(journal: MemoryJournal) -> list[dict[str, Any]]:
    return [e.data for e in journal.events() if e.type == "policies_reloaded"]


async def test_a_failed_reload_is_journaled_counted_and_the_last_good_set_decides(
    tmp_path: Path,
) -> None:
    (tmp_path / "p.cedar").write_text(READ)
    evaluator = CedarEvaluator.from_directory(tmp_path, watch=True, watch_interval=0.0)
    journal = MemoryJournal()
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry = Telemetry(meter_provider=meters)
    async with Harness(
        _registry(), evaluator=evaluator, journal=journal, telemetry=telemetry
    ) as harness:
        session = await harness.create_session(principal=Principal("User", "alice"))
        assert (await session.call_tool("t.read", {}, call_id="c1")).status == "ok"
        good = evaluator.policy_version

        (tmp_path / "p.cedar").write_text("permit (principal, action syntax")
        for n in range(2, 5):  # the watch loads a change it read twice in a row
            assert (await session.call_tool("t.read", {}, call_id=f"c{n}")).status == "ok"
        [failed] = _reloads(journal)
        assert failed["loaded"] is False and failed["how"] == "watch"
        assert failed["evaluator"] == "live" and failed["policy_version"] == good
        assert "p.cedar:1" in failed["error"]
        assert failed["directory"] == str(tmp_path) and failed["host"] == harness.host

        (tmp_path / "p.cedar").write_text(READ.replace('"read"', '"read-2"'))
        for n in range(5, 8):
            last = await session.call_tool("t.read", {}, call_id=f"c{n}")
        assert last.reasons == ("read-2",)
        loaded = _reloads(journal)[1]
        assert loaded["loaded"] is True and loaded["error"] is None
        assert loaded["policy_version"] == evaluator.policy_version != good

    events = journal.events()
    for record in events:
        parsed = parse_event(record)  # the documented form
        if record.type == "policies_reloaded":
            assert not parsed.data.model_extra  # every field documented
    # The decision during which the watch loaded the new set names its version; the
    # record follows it, before the next call's decision.
    order = [e.type if e.type != "call_decided" else e.data["reasons"][0] for e in events]
    reloaded = [n for n, o in enumerate(order) if o == "policies_reloaded"]
    first, second = [n for n, o in enumerate(order) if o == "read-2"][:2]
    assert first < reloaded[1] < second
    assert events[first].data["verdict"]["policy_version"] == loaded["policy_version"]
    data = reader.get_metrics_data()
    assert data is not None
    points: list[Any] = [
        p
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "clearance.policy.reloads"
        for p in metric.data.data_points
    ]
    counts = {
        (p.attributes["clearance.outcome"], p.attributes["clearance.reload"]): p.value
        for p in points
    }
    meters.shutdown()
    assert counts == {("failed", "watch"): 1, ("loaded", "watch"): 1}


async def test_reload_is_journaled_at_close_when_no_call_follows(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text(READ)
    evaluator = CedarEvaluator.from_directory(tmp_path)
    heard: list[PolicyReload] = []
    evaluator.on_reload.append(heard.append)
    journal = MemoryJournal()
    async with Harness(_registry(), evaluator=evaluator, journal=journal) as harness:
        harness.freeze()
        (tmp_path / "p.cedar").write_text("forbid (principal, action, resource) when { 1 };")
        with pytest.raises(PolicyError, match=r"p\.cedar"):
            evaluator.reload()
    [record] = _reloads(journal)
    assert (record["loaded"], record["how"]) == (False, "reload")
    assert [(h.loaded, h.how) for h in heard] == [(False, "reload")]


def test_a_listener_that_raises_never_breaks_a_reload(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text(READ)
    evaluator = CedarEvaluator.from_directory(tmp_path)

    def broken(reload: PolicyReload) -> None:
        raise RuntimeError("listener bug")

    evaluator.on_reload.append(broken)
    evaluator.reload()  # logged, not raised
    assert evaluator.last_error is None
