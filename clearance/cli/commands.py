"""Imports every verb module so that each registers itself on the root group."""

from clearance.cli import (  # noqa: F401
    approvers_cmd,
    asks_cmd,
    demo_cmd,
    gateway_cmd,
    grants_cmd,
    inbox_cmd,
    journal_cmd,
    pdp_cmd,
    policy_cmd,
    policy_explain_cmd,
    policy_format_cmd,
    policy_schema_cmd,
    policy_test_cmd,
    policy_validate_cmd,
    replay_cmd,
    run_cmd,
    store_cmd,
    suggest_cmd,
    tools_cmd,
)

__all__: list[str] = []
