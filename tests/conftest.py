import atexit
import os
import shutil
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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
