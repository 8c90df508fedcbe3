"""Trees of directories, files and symlinks on disk, and path strings to try on them.

Shared by the R9 (scoped paths) and R11 (what is checked is what runs) properties.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

from hypothesis import strategies as st

NAMES = ["a", "b", "link", "ж", "sp ace", "f.txt"]
# Present in every tree, so that paths through escaping links are common.
BASELINE = [("", "a", "dir", ""), ("", "esc", "link", "{outside}"),
            ("a", "up", "link", "../../outside/f.txt"), ("", "in", "link", "a"),
            ("", "dangle", "link", "{outside}/new.txt"), ("a", "chain", "link", "../esc")]  # fmt: skip
PARENTS = ["", "a", "a/b", "b", "ж"]
TARGETS = [
    ".", "..", "../..", "../outside", "../../outside/f.txt", "a", "../a", "b/../..", "a/b",
    "link", "missing", "missing/../..", "/", "{root}", "{root}/a", "{outside}",
    "{outside}/f.txt", "{outside}/new.txt", "{outside}/../root/a",
]  # fmt: skip
COMPONENTS = ["a", "b", "link", "ж", "sp ace", "f.txt", "new", "..", ".", "", "~", "x\x00y",
              "outside", "root", "esc", "up", "in", "dangle", "chain"]  # fmt: skip

Op = tuple[str, str, str, str]  # (parent, name, kind, link target)

trees = st.lists(
    st.tuples(
        st.sampled_from(PARENTS),
        st.sampled_from(NAMES),
        st.sampled_from(["dir", "file", "link"]),
        st.sampled_from(TARGETS),
    ),
    max_size=14,
)
paths = st.one_of(
    st.text(max_size=16),
    st.builds(
        lambda lead, parts, sep: lead + sep.join(parts),
        st.sampled_from(["", "", "/", "./", "//", "~/"]),
        st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=5),
        st.sampled_from(["/", "/", "//"]),
    ),
    st.builds(
        lambda parts: "/".join(parts),
        st.lists(st.sampled_from(COMPONENTS[:6] + COMPONENTS[14:]), min_size=1, max_size=4),
    ),
)


@contextlib.contextmanager
def workspace(ops: list[Op]) -> Iterator[tuple[str, str]]:
    """``(root, outside)`` directories with ``ops`` applied inside the root."""
    with tempfile.TemporaryDirectory() as base:
        base = os.path.realpath(base)
        root, outside = os.path.join(base, "root"), os.path.join(base, "outside")
        os.mkdir(root)
        os.mkdir(outside)
        with open(os.path.join(outside, "f.txt"), "w") as f:
            f.write("outside\n")
        for parent, name, kind, target in BASELINE + ops:
            directory = os.path.join(root, parent)
            path = os.path.join(directory, name)
            if not os.path.isdir(directory) or os.path.islink(directory):
                continue
            if os.path.lexists(path):
                continue
            if kind == "dir":
                os.mkdir(path)
            elif kind == "file":
                with open(path, "w") as f:
                    f.write("inside\n")
            else:
                os.symlink(target.format(root=root, outside=outside), path)
        yield root, outside
