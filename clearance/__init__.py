"""clearance: policy and guardrail authorization for AI-agent tool calls.

Every tool call an agent makes passes one pipeline before anything runs: JSON-Schema
validation, argument guardrails, an authority evaluator, a permission ask when needed,
then dispatch under limits, then result guardrails; every step is journaled.
"""

from typing import TYPE_CHECKING

from clearance import _lazy
from clearance.errors import (
    AskError,
    CallCancelledError,
    ClearanceError,
    ClosedError,
    ConfigError,
    ConfinementError,
    FactError,
    JournalError,
    NotAuthorizedError,
    PolicyError,
    RuleError,
    ScriptError,
    StaleAuthorizationError,
    StoreError,
    ToolRegistrationError,
    UnknownToolError,
)

if TYPE_CHECKING:
    from clearance.harness.approvals import (
        Answer,
        AskCallback,
        Grant,
        GrantScope,
        GrantStore,
        MemoryGrantStore,
        PermissionAsk,
        PermissionDecision,
        SqliteGrantStore,
    )
    from clearance.harness.ask_store import AskStore, MemoryAskStore
    from clearance.harness.ask_store_sqlite import SqliteAskStore
    from clearance.harness.journal import (
        EventItem,
        Journal,
        JournalEvent,
        JsonlJournal,
        MemoryJournal,
        SqliteJournal,
    )
    from clearance.harness.outcomes import Authorization, CallOutcome, Decision
    from clearance.harness.pipeline import Execution
    from clearance.harness.providers import (
        Provider,
        ProviderTurn,
        Run,
        RunResult,
        ScriptedProvider,
        ToolCallRequest,
    )
    from clearance.harness.session import AgentDefinition, Harness, Session
    from clearance.harness.telemetry import Telemetry
    from clearance.harness.tools import (
        CallContext,
        CallToolResult,
        Tool,
        ToolImageResult,
        ToolRegistry,
    )
    from clearance.policy.base import Principal

from clearance._version import __version__

__all__ = [
    "AgentDefinition",
    "Answer",
    "AskCallback",
    "AskError",
    "AskStore",
    "Authorization",
    "CallContext",
    "CallOutcome",
    "CallCancelledError",
    "CallToolResult",
    "ClearanceError",
    "ClosedError",
    "ConfigError",
    "ConfinementError",
    "Decision",
    "FactError",
    "EventItem",
    "Execution",
    "Grant",
    "GrantScope",
    "GrantStore",
    "Harness",
    "Journal",
    "JournalError",
    "NotAuthorizedError",
    "JournalEvent",
    "JsonlJournal",
    "MemoryAskStore",
    "MemoryGrantStore",
    "MemoryJournal",
    "PermissionAsk",
    "PermissionDecision",
    "PolicyError",
    "Principal",
    "Provider",
    "ProviderTurn",
    "Run",
    "RunResult",
    "RuleError",
    "ScriptError",
    "StaleAuthorizationError",
    "StoreError",
    "ScriptedProvider",
    "Session",
    "SqliteAskStore",
    "SqliteGrantStore",
    "SqliteJournal",
    "Telemetry",
    "Tool",
    "ToolCallRequest",
    "ToolImageResult",
    "ToolRegistrationError",
    "ToolRegistry",
    "UnknownToolError",
    "__version__",
]

# Imported when first read: a command that needs none of these (``clearance asks list``)
# does not load the harness, pydantic and Cedar at start-up (issue 34).
__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__,
    {
        "clearance.harness.approvals": (
            "Answer",
            "AskCallback",
            "Grant",
            "GrantScope",
            "GrantStore",
            "MemoryGrantStore",
            "PermissionAsk",
            "PermissionDecision",
            "SqliteGrantStore",
        ),
        "clearance.harness.ask_store": ("AskStore", "MemoryAskStore"),
        "clearance.harness.ask_store_sqlite": ("SqliteAskStore",),
        "clearance.harness.journal": (
            "EventItem",
            "Journal",
            "JournalEvent",
            "JsonlJournal",
            "MemoryJournal",
            "SqliteJournal",
        ),
        "clearance.harness.outcomes": ("Authorization", "CallOutcome", "Decision"),
        "clearance.harness.pipeline": ("Execution",),
        "clearance.harness.providers": (
            "Provider",
            "ProviderTurn",
            "Run",
            "RunResult",
            "ScriptedProvider",
            "ToolCallRequest",
        ),
        "clearance.harness.session": ("AgentDefinition", "Harness", "Session"),
        "clearance.harness.telemetry": ("Telemetry",),
        "clearance.harness.tools": (
            "CallContext",
            "CallToolResult",
            "Tool",
            "ToolImageResult",
            "ToolRegistry",
        ),
        "clearance.policy.base": ("Principal",),
    },
)
