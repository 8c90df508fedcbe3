import atexit
import os
import shutil
import signal
import tempfile

import pytest
from hypothesis import HealthCheck, settings

# A quick profile for local runs; `ci` (selected by .ci/run) runs more examples and is
# derandomized so that a CI failure reproduces.
settings.register_profile(
    "default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The CLI keeps journals and grants in a per-user state directory by default (outside the
# agent's workspace); tests, and the CLI processes they start, use a private one.
_STATE = tempfile.mkdtemp(prefix="clearance-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE
atexit.register(shutil.rmtree, _STATE, True)
# Approver keys (rule R13) live in the user's config directory; tests, and the CLI
# processes they start, use a private one.
_CONFIG = tempfile.mkdtemp(prefix="clearance-test-config-")
os.environ["XDG_CONFIG_HOME"] = _CONFIG
os.environ.pop("CLEARANCE_APPROVERS_DIR", None)
atexit.register(shutil.rmtree, _CONFIG, True)

# Several tests stop a CLI with SIGINT, as Ctrl-C would. A shell that starts a job in the
# background (`.ci/run &`) starts it with SIGINT ignored, and every child inherits that:
# those CLIs would never stop. Python's own handler here is reset to the default in each
# program the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# What the CLI prints is fitted to the terminal (COLUMNS, LINES); the tests check the output
# of a fixed width, whatever the shell that started pytest had set.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# The slow stage. The README's command (`python -m pytest -q -n auto`) leaves these out
# (`-m "not slow"` in pyproject.toml's addopts) so that a newcomer's run takes minutes;
# .ci/run runs them on every submission in a stage of their own (`-m slow`), so none is
# ever dropped. Each takes 5 s or more of one core (`--durations=80`, 2026-12-07), most of
# it real waiting: servers, PostgreSQL hosts, idle timeouts, mutmut runs.
SLOW = (
    "tests/harness/test_postgres_hosts.py::",
    "tests/harness/test_orphan_asks.py::test_postgres_",
    "tests/benchmarks/test_mutation_script.py::",
    "tests/mcp/test_gateway_sessions.py::test_abandoned_sessions_end_after_the_idle_timeout",
    "tests/properties/test_r5_once_means_once.py::test_r5_grants_cover_only_their_scope[postgres]",
    "tests/cli/test_mcp_tools_cli.py::test_an_exported_snapshot_needs_no_server",
    "tests/cli/test_mcp_tools_cli.py::test_policy_commands_learn_the_tools_of_the_configured_servers",
    "tests/properties/test_r8_no_leaks_journal.py::test_r8_no_leaks_in_the_stored_journal[postgres]",
    "tests/cli/test_readme_store_commands.py::test_the_commands_run_on_the_store_two_hosts_share",
    "tests/properties/test_r1_fail_closed_authzen.py::",
    "tests/toolsets/test_shell_toolset.py::test_pytest_loads_nothing_from_the_parent_directory",
    "tests/toolsets/test_shell_toolset.py::test_pytest_uses_the_workspaces_own_configuration",
    "tests/cli/test_cedar_workflow_doc.py::",
    "tests/properties/test_r7_one_end_per_call.py::test_r7_one_end_per_call[postgres",
    "tests/properties/test_r7_one_end_per_call.py::test_r7_close_while_calls_are_being_decided[postgres",
    "tests/properties/test_r3_provenance.py::test_provenance_never_turns_a_deny_into_an_allow",
    "tests/properties/test_r12_revocation_is_immediate_postgres.py::",
    "tests/tuning/test_replay.py::test_agentdojo_packs_score_as_published",
    "tests/toolsets/test_files_search.py::test_a_catastrophic_search_does_not_stall_another_session",
    "tests/test_readme.py::test_the_top_commands_run_in_a_fresh_checkout",
    "tests/inbox/test_inbox_browser.py::test_a_store_outage_is_one_banner_and_every_button_is_disabled",
    "tests/test_readme.py::test_each_install_line_resolves",
    "tests/test_readme.py::test_the_browser_blocks_install_line_resolves",
    "tests/test_readme.py::test_an_answer_without_a_key_is_no_answer",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # What this run needed and did not have, said once at the end (the skips are listed
    # above by -rs), and how to run what the default selection leaves out.
    if terminalreporter.config.getoption("markexpr") == "not slow":
        terminalreporter.write_line(
            f"The {len(SLOW)} groups of slow tests in tests/conftest.py SLOW were left out "
            "(servers, PostgreSQL hosts, timeouts): CI runs them; "
            "`python -m pytest -q -n auto -m slow` runs them here."
        )
    if terminalreporter.stats.get("skipped"):
        terminalreporter.write_line(
            "Skipped tests need what their reason names: PostgreSQL at "
            "CLEARANCE_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/test), "
            "Debian's chromium at /usr/bin/chromium, git, or the dev or bench extra; .ci/run has"
            " all but bench."
        )
