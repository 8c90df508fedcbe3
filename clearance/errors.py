"""The exceptions clearance raises.

Every exception derives from one root, so ``except ClearanceError`` catches them all::

    ClearanceError
    ├── ToolRegistrationError      a tool could not be registered (.tool, .reason)
    ├── ConfigError                a configuration value or file is wrong (.path, .line)
    │   ├── RuleError              a LocalEvaluator rule is malformed or can never match (.rule)
    │   ├── PolicyError            a Cedar policy does not parse or validate (.policy_id, .line)
    │   └── ConfinementError       a bundled tool cannot be confined by the kernel (rule R15)
    │                              and the configuration did not say confinement = "none"
    │                              (.toolset, .abi)
    ├── ScriptError                a ScriptedProvider script is malformed (.turn, .call_id)
    ├── CorpusError                a replay corpus line is not a call (.path, .line);
    │                              defined in clearance.tuning
    ├── UnknownToolError           a tool name is not registered or not selected (.tool)
    ├── PathScopeError             a path leaves its PathScope root (.path, .reason); also a
    │                              PermissionError; defined in clearance.guardrails
    ├── FactError                  an argument cannot be canonicalized (.reason); also a
    │                              ValueError; the call carrying it is refused (rule R11)
    ├── ClosedError                the harness or session is closed
    ├── CallCancelledError         raised by ctx.raise_if_cancelled() in a sync handler
    │                              whose call was cancelled or timed out (.call_id)
    ├── AskError                   a permission ask was answered wrongly (e.g. twice)
    ├── NotAuthorizedError         a host reports a result for a call that was not
    │   │                          authorized, or was already recorded (.call_id)
    │   └── StaleAuthorizationError  an authorization no longer holds when the host runs
    │                              the call: expired, or its grant revoked (.reason, rule R12)
    ├── JournalError               the journal cannot record or read
    ├── StoreError                 a shared store (PostgreSQL) is unreachable or refused a
    │                              read or write (.store); calls that need it are denied
    └── MissingExtraError          a feature needs an optional extra that is not installed
                                   (.extra); also an ImportError

Decisions are never exceptions: evaluators return a ``Verdict`` and guardrails a
``GuardrailOutcome``. A tool call that is denied, blocked or fails ends with a result the
model sees, not with an exception.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "AskError",
    "CallCancelledError",
    "ClearanceError",
    "ClosedError",
    "ConfigError",
    "ConfinementError",
    "FactError",
    "JournalError",
    "MissingExtraError",
    "NotAuthorizedError",
    "PolicyError",
    "RuleError",
    "ScriptError",
    "StaleAuthorizationError",
    "StoreError",
    "ToolRegistrationError",
    "UnknownToolError",
]


class ClearanceError(Exception):
    """Root of every exception raised by clearance."""


class ToolRegistrationError(ClearanceError):
    """A tool could not be registered.

    Attributes:
        tool: the qualified name (or the name as given) of the offending tool.
        reason: what was wrong, in one sentence.
    """

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(f"cannot register tool {tool!r}: {reason}")
        self.tool = tool
        self.reason = reason


class ConfigError(ClearanceError):
    """A configuration value or file is wrong.

    Attributes:
        path: the file the error is in, when it came from a file.
        line: the 1-based line in that file, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = f"{path}:{line}: " if path and line else f"{path}: " if path else ""
        super().__init__(f"{where}{message}")
        self.message = message
        self.path = path
        self.line = line


class RuleError(ConfigError):
    """A ``LocalEvaluator`` rule is malformed or can never match.

    Attributes:
        rule: the rule text as written.
    """

    def __init__(
        self, rule: str, message: str, *, path: str | None = None, line: int | None = None
    ) -> None:
        super().__init__(f"rule {rule!r}: {message}", path=path, line=line)
        self.rule = rule


class ConfinementError(ConfigError):
    """A bundled toolset that runs programs cannot start confined by the kernel (R15):
    Landlock is not available (not Linux, an old kernel, disabled at boot), and the
    configuration did not say ``confinement = "none"``.

    Attributes:
        toolset: the toolset that refused to start (``"shell"``).
        abi: the Landlock ABI the kernel offers (0: none).
    """

    def __init__(self, toolset: str, abi: int, message: str) -> None:
        super().__init__(message)
        self.toolset = toolset
        self.abi = abi


class PolicyError(ConfigError):
    """A Cedar policy does not parse, or does not validate against the generated schema.

    ``str()`` lists every problem, one ``path:line:column: policy <id>: message`` each,
    with the code frame under it when there is one.

    Attributes:
        policy_id: the ``@id`` (or Cedar's generated id) of the policy, when known.
        column: the 1-based column of the first problem in its line, when known.
        problems: every problem found, each a dict with ``path``, ``line``, ``column``,
            ``policy_id``, ``message`` and ``frame`` (the source line with a caret under
            the problem, or None).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        policy_id: str | None = None,
        problems: list[dict[str, object]] | None = None,
    ) -> None:
        super().__init__(message, path=path, line=line)
        self.policy_id = policy_id
        self.column = column
        self.problems = problems or []

    def __str__(self) -> str:
        if not self.problems:
            return super().__str__()
        return "\n".join(self.format_problem(p) for p in self.problems)

    @staticmethod
    def format_problem(problem: Mapping[str, object], *, frame: bool = True) -> str:
        """One problem as ``path:line:column: policy <id>: message``, and its code frame
        (indented) below it unless ``frame`` is False."""
        where = str(problem.get("path") or "<policies>")
        for key in ("line", "column"):
            value = problem.get(key)
            if not isinstance(value, int):
                break
            where += f":{value}"
        pid = problem.get("policy_id")
        text = f"{where}: " + (f"policy {pid}: " if pid else "") + str(problem.get("message"))
        shown = problem.get("frame")
        if frame and isinstance(shown, str) and shown:
            text += "\n" + "\n".join(f"  {row}" for row in shown.split("\n"))
        return text


class ScriptError(ClearanceError):
    """A scripted-provider script is malformed or names something that does not exist.

    Attributes:
        turn: the 0-based turn index, when known.
        call_id: the offending call's id, when known.
    """

    def __init__(self, message: str, *, turn: int | None = None, call_id: str | None = None):
        where = ""
        if turn is not None:
            where += f"turn {turn}"
        if call_id is not None:
            where += f"{', ' if where else ''}call {call_id!r}"
        super().__init__(f"{where}: {message}" if where else message)
        self.turn = turn
        self.call_id = call_id


class UnknownToolError(ClearanceError):
    """A tool name is not registered, or not selected for the session's agent.

    Attributes:
        tool: the name as given.
    """

    def __init__(self, tool: str, message: str | None = None) -> None:
        super().__init__(message or f"unknown tool {tool!r}")
        self.tool = tool


class FactError(ClearanceError, ValueError):
    """A value could not be canonicalized (see :mod:`clearance.facts`); the call that carries
    it is refused, never run with the raw value.

    Attributes:
        reason: why, in one phrase the model and the person can act on.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.reason,)


class ClosedError(ClearanceError):
    """The harness or session is closed (or not started) and takes no more calls."""


class CallCancelledError(ClearanceError):
    """Raised by ``CallContext.raise_if_cancelled`` in a sync handler whose call was
    cancelled or timed out: the handler stops, and the call ends ``cancelled`` (or
    ``timeout``) whatever it returns or raises. Not :class:`asyncio.CancelledError`.

    Attributes:
        call_id: the cancelled call's id.
    """

    def __init__(self, call_id: str) -> None:
        super().__init__(f"call {call_id!r} was cancelled")
        self.call_id = call_id

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.call_id,)


class AskError(ClearanceError):
    """A permission ask was answered in a way that is not allowed (e.g. answered twice)."""


class NotAuthorizedError(ClearanceError):
    """A host reported the run of a call that ``session.authorize`` did not allow (or whose
    result was already recorded): nothing is recorded for it.

    Attributes:
        call_id: the call id as given.
    """

    def __init__(self, call_id: str) -> None:
        super().__init__(
            f"call {call_id!r} was not authorized in this session, or its result was already "
            "recorded"
        )
        self.call_id = call_id


class StaleAuthorizationError(NotAuthorizedError):
    """An allowed authorization no longer holds when the host comes to run the call (rule
    R12): it was not used within the harness's ``authorization_ttl`` (``reason``
    ``"expired"``), or the grant that allowed it no longer covers it (``"revoked"``). The
    call did not run, the authorization is withdrawn (the journal's
    ``authorization_withdrawn``) and its call id is free: authorize the call again.

    Attributes:
        call_id: the call.
        reason: ``"expired"`` or ``"revoked"``.
        message: what the model may be shown.
    """

    def __init__(self, call_id: str, reason: str, message: str) -> None:
        ClearanceError.__init__(self, message)
        self.call_id = call_id
        self.reason = reason
        self.message = message


class JournalError(ClearanceError):
    """The journal could not record or read an event."""


class StoreError(ClearanceError):
    """A shared store (the PostgreSQL grant or ask store) is unreachable, or refused a read
    or a write. A call that needs the store is denied (rule R1); the store recovers by
    itself when the database returns.

    Attributes:
        store: the store as the message names it (its URL without a password, and schema).
    """

    def __init__(self, message: str, *, store: str = "") -> None:
        super().__init__(message)
        self.store = store

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (str(self),), {"store": self.store}


class MissingExtraError(ClearanceError, ImportError):
    """A feature needs an optional extra of the package that is not installed.

    The message is one line ending in the command that installs it.

    Attributes:
        extra: the extra's name (``"mcp"``: ``pip install 'clearance[mcp]'``).
        feature: what needs it, as the message names it.
    """

    def __init__(self, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the optional '{extra}' dependencies, which are not installed: "
            f"pip install 'clearance[{extra}]'",
            name=extra,
        )
        self.extra = extra
        self.feature = feature

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.extra, self.feature)
