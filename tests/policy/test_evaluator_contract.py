"""The evaluator contract: ``Evaluator``'s declared optional parts, their defaults, and
``as_evaluator`` for evaluators that only have ``evaluate``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import pytest

from clearance.harness.tools import Tool, ToolRegistry
from clearance.policy import (
    AllOf,
    AuthorityEvaluator,
    AuthzRequest,
    CedarEvaluator,
    Evaluator,
    LocalEvaluator,
    NoopEvaluator,
    Verdict,
    as_evaluator,
    evaluate,
)
from clearance.policy.base import bind, check_verdict
from clearance.types import Principal, SessionInfo, ToolLike


def _handler(arguments: dict[str, Any], ctx: Any) -> str:
    return "ok"


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "additionalProperties": False,
    }
    registry.register(
        "files",
        [
            Tool("read_file", _handler, input_schema=schema, read_only=True),
            Tool("write_file", _handler, input_schema=schema),
        ],
    )
    return registry


def _request(registry: ToolRegistry, name: str = "files.read_file") -> AuthzRequest:
    return AuthzRequest(
        Principal("User", "alice"), registry.get(name).info, {"path": "a"}, SessionInfo("s")
    )


class Bare:
    """Only the required part."""

    def evaluate(self, request: AuthzRequest) -> Verdict:
        return Verdict.allow("bare")


class Described:
    """Every optional part, without subclassing Evaluator."""

    name = "described"
    allows_everything = False

    def __init__(self) -> None:
        self.tools: list[ToolLike] | None = None

    @property
    def bound(self) -> bool:
        return self.tools is not None

    @property
    def bound_tools(self) -> Iterable[ToolLike] | None:
        return self.tools

    def bind(self, catalog: Iterable[ToolLike]) -> None:
        self.tools = list(catalog)

    def policy_ids(self) -> list[str]:
        return ["p1", "p2"]

    def evaluate(self, request: AuthzRequest) -> Verdict:
        return Verdict.deny("p1")


def test_the_built_in_evaluators_declare_the_contract() -> None:
    for evaluator in (NoopEvaluator(), LocalEvaluator(allow=["files.*"]), CedarEvaluator("")):
        assert isinstance(evaluator, Evaluator)
        assert isinstance(evaluator, AuthorityEvaluator)
        assert as_evaluator(evaluator) is evaluator
    assert isinstance(AllOf(Bare()), Evaluator)


def test_the_defaults_of_the_optional_parts() -> None:
    class Minimal(Evaluator):
        def evaluate(self, request: AuthzRequest) -> Verdict:
            return Verdict.deny()

    e = Minimal()
    assert e.name == "Minimal"
    assert e.allows_everything is False
    assert e.bound is True
    assert e.bound_tools is None
    assert e.policy_ids() is None
    e.bind(_registry())  # the default binds nothing and raises nothing


def test_an_evaluator_must_define_evaluate() -> None:
    with pytest.raises(TypeError):
        Evaluator()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="no evaluate"):
        as_evaluator(object())  # type: ignore[arg-type]


def test_a_duck_typed_evaluator_gets_the_defaults() -> None:
    contract = as_evaluator(Bare())
    assert contract.name == "Bare"
    assert (contract.allows_everything, contract.bound) == (False, True)
    assert contract.bound_tools is None and contract.policy_ids() is None
    contract.bind(_registry())  # nothing to bind: no error
    assert contract.evaluate(_request(_registry())) == Verdict.allow("bare")


def test_a_duck_typed_evaluator_keeps_its_own_optional_parts() -> None:
    inner = Described()
    contract = as_evaluator(inner)
    assert contract.name == "described"
    assert contract.bound is False and contract.bound_tools is None
    registry = _registry()
    bind(inner, registry)
    assert contract.bound is True
    assert [t.qualified_name for t in contract.bound_tools or ()] == [
        "files.read_file",
        "files.write_file",
    ]
    assert contract.policy_ids() == ("p1", "p2")


def test_policy_ids_of_the_built_ins() -> None:
    local = LocalEvaluator(allow=["files.read_file", "files.*"], deny=["files.write_file"])
    assert local.policy_ids() == ("allow:files.read_file", "allow:files.*", "deny:files.write_file")
    assert NoopEvaluator().policy_ids() == ()
    cedar = CedarEvaluator(
        '@id("read") permit(principal, action, resource);\n'
        "forbid(principal, action, resource) when { false };\n"
        "permit(principal == ?principal, action, resource);"  # a template: decides nothing
    )
    assert cedar.policy_ids() == ("read", "policy1")
    assert AllOf(local, NoopEvaluator()).policy_ids() == local.policy_ids()
    assert AllOf(local, Described()).policy_ids() == (*local.policy_ids(), "p1", "p2")
    assert AllOf(local, Bare()).policy_ids() is None  # one member cannot say


def test_all_of_binds_and_names_every_member() -> None:
    cedar = CedarEvaluator(
        '@id("r") permit(principal, action == Action::"files.read_file", resource);'
    )
    inner = Described()
    combined = AllOf(cedar, inner, Bare())
    assert combined.name == "all_of(cedar, described, Bare)"
    assert combined.bound is False
    registry = _registry()
    combined.bind(registry)
    assert combined.bound and cedar.bound and inner.bound
    assert [t.qualified_name for t in cedar.bound_tools] == [t.qualified_name for t in registry]


def test_noop_is_the_only_built_in_that_allows_everything() -> None:
    assert NoopEvaluator().allows_everything is True
    for other in (LocalEvaluator(allow=["files.*"]), CedarEvaluator(""), AllOf(NoopEvaluator())):
        assert other.allows_everything is False


def test_one_settler_checks_sync_and_async_answers() -> None:
    request = _request(_registry())

    class Async:
        async def evaluate(self, request: AuthzRequest) -> Verdict:
            return Verdict.ask("a")

    class Wrong:
        def evaluate(self, request: AuthzRequest) -> Any:
            return {"effect": "allow"}

    async def main() -> None:
        assert await evaluate(Bare(), request) == Verdict.allow("bare")
        assert await evaluate(Async(), request) == Verdict.ask("a")
        with pytest.raises(TypeError, match=r"Wrong\.evaluate returned .*not a Verdict"):
            await evaluate(Wrong(), request)

    anyio.run(main)
    with pytest.raises(TypeError, match="not a Verdict"):
        check_verdict(Wrong(), "allow")
