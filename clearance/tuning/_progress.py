"""How far a replay is, and how it is asked to stop.

A replay calls its ``progress`` callback with a :class:`ReplayProgress` every few lines (and
once at the end), and asks its ``stop`` callback at the same moments whether to stop: the
command line shows calls per second and the time left on a terminal, and stops on Ctrl-C
with the report of what was decided so far. With worker processes, the workers add what
they read to a shared counter and watch a shared event the parent sets when ``stop``
says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from clearance.tuning._corpus import open_corpus

__all__ = ["CHECK_EVERY", "Checkpoint", "ReplayProgress", "count_lines"]

CHECK_EVERY = 16
"""Lines read between two checkpoints: stopping takes at most this many decisions."""

Checkpoint = Callable[[int], bool]
"""Called with the lines read since the last call; returns True to stop the replay."""


@dataclass(frozen=True, slots=True)
class ReplayProgress:
    """How far a replay is."""

    lines: int
    """Corpus lines read so far (decided, withheld, skipped or blank)."""
    total: int | None
    """Lines in the corpus, when known (a file; not standard input)."""
    elapsed: float
    """Seconds since the replay started."""

    @property
    def rate(self) -> float:
        """Lines per second so far."""
        return self.lines / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def fraction(self) -> float | None:
        """The share of the corpus read (``None`` without a total)."""
        if not self.total:
            return None
        return min(1.0, self.lines / self.total)

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far (``None`` without a total or a rate)."""
        rate = self.rate
        if self.total is None or rate <= 0:
            return None
        return max(0.0, (self.total - self.lines) / rate)


def count_lines(path: str | os.PathLike[str]) -> int:
    """The lines of a file (a last line without a line end counts), read in binary chunks:
    about a second per gigabyte, once, for the time left."""
    count = 0
    last = b"\n"
    with open_corpus(path, binary=True) as handle:
        while chunk := handle.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")
