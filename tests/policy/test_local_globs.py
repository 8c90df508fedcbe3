"""LocalEvaluator globs match in linear time (issue 12 item 10) and mean what they meant.

``*BEGIN*PRIVATE*KEY*`` compiled to a backtracking regex and stalled the harness for 5 s on
a 19 KB argument. The matcher now runs such globs on RE2 (and keeps Python's ``re`` only
for shapes whose backtracking is linear); these tests bound its time on adversarial
inputs and check it against the old regex translation, kept here as the reference.
"""

import posixpath
import re
import time
from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import ALICE

from clearance.errors import RuleError
from clearance.policy import AuthzRequest, LocalEvaluator, SessionInfo, ToolInfo
from clearance.policy.globs import Glob, _linear_in_re, _tokens


def request(tool: str, **arguments: object) -> AuthzRequest:
    ns, _, name = tool.partition(".")
    return AuthzRequest(ALICE, ToolInfo(tool, ns, name, False), arguments, SessionInfo("s"))


def effect(ev: LocalEvaluator, tool: str, **arguments: object) -> str:
    return ev.evaluate(request(tool, **arguments)).effect


# --- linear time ------------------------------------------------------------------------

KB100 = 100_000
ADVERSARIAL = [
    # (glob, value): each takes the old backtracking regex minutes or more.
    ("*BEGIN*PRIVATE*KEY*", "KEY" + "BEGIN PRIVATE " * (KB100 // 14) + "/"),
    ("*BEGIN*PRIVATE*KEY*", "BEGIN PRIVATE " * (KB100 // 14)),
    ("*a*a*a*a*a*a*b", "a" * KB100 + "/b"),
    ("**a**a**a**a**[!a]", "a" * KB100),
    ("*?*?*?*?*?*?*?*?/x", "a" * KB100 + "/y"),
    ("src/**/*a*a*a*.py", "src/" + "a" * KB100 + ".pyc"),
    ("**a/**a/**a/**b", "a/" * (KB100 // 2)),
    # two-run shapes kept on Python's re: linear by the argument in clearance.policy.globs
    ("**/*.key", "a/" * (KB100 // 2) + "x"),
    ("**/*.key", "/" * KB100),
    ("src/**/*.py", "src/" + "a/" * (KB100 // 2) + "a"),
    ("*/**x", "a" * KB100),
    ("**/x*y", "x" * KB100),
    ("**/a/x*y", "a/x" * (KB100 // 3)),
    ("*a/**a", "a" * KB100),
    # two runs that re would backtrack over (O(n^2)): on RE2
    ("*a*", "a" * KB100 + "/b"),
    ("x/*a*", "x/" + "a" * KB100 + "/b"),
    ("**a/**b", "a/" * (KB100 // 2)),
    ("**/a**b", "a/" * (KB100 // 2)),
]


@pytest.mark.parametrize(("glob", "value"), ADVERSARIAL, ids=[g for g, _ in ADVERSARIAL])
@pytest.mark.parametrize("kind", ["allow", "deny"])
def test_adversarial_globs_on_100_kb_values_finish_quickly(
    glob: str, value: str, kind: str
) -> None:
    ev = (
        LocalEvaluator(allow=[f"x.y(v={glob})"])
        if kind == "allow"
        else LocalEvaluator(allow=["x.y"], deny=[f"x.y(v={glob})"])
    )
    started = time.perf_counter()
    verdict = ev.evaluate(request("x.y", v=value))
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, f"{glob!r} took {elapsed:.2f} s"
    # and still the right answer: none of these values matches its glob
    assert verdict.effect == ("deny" if kind == "allow" else "allow"), verdict


def test_the_reported_stall_is_gone() -> None:
    """Issue 12 item 10: a deny rule for private keys against a 19 KB argument."""
    ev = LocalEvaluator(allow=["files.write_file"], deny=["files.*(content=*BEGIN*PRIVATE*KEY*)"])
    content = "BEGIN PRIVATE " * 1400 + "KEY/x"  # "*" does not cross "/": no match
    started = time.perf_counter()
    assert effect(ev, "files.write_file", content=content) == "allow"
    assert effect(ev, "files.write_file", content="-----BEGIN PRIVATE KEY-----") == "deny"
    assert time.perf_counter() - started < 0.5


def test_many_rules_with_many_wildcards_stay_linear() -> None:
    ev = LocalEvaluator(
        allow=["x.y"], deny=[f"x.y(v=*{w}*{w}*{w}*/)" for w in ("a", "b", "c", "aa", "ab")]
    )
    started = time.perf_counter()
    assert effect(ev, "x.y", v="ab" * (KB100 // 2)) == "allow"
    assert time.perf_counter() - started < 0.5


# --- same meaning as the old regex translation ------------------------------------------


def reference_regex(glob: str) -> re.Pattern[str]:
    """The old translation (clearance 0.1 ``_glob_to_regex``), for simple classes."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if glob.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if glob.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.index("]", i + 1)
            body = glob[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def reference_match(glob: str, value: str, *, deny: bool) -> bool:
    """The old ``Rule._match`` for a string value."""
    pattern = reference_regex(glob)
    if pattern.fullmatch(value) is None:
        if deny and ("/" in value or "\\" in value or value.startswith(".")):
            folded = posixpath.normpath(value.replace("\\", "/"))
            folded = folded[2:] if folded.startswith("./") else folded
            return pattern.fullmatch(folded) is not None
        return False
    if not deny and ".." in value and ".." not in re.split(r"[/\\]", glob):
        return ".." not in re.split(r"[/\\]", value)
    return True


GLOB_TOKENS = ["a", "b", ".", "..", "/", "\\", "é", "-", "*", "**", "**/", "?"]
GLOB_TOKENS += ["[ab]", "[!a]", "[a-c]", "[./]", "[!/]", "[-a]", "[\\]"]
CHARS = "ab./\\é-\n\U0001f600"
text = st.text(alphabet=CHARS, max_size=5)
# What each token can stand for in a value: drawn so that values often match their glob.
FILLERS = {
    "*": st.text(alphabet=CHARS.replace("/", ""), max_size=5),
    "**": text,
    "**/": st.one_of(st.just(""), text.map(lambda t: t + "/")),
    "?": st.sampled_from(CHARS),
    "[ab]": st.sampled_from("ab"),
    "[!a]": st.sampled_from(CHARS),
    "[a-c]": st.sampled_from("abc"),
    "[./]": st.sampled_from("./"),
    "[!/]": st.sampled_from(CHARS),
    "[-a]": st.sampled_from("-a"),
    "[\\]": st.just("\\"),
}


@st.composite
def glob_and_value(draw: st.DrawFn) -> tuple[str, str]:
    """A glob (often with several wildcards, so both engines are exercised) and a value
    that matches it, nearly matches it (one character changed, dropped or added) or is
    random."""
    runs = st.sampled_from(["*", "**", "**/"])
    token = st.one_of(st.sampled_from(GLOB_TOKENS), runs)
    tokens = draw(st.lists(token, min_size=1, max_size=8))
    value = "".join(draw(FILLERS.get(t, st.just(t))) for t in tokens)
    kind = draw(st.sampled_from(["instance", "instance", "near miss", "random"]))
    if kind == "near miss":
        at = draw(st.integers(0, len(value)))
        value = value[:at] + draw(st.sampled_from(["", *CHARS])) + value[at + 1 :]
    elif kind == "random":
        value = draw(text)
    return "".join(tokens), value


@given(case=glob_and_value())
def test_the_matcher_agrees_with_the_old_regex(case: tuple[str, str]) -> None:
    glob, value = case
    allow = LocalEvaluator(allow=[f"x.y(v={glob})"])
    deny = LocalEvaluator(allow=["x.y"], deny=[f"x.y(v={glob})"])
    assert (effect(allow, "x.y", v=value) == "allow") is reference_match(glob, value, deny=False)
    assert (effect(deny, "x.y", v=value) == "deny") is reference_match(glob, value, deny=True)


@given(
    glob=st.lists(
        st.sampled_from(["a", "b", ".", "-", "*", "**", "?", "[ab]", "[!a]"]),
        min_size=1,
        max_size=6,
    ).map("".join),
    name=st.text(alphabet="ab.-_", min_size=1, max_size=10),
)
def test_tool_globs_agree_with_fnmatch(glob: str, name: str) -> None:
    if "." not in glob and glob not in ("*", "**"):
        glob = "ns." + glob
    ev = LocalEvaluator(allow=[glob])
    assert (effect(ev, name) == "allow") is fnmatchcase(name, glob)


@pytest.mark.parametrize(
    ("glob", "value", "matches"),
    [
        ("[[]x", "[x", True),  # as suggest.py escapes special characters
        ("[*]x", "*x", True),
        ("[*]x", "ax", False),
        ("a[\\]b", "a\\b", True),
        ("[a-]", "-", True),
        ("[^a]", "b", True),  # '^' negates too, as before
        ("[^a]", "a", False),
        ("[!/]", "/", False),
        ("[!a]", "/", True),  # a class may match '/'
        ("a?b", "a\U0001f600b", True),  # one character, not one UTF-8 byte
        ("*a*?*b", "xa\U0001f600b", True),  # the same on RE2
        ("*a*?*b", "xa\ud800b", True),  # a lone surrogate is one character there too
        ("*a*?*b", "xab", False),
        ("*a*?*b", "a/b", False),  # on RE2 too, '?' and '*' stop at '/'
        ("*a*?*b", "a\nb", True),  # and cross newlines
        ("*a*[!x]*b", "a/b", True),
        ("**/a*b*", "ab", True),
        ("**/a*b*", "x/y/a-b-", True),
        ("**/a*b*", "xab", False),
        ("**a**b*", "a/x/b", True),
        ("**a**b*", "a/x/b/c", False),
        ("*(*)*", "f(x)", True),
        ("*$*^*|*", "$^|", True),
        ("*\t*\n*", "a\tb\nc", True),
        ("src/**", "src/a\nb", True),  # '**' crosses newlines on Python's re
        ("**/.env", "a\nb/.env", True),
        ("**PRIVATE KEY**", "x\n-----BEGIN PRIVATE KEY-----\ny", True),  # and on RE2
        ("*\ud800*x*", "a\ud800bx", True),  # a lone surrogate in the glob, on RE2
        ("*\ud800*x*", "a\ud801bx", False),
        ("[a-cx-z]", "y", True),  # several ranges in one class
        ("[a-cx-z]", "d", False),
        ("[a-cx]", "x", True),  # a member after a range
        ("[a-cx]", "d", False),
        ("[0-0]", "0", True),  # a range of one
        ("[abc]", "X", False),
        ("[!abc]", "X", True),
        ("\U0001f600*", "\U0001f600x", True),  # a literal past U+00FF, on re
        ("*\U0001f600*a*", "x\U0001f600ya", True),  # and on RE2
        ("*a*b*.py", "xayb.py", True),  # RE2 with literal parts around the runs
        ("*a*b*.py", "xayb.pyc", False),
    ],
)
def test_special_characters_and_classes(glob: str, value: str, matches: bool) -> None:
    ev = LocalEvaluator(allow=[f"x.y(v={glob})"])
    assert (effect(ev, "x.y", v=value) == "allow") is matches


@pytest.mark.parametrize(
    ("glob", "needle"),
    [
        ("[z-a]", "reversed range"),
        ("[!]", "empty character class"),
        ("[^]", "empty character class"),
        ("[]a]", "empty character class"),
        ("a]", "unmatched ']'"),
        ("*[ab", "unclosed '['"),
    ],
)
def test_bad_classes_are_rule_errors(glob: str, needle: str) -> None:
    with pytest.raises(RuleError, match=re.escape(needle)):
        LocalEvaluator(allow=[f"x.y(v={glob})"])


def test_a_glob_too_complex_for_re2_is_a_rule_error() -> None:
    with pytest.raises(RuleError, match=re.escape("too complex to match (")):
        LocalEvaluator(allow=["x.y(v=*a*b*" + "?" * 100_000 + ")"])


@pytest.mark.parametrize(
    ("glob", "name", "matches"),
    [
        ("files.read_fil?", "files.read_file", True),
        ("f?les.*", "files.read_file", True),
        ("f?les.*", "fles.read_file", False),
        ("*.read_*", "files.read_file", True),
        ("files.*", "shell.run", False),
    ],
)
def test_a_tool_glob_wildcard_matches_any_character(glob: str, name: str, matches: bool) -> None:
    assert (effect(LocalEvaluator(allow=[glob]), name) == "allow") is matches


def test_a_glob_keeps_its_text() -> None:
    assert Glob("src/**/*.py").text == "src/**/*.py"
    assert Glob("*a*b*").text == "*a*b*"


def test_the_empty_glob_matches_only_the_empty_value() -> None:
    assert Glob("").fullmatch("")
    assert not Glob("").fullmatch("a")


@pytest.mark.parametrize(
    ("glob", "linear"),
    [
        ("README", True),
        ("*.py", True),  # one run
        ("src/**", True),
        ("src/**/*.py", True),  # two runs parted by '/', one of them '[^/]*'
        ("**/*.key", True),  # '**/' ends in a '/'
        ("*/**x", True),
        ("**/x*y", True),
        ("*a/**a", True),
        ("*a*", False),  # two runs with no '/' between
        ("x/*a*", False),  # a '/' before the first run does not part them
        ("**a/**b", False),  # parted, but neither run stops at '/'
        ("**/a**b", False),
        ("**/**", False),
        ("*a*b*", False),  # three runs
    ],
)
def test_only_shapes_whose_backtracking_is_linear_run_on_re(glob: str, linear: bool) -> None:
    # The rule of clearance.policy.globs: every other shape runs on RE2.
    assert _linear_in_re(_tokens(glob, path_aware=True)) is linear
