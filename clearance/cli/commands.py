"""Imports every verb module so that each registers itself on the root group."""

from clearance.cli import (  # noqa: F401
    gateway_cmd,
    grants_cmd,
    journal_cmd,
    policy_cmd,
    replay_cmd,
    run_cmd,
)
