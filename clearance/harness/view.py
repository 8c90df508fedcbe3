"""One view of a call: what it is, computed once, and rendered by every surface.

DESIGN, "One view of a call": computed once per call in the pipeline and the only source
every surface renders from (the ask and its display, grant scopes, the inbox, the ask
store, the journal, telemetry, ``decide``, the CLI, the adapters). A surface never
re-derives any of it, because two derivations of one fact drift apart and the drift is a
bypass (a display that guessed ``to`` decides while the ask did not; a scrub that missed a
copy of a token in another argument).

A :class:`CallView` holds:

- who: the principal, the session, the turn and the call;
- the tool's names;
- the **canonical arguments** (R11), as the evaluator saw them and the handler will run;
- the **deciding fields** (:mod:`clearance.harness._deciding`: the declared facts, and for
  a tool without facts every argument);
- the **withheld values** (R8): the pointers a tool marks ``sensitive`` or a guardrail
  redacted, the values found there, and every copy of them in other arguments (what an
  argument guardrail's rewrite removed is not among them: it is not in the final
  arguments, and where a copy is, that copy is what runs and what the person must see;
  records and messages scrub it all the same);
- the provenance of each argument, as the evaluator read it.

What it renders (each computed on first use and kept):

- :attr:`CallView.shown_arguments` / :attr:`CallView.shown_facts`: the arguments and facts
  with withheld values replaced by ``[REDACTED]`` wherever they occur (:meth:`scrub_json`,
  every encoding :mod:`clearance.harness.scrub` recognizes);
- :attr:`CallView.unshowable`: deciding fields a person would see only as ``[REDACTED]``:
  a call with any is never put to a person (nobody approves what they cannot see);
- :attr:`CallView.notes`: per deciding field, a note for a look-alike value (mixed scripts,
  compatibility letters: :mod:`clearance._lookalike`) with its canonical form, and for a
  field naming something of the session what it names (a process id: its command);
- :meth:`CallView.suggestions` and :meth:`CallView.grant`: the grant scopes a person may
  choose, each constraining every deciding field.

The pipeline builds the view once the final arguments are known (after the argument
guardrails: a redaction or rewrite there is part of what the call is) and before the
evaluator; calls refused earlier are recorded with the same scrub of what was known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from clearance import _pointer
from clearance._lookalike import lookalike
from clearance.harness._redaction import hidden_arguments, visible, visible_facts
from clearance.harness.approvals import (
    PermissionAsk,
    PermissionDecision,
    grant_from_answer,
    suggest_scopes,
)
from clearance.harness.grants import Grant, GrantScope
from clearance.harness.scrub import scrub_json, scrub_text

if TYPE_CHECKING:
    from clearance.harness._deciding import Deciding

__all__ = ["CallView"]

_UNSET: Any = object()
_NONE: frozenset[str] = frozenset()


class CallView:
    """One call as every surface shows and decides it (see the module docstring).

    Built by the pipeline; surfaces read it and never change it.
    """

    __slots__ = (
        "_notes",
        "_shown",
        "_shown_facts",
        "arguments",
        "call_id",
        "deciding",
        "facts",
        "model_alias",
        "principal",
        "provenance",
        "qualified_name",
        "scope_fields",
        "secrets",
        "session_id",
        "tool",
        "turn_id",
        "withheld",
    )

    def __init__(
        self,
        *,
        principal: str,
        session_id: str,
        turn_id: str | None,
        call_id: str,
        tool: str,
        qualified_name: str,
        model_alias: str,
        arguments: dict[str, Any],
        facts: Mapping[str, Any] | None,
        scope_fields: Deciding,
        withheld: Iterable[str] = (),
        secrets: Iterable[str] = (),
    ) -> None:
        self.principal = principal
        """The principal entity as text (``User::"alice"``)."""
        self.session_id = session_id
        self.turn_id = turn_id
        self.call_id = call_id
        self.tool = tool
        """The tool's model alias (what the model called)."""
        self.qualified_name = qualified_name
        self.model_alias = model_alias
        self.arguments = arguments
        """The canonical final arguments (withheld values in them: never shown)."""
        self.facts: Mapping[str, Any] = facts or {}
        """The canonical facts of the declared arguments (R11)."""
        self.scope_fields = scope_fields
        """The tool's deciding arguments, as a grant scope must constrain them."""
        # (inline Deciding.of_call: validated arguments have string keys)
        self.deciding: tuple[str, ...] = (
            scope_fields.fields if scope_fields.declared else tuple(arguments)
        )
        """The names of the arguments that decide what this call does."""
        self.withheld: frozenset[str] = frozenset(withheld) if withheld else _NONE
        """JSON pointers of the withheld arguments."""
        self.secrets: frozenset[str] = frozenset(secrets) if secrets else _NONE
        """The withheld values themselves (as text), scrubbed wherever they occur."""
        self.provenance: Mapping[str, Any] | None = None
        """Where each argument came from, as the evaluator read it (set once evaluated)."""
        self._shown: Any = _UNSET
        self._shown_facts: Any = _UNSET
        self._notes: Any = _UNSET

    # -- what surfaces show -------------------------------------------------------------

    @property
    def shown_arguments(self) -> dict[str, Any]:
        """The arguments as every surface shows them: each withheld pointer's value, and
        every copy of a withheld value elsewhere, replaced by ``[REDACTED]``."""
        if self._shown is _UNSET:
            shown = visible(self.arguments, set(self.withheld))
            if self.secrets:
                shown = scrub_json(shown, self.secrets)
            self._shown = shown
        result: dict[str, Any] = self._shown
        return result

    @property
    def shown_facts(self) -> dict[str, Any]:
        """The facts surfaces may show: none of a withheld argument, and no withheld value
        anywhere in the others."""
        if self._shown_facts is _UNSET:
            shown = visible_facts(self.facts, set(self.withheld))
            if self.secrets:
                shown = scrub_json(shown, self.secrets)
            self._shown_facts = shown
        result: dict[str, Any] = self._shown_facts
        return result

    @property
    def unshowable(self) -> tuple[str, ...]:
        """The deciding fields a person would be shown only redacted (in argument order)."""
        if not self.withheld and not self.secrets:
            return ()
        hidden = hidden_arguments(self.withheld)
        shown = self.shown_arguments
        return tuple(
            name
            for name in self.deciding
            if name in self.arguments
            and ("*" in hidden or name in hidden or shown.get(name) != self.arguments[name])
        )

    @property
    def notes(self) -> dict[str, str]:
        """Per deciding field, a note for a person: what a field naming something of the
        session names (a process id: the command it runs), and a look-alike value (mixed
        scripts, compatibility letters) with its canonical form. Empty for most calls."""
        if self._notes is _UNSET:
            notes: dict[str, str] = {}
            shown = self.shown_arguments
            facts = self.shown_facts
            pinned = dict(self.scope_fields.pinned)
            for name in self.deciding:
                if name not in shown:
                    continue
                found = [
                    f.note
                    for _, text in _pointer.iter_strings(shown[name])
                    if (f := lookalike(text))
                ]
                kind = pinned.get(name)
                if kind is not None and name in facts:
                    found.insert(0, kind.describe(facts[name]))
                if found:
                    notes[name] = "; ".join(dict.fromkeys(found))
            self._notes = notes
        result: dict[str, str] = self._notes
        return result

    def scrub(self, text: str) -> str:
        """``text`` without any withheld value."""
        return scrub_text(text, self.secrets) if self.secrets else text

    def scrub_json(self, value: Any) -> Any:
        """A copy of the JSON ``value`` without any withheld value."""
        return scrub_json(value, self.secrets) if self.secrets else value

    # -- grants ---------------------------------------------------------------------------

    def suggestions(self) -> tuple[GrantScope, ...]:
        """The grant scopes a person may choose for this call: the exact call; one prefix
        scope when every deciding field is a path field it constrains; any arguments
        (none but the exact call when a deciding field names something of the session)."""
        fields = self.scope_fields
        return suggest_scopes(
            self.arguments,
            withheld=self.withheld,
            path_fields=fields.paths,
            other_facts=fields.others,
            pinned=tuple(name for name, _ in fields.pinned),
        )

    def grant(self, ask: PermissionAsk, decision: PermissionDecision) -> Grant | None:
        """The grant an answer to this call's ask creates (see
        :func:`~clearance.harness.approvals.grant_from_answer`)."""
        fields = self.scope_fields
        return grant_from_answer(
            ask, decision, self.arguments, path_fields=fields.paths, other_facts=fields.others
        )
