"""The local evaluator's shortcuts give the answers of the long ways they skip (issue 18).

A deny rule also matches the path a value names once normalized (``./a//.env`` as
``a/.env``). Normalizing every value costs more than the rest of a decision, so it is
skipped when a string test shows it cannot change the value: that test must never be
wrong the other way (a skipped normalization that would have matched is a denied call
let through, R3).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from clearance.policy import AuthzRequest, LocalEvaluator, Principal, SessionInfo, ToolInfo
from clearance.policy._rules import _may_normalize, _normalized
from clearance.policy.globs import Glob

paths = st.lists(st.sampled_from(["a", ".", "/", "\\", ".env", ".."]), max_size=8).map(
    "".join
) | st.text(max_size=12)


@given(text=paths)
@example(text="a//b")  # each clause of the shortcut
@example(text="a/./b")
@example(text="a/b/")
@example(text="\\a")
@example(text=".a")
def test_a_value_normalizing_could_change_is_never_skipped(text: str) -> None:
    # Deny rules normalize a value that looks like a path (a separator, a leading dot):
    # the shortcut may skip only those that normalizing leaves as they are.
    looks_like_a_path = "/" in text or "\\" in text or text.startswith(".")
    if looks_like_a_path and not _may_normalize(text):
        assert _normalized(text) == text


@given(text=paths, glob=st.sampled_from(["**/.env", "a/a", "a/**", ".env", "a", "**/a/.."]))
@example(text="a/a/", glob="a/a")  # each clause of the shortcut, and one past it
@example(text="a//a", glob="a/a")
@example(text="a/./a", glob="a/a")
@example(text="a\\a", glob="a/a")
@example(text="./a", glob="a")
@example(text="a/../.env", glob=".env")
def test_deny_rules_match_as_if_every_value_were_normalized(text: str, glob: str) -> None:
    evaluator = LocalEvaluator(allow=["files.read(path=**)"], deny=[f"files.read(path={glob})"])
    request = AuthzRequest(
        Principal("User", "a"),
        ToolInfo("files.read", "files", "read", True),
        {"path": text},
        SessionInfo("s"),
    )
    # The rule as written before the shortcut: the value, or (when it looks like a
    # path) the value normalized.
    pattern = Glob(glob)
    looks_like_a_path = "/" in text or "\\" in text or text.startswith(".")
    denied = bool(pattern.fullmatch(text)) or (
        looks_like_a_path and bool(pattern.fullmatch(_normalized(text)))
    )
    verdict = evaluator.evaluate(request)
    assert (verdict.effect == "deny" and bool(verdict.reasons)) == denied


def test_a_plain_path_is_not_normalized() -> None:
    # The shortcut's point: the common values are matched once, not normalized first.
    for text in ("a", "src/app.py", "a.b", "src/v1..2/x", "a/.."[:-3]):
        assert not _may_normalize(text), text
