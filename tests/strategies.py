"""Hypothesis strategies shared by the rule properties."""

from typing import TypedDict

from hypothesis import strategies as st

TOOLS = ["files.read_file", "files.write_file", "files.list_dir", "shell.run"]
SEGMENTS = ["src", "docs", "..", "a", "b.py", ".env", "x y", "*"]

paths = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4).map("/".join)
commands = st.lists(
    st.sampled_from(["git", "status", "push", "ls", "rm", "-rf", "/"]), min_size=1, max_size=3
).map(" ".join)

globs = st.lists(
    st.sampled_from(["src", "docs", "*", "**", "a", "*.py", ".env"]), min_size=1, max_size=3
).map("/".join)


@st.composite
def rules(draw: st.DrawFn) -> str:
    tool = draw(st.sampled_from([*TOOLS, "files.*", "*.*", "shell.*"]))
    if tool == "shell.run" and draw(st.booleans()):
        return f"shell.run(command={draw(st.sampled_from(['git *', 'ls', 'git push*', 'rm *']))})"
    if tool in ("files.read_file", "files.write_file", "files.list_dir") and draw(st.booleans()):
        return f"{tool}(path={draw(globs)})"
    return tool


class RuleSet(TypedDict):
    """What ``rule_sets`` draws: the rule lists ``LocalEvaluator(**rule_set)`` takes."""

    allow: list[str]
    ask: list[str]
    deny: list[str]


rule_sets = st.fixed_dictionaries(
    {
        "allow": st.lists(rules(), max_size=4),
        "ask": st.lists(rules(), max_size=2),
        "deny": st.lists(rules(), max_size=3),
    }
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    tool = draw(st.sampled_from(TOOLS))
    if tool == "shell.run":
        return tool, {"command": draw(commands)}
    if tool == "files.write_file":
        return tool, {"path": draw(paths), "content": "x"}
    return tool, {"path": draw(paths)}
