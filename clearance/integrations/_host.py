"""What the framework adapters share: declaring a framework's tools in a clearance registry,
reading a host's answer to an ask, and what a pending ask shows.

The framework runs its tools itself; clearance decides and records each call through
``session.authorize`` and ``session.execution``. So the registry holds a *declaration* of
each framework tool (its name, description, JSON Schema, facts), whose handler refuses to
run: a call of it through ``session.call_tool`` fails instead of running the tool twice.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from clearance.errors import AskError, ToolRegistrationError, UnknownToolError
from clearance.harness.approvals import ANSWERS, Answer, GrantScope, PermissionDecision
from clearance.harness.tools import CallContext, Tool, ToolRegistry

if TYPE_CHECKING:
    import os

    from clearance.harness.outcomes import CallOutcome
    from clearance.harness.session import Harness, Session

__all__ = [
    "AGENT_INPUT",
    "DeclaredTools",
    "HostAnswer",
    "ToolSpec",
    "answer_ask",
    "answer_scope",
    "ask_payload",
    "declare_tools",
    "framework_names",
    "model_value",
    "open_ask_id",
    "parse_answer",
    "qualified_name",
    "record_replayed",
    "undeclared",
]

_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
_ANSWER_KEYS = frozenset({"decision", "scope", "by", "message"})


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A framework tool as clearance declares it."""

    name: str
    """The name the framework (and the model) calls it by."""
    description: str
    input_schema: Mapping[str, Any]


T = TypeVar("T")


class DeclaredTools(Mapping[str, str], Generic[T]):
    """What an adapter's ``register_*`` function declared: the framework's tools as given
    (:attr:`tools`), and, as a mapping, each one's framework name -> clearance qualified
    name (``{"read_file": "files.read_file"}``).

    Each tool is written once: the declaration returns this, and the adapter's wrapper
    takes it in place of the tools (``guard.wrap(declared)``,
    ``ClearanceToolset(declared, session=...)``, ``ClearanceToolNode(declared,
    session=...)``), so the namespace and the names a declaration mapped are never
    repeated, and never disagree with it.
    """

    __slots__ = ("_names", "tools")

    def __init__(self, tools: T, names: Mapping[str, str]) -> None:
        self.tools = tools
        """The framework's tools, as the adapter's wrapper takes them."""
        self._names = dict(names)

    def __getitem__(self, name: str) -> str:
        return self._names[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"DeclaredTools({self._names!r})"


def framework_names(
    tools: Any, namespace: str | None, names: Mapping[str, str] | None, *, wrapper: str
) -> tuple[Any, str | None, dict[str, str]]:
    """``(tools, namespace, names)`` as a wrapper uses them: a :class:`DeclaredTools`
    gives its tools and names (a ``namespace=`` or ``names=`` beside it is refused: the
    declaration already says)."""
    if not isinstance(tools, DeclaredTools):
        return tools, namespace, dict(names or {})
    if namespace is not None or names:
        raise TypeError(
            f"{wrapper} got the tools a register function declared (DeclaredTools), which "
            "name their clearance tools already: leave namespace= and names= out"
        )
    return tools.tools, None, dict(tools)


def undeclared(
    session: Session, name: str, framework_name: str, *, namespace: str | None, declare: str
) -> UnknownToolError:
    """The error for the framework tool ``framework_name``, looked up as ``name``, that is
    not one of the session's tools, naming why: not declared at all, declared in another
    namespace (or ``namespace=`` left out), or declared but not the session agent's."""
    registry = session.harness.registry
    if registry.find(name) is not None:
        return UnknownToolError(
            name,
            f"{name} is declared but is not one of the tools of this session's agent "
            "(AgentDefinition(tools=...) leaves it out)",
        )
    elsewhere = sorted(
        t.qualified_name for t in registry if t.name == framework_name and t.source != "callback"
    )
    if elsewhere:
        spaces = " or ".join(repr(q.rpartition(".")[0]) for q in elsewhere)
        cause = "no namespace was given" if namespace is None else f"not under {namespace!r}"
        return UnknownToolError(
            name,
            f"{framework_name} is declared as {', '.join(elsewhere)}, but {cause}: pass "
            f"namespace={spaces}, or the DeclaredTools that {declare} returned",
        )
    return UnknownToolError(
        name,
        f"{name} is not declared: declare it with {declare} before the harness starts",
    )


def _refuse(framework: str) -> Any:
    def handler(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        # The framework runs this tool; clearance only decides and records its calls.
        raise RuntimeError(
            f"{ctx.qualified_name} is run by {framework}, not by clearance: call it through "
            f"the {framework} adapter"
        )

    return handler


def declare_tools(
    registry: ToolRegistry,
    namespace: str,
    specs: Iterable[ToolSpec],
    *,
    framework: str,
    names: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    read_only: Collection[str] = (),
    sensitive: Mapping[str, Sequence[str]] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """Register a declaration of each framework tool under ``namespace``.

    The per-tool options (``names``, ``facts``, ``read_only``, ``sensitive``,
    ``annotations``) are keyed by the framework's tool name. Returns the framework name ->
    qualified name of every declared tool.

    Raises:
        ToolRegistrationError: an option names a tool that is not among ``specs``, a name
            that is not ``[a-z0-9_-]`` has no entry in ``names``, or the registry refuses a
            declaration (bad schema, facts, duplicate name).
    """
    specs = list(specs)
    known = {spec.name for spec in specs}
    names = dict(names or {})
    facts = dict(facts or {})
    sensitive = dict(sensitive or {})
    annotations = dict(annotations or {})
    for option, keys in (
        ("names", names),
        ("facts", facts),
        ("read_only", read_only),
        ("sensitive", sensitive),
        ("annotations", annotations),
    ):
        if isinstance(keys, str):
            raise ToolRegistrationError(namespace, f"{option} must be a collection of tool names")
        unknown = sorted(set(keys) - known)
        if unknown:
            raise ToolRegistrationError(
                unknown[0], f"{option} names a tool that is not among the {framework} tools given"
            )
    tools: list[Tool] = []
    mapping: dict[str, str] = {}
    for spec in specs:
        name = names.get(spec.name, spec.name)
        if not _NAME.match(name):
            raise ToolRegistrationError(
                spec.name,
                "a clearance tool name is [a-z0-9_-] (at most 64 characters): map it with "
                f"names={{{spec.name!r}: 'a_name'}}",
            )
        tools.append(
            Tool(
                name,
                _refuse(framework),
                description=spec.description,
                input_schema=spec.input_schema,
                read_only=spec.name in read_only,
                sensitive=tuple(sensitive.get(spec.name, ())),
                annotations=dict(annotations.get(spec.name, {})),
                source=framework,
                root=root,
                facts=dict(facts.get(spec.name, {})),
            )
        )
        mapping[spec.name] = f"{namespace}.{name}"
    registry.register(namespace, tools)
    return mapping


def qualified_name(name: str, *, namespace: str | None, names: Mapping[str, str]) -> str:
    """The clearance name of the framework tool ``name``: its ``names`` entry, else
    ``namespace.name``, else ``name`` itself (an unknown name is denied by the pipeline)."""
    if name in names:
        return names[name]
    if namespace is not None:
        return f"{namespace}.{name}"
    return name


@dataclass(frozen=True, slots=True)
class HostAnswer:
    """An answer to an ask, as a host gave it through its framework."""

    decision: Answer
    scope: int | None = None
    """For ``allow_session``/``allow_always``: the index of one of the ask's
    ``suggestions`` (None: the exact call)."""
    by: str | None = None
    message: str | None = None


def parse_answer(value: Any, *, by: str | None = None) -> HostAnswer:
    """Read a host's answer: ``True`` (allow once), ``False`` (deny), one of
    ``allow_once``/``allow_session``/``allow_always``/``deny``, or a dict with
    ``decision`` and optionally ``scope`` (a suggestion's index), ``by`` and ``message``.

    Raises:
        AskError: the value is none of these (the message says what was wrong).
    """
    if value is True:
        return HostAnswer("allow_once", by=by)
    if value is False:
        return HostAnswer("deny", by=by)
    if isinstance(value, str):
        if value not in ANSWERS:
            raise AskError(f"an answer is one of {', '.join(ANSWERS)}, not {value!r}")
        return HostAnswer(value, by=by)  # type: ignore[arg-type]
    if not isinstance(value, Mapping):
        raise AskError(
            f"an answer is True, False, one of {', '.join(ANSWERS)} or a dict with "
            f"'decision', not {type(value).__name__}"
        )
    extra = sorted(str(k) for k in set(value) - _ANSWER_KEYS)
    if extra:
        raise AskError(
            f"an answer's keys are decision, scope, by and message; {extra[0]!r} is not one"
        )
    decision = value.get("decision")
    if not isinstance(decision, str) or decision not in ANSWERS:
        raise AskError(f"an answer's decision is one of {', '.join(ANSWERS)}, not {decision!r}")
    scope = value.get("scope")
    if scope is not None:
        if isinstance(scope, bool) or not isinstance(scope, int) or scope < 0:
            raise AskError(f"an answer's scope is the index of a suggestion, not {scope!r}")
        if decision not in ("allow_session", "allow_always"):
            raise AskError(f"a scope goes with allow_session or allow_always, not {decision}")
    who = value.get("by") if value.get("by") is not None else by
    if who is not None and not isinstance(who, str):
        raise AskError(f"an answer's 'by' is a name, not {type(who).__name__}")
    message = value.get("message")
    if message is not None and not isinstance(message, str):
        raise AskError(f"an answer's message is text, not {type(message).__name__}")
    return HostAnswer(decision, scope=scope, by=who, message=message)  # type: ignore[arg-type]


def answer_scope(harness: Harness, ask_id: str, answer: HostAnswer) -> GrantScope | None:
    """The grant scope ``answer`` picks among the ask's suggestions (None: the exact call).

    Raises:
        AskError: no such ask, or a scope index that is not one of its suggestions.
    """
    stored = harness.ask_store.get(ask_id)
    if stored is None:
        raise AskError(f"no ask {ask_id!r}")
    if answer.scope is None:
        return None
    if answer.scope >= len(stored.suggestions):
        raise AskError(
            f"ask {ask_id} offers {len(stored.suggestions)} scope(s); "
            f"there is no scope {answer.scope}"
        )
    return stored.suggestions[answer.scope]


async def answer_ask(harness: Harness, ask_id: str, answer: HostAnswer, *, via: str) -> None:
    """Give ``answer`` to the pending ask ``ask_id`` (``harness.answer_ask``).

    Raises:
        AskError: no such pending ask, or a scope index that is not one of its suggestions.
    """
    scope = answer_scope(harness, ask_id, answer)
    decision = PermissionDecision(answer.decision, scope=scope, message=answer.message)
    await harness.answer_ask(ask_id, decision, by=answer.by, via=via)


def open_ask_id(session: Session, name: str, call_id: str) -> str | None:
    """The id of the pending ask of this session principal's call ``call_id`` of tool
    ``name`` (asked in this session or an earlier one), if there is one."""
    tool = session.harness.registry.find(name)
    if tool is None:
        return None
    principal = str(session.principal)
    for ask in session.harness.pending_asks():
        if (
            ask.call_id == call_id
            and ask.tool == tool.qualified_name
            and ask.principal == principal
        ):
            return ask.ask_id
    return None


def ask_payload(harness: Harness, ask_id: str, *, call_id: str, tool: str) -> dict[str, Any]:
    """What a pending ask shows a person, as JSON, from the call's one view as the ask
    store keeps it: its reason, the (masked) arguments, which decide (``deciding``), their
    facts, the look-alike ``notes`` and the scopes a grant could take (``scope`` indexes
    these)."""
    stored = harness.ask_store.get(ask_id)
    payload: dict[str, Any] = {"ask_id": ask_id, "call_id": call_id, "tool": tool}
    if stored is not None:
        shown = stored.to_json()
        for key in ("tool", "arguments", "reason", "policies", "deciding", "facts", "notes"):
            payload[key] = shown[key]
        payload["suggestions"] = [
            {"index": i, **s.to_json(public=True)} for i, s in enumerate(stored.suggestions)
        ]
    payload["answers"] = list(ANSWERS)
    return payload


def model_value(outcome: CallOutcome) -> Any:
    """What the model sees of a recorded run: the guarded structured result when there is
    one, else the text (a failure, a block, a denial: the message)."""
    result = outcome.result
    if result is not None and outcome.status == "ok" and result.structured_content is not None:
        return result.structured_content
    return outcome.text


_SEEN_LIMIT = 10_000

AGENT_INPUT = "agent-input"
"""Where the user-role messages a framework replays are recorded (the ledger's place
``tool:agent-input``): not a qualified name, so no trust list's tool glob names it."""


def record_replayed(session: Session, seen: set[str], messages: Iterable[tuple[str, str]]) -> None:
    """Record the user-role messages a framework shows the tool layer as a tool's values,
    never as the user's (rule R14), each once.

    A framework gives the "user" role to text a model wrote: a sub-agent's input
    (``Agent.as_tool()``, a PydanticAI delegation), a ``HumanMessage`` a graph node made.
    The user's own words enter only from the host (``session.add_user_message``, an
    adapter's ``run``); a replayed message the host gave is skipped (it is the user's
    already, and recording it again as a tool's would only make the ledger count an
    untrusted result). Any other is recorded as a result of ``agent-input``: its values
    count as from a tool, as the values of any text a model wrote from what it read.

    Args:
        session: the session the calls are decided in.
        seen: the keys already recorded (kept by the adapter, per session).
        messages: ``(text, key)`` of each user-role message: its text, and what
            identifies it across attempts (its id, or its position and text).
    """
    for text, key in messages:
        if key in seen or not text:
            continue
        if len(seen) >= _SEEN_LIMIT:
            seen.clear()  # recording a message again adds nothing new to the ledger
        seen.add(key)
        if not session.is_host_message(text):
            session.add_tool_result(AGENT_INPUT, key, text)
