"""Cedar policies for tool calls: the evaluator, the schema generator and the engine under them.

``cedarpy`` is imported only inside this package; nothing it defines appears in the public API.
"""

from clearance.policy.cedar.checking import PolicyCheck, check_directory
from clearance.policy.cedar.engine import (
    CedarEngine,
    CedarError,
    CedarResponse,
    EngineStatistics,
    EntityRef,
    PolicyInfo,
    PolicyProblem,
    PolicySources,
    ScopeConstraint,
    format_policies,
)
from clearance.policy.cedar.evaluator import CedarEvaluator, PolicyReload
from clearance.policy.cedar.schema import generate_schema, schema_to_text, untyped_arguments

__all__ = [
    "CedarEngine",
    "CedarError",
    "CedarEvaluator",
    "CedarResponse",
    "EngineStatistics",
    "EntityRef",
    "PolicyCheck",
    "PolicyInfo",
    "PolicyProblem",
    "PolicyReload",
    "PolicySources",
    "ScopeConstraint",
    "check_directory",
    "format_policies",
    "generate_schema",
    "schema_to_text",
    "untyped_arguments",
]
