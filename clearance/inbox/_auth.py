"""Who is using an inbox: one bearer token per person, and a limit on failed attempts.

Rule R13: nothing ambient may answer. A browser sends cookies for ``127.0.0.1`` to every
port, so a cookie session is readable by any other local server the person opens (one an
agent started, say), which could then fetch the page and answer. So the inbox sets no
cookie and reads none: each person gets a random token (256 bits) when the inbox starts,
printed in a link *after* ``#`` (the fragment, which a browser never sends to a server, nor
in a ``Referer``). The page's script moves it to the tab's ``sessionStorage`` (per origin,
so per port: another server cannot read it), removes it from the address bar, and sends it
as ``Authorization: Bearer`` on every request. A page of another origin cannot set that
header on a request to the inbox (it would need a CORS preflight the inbox never grants).

Tokens are kept only as their SHA-256 (a lookup's timing says nothing about a valid
value); a token lasts ``ttl`` seconds from the start, or until its person signs out.

Failed attempts (a token that is not one) are counted: after ``max_failures`` within
``window`` seconds every authenticated request is refused, without looking at its token,
until the window has room again; each failure is logged (never the token presented).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Failures", "People", "Person"]

log = logging.getLogger("clearance.inbox")


@dataclass(frozen=True, slots=True)
class Person:
    """Who a token is for, and until when it works."""

    user: str
    expires_at: float


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


class People:
    """The people of an inbox and their bearer tokens (see the module docstring).

    Args:
        users: the people who may answer, one token each.
        ttl: seconds a token works from the start.

    Raises:
        ValueError: no user, an empty or repeated name.
    """

    def __init__(self, users: Iterable[str], *, ttl: float) -> None:
        names = list(users)
        if not names:
            raise ValueError("an inbox needs at least one user")
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"an inbox user needs a name, not {name!r}")
        if len(set(names)) != len(names):
            raise ValueError("inbox users must have different names")
        self._lock = threading.Lock()
        ends = time.time() + ttl
        self._tokens = {name: secrets.token_urlsafe(32) for name in names}
        self._people = {_digest(t): Person(name, ends) for name, t in self._tokens.items()}

    @property
    def tokens(self) -> dict[str, str]:
        """Each person's token, by name (what the printed links carry)."""
        with self._lock:
            live = {p.user for p in self._people.values()}
            return {name: t for name, t in self._tokens.items() if name in live}

    def person(self, presented: str | None) -> Person | None:
        """Whose live token ``presented`` is, or None."""
        if not presented:
            return None
        key = _digest(presented)
        with self._lock:
            found = self._people.get(key)
            if found is not None and found.expires_at <= time.time():
                del self._people[key]
                return None
            return found

    def sign_out(self, presented: str | None) -> None:
        """End the token ``presented`` (its person needs a new inbox for a new one)."""
        if presented:
            with self._lock:
                self._people.pop(_digest(presented), None)


class Failures:
    """Failed attempts to use an inbox's tokens (see the module docstring).

    Args:
        max_failures: how many failures a window holds before requests are refused.
        window: the window's length, in seconds.
    """

    def __init__(self, *, max_failures: int = 10, window: float = 60.0) -> None:
        self.max_failures = max_failures
        self.window = window
        self._lock = threading.Lock()
        self._times: deque[float] = deque()
        self.total = 0
        """Every failure since the start."""

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] <= now - self.window:
            self._times.popleft()

    def locked_for(self) -> float:
        """Seconds until requests are taken again (0: they are now)."""
        now = time.monotonic()
        with self._lock:
            self._trim(now)
            if len(self._times) < self.max_failures:
                return 0.0
            return max(0.0, self._times[-self.max_failures] + self.window - now)

    def failed(self, what: str) -> None:
        """Count (and log) one failed attempt: ``what`` says which, never with a token."""
        now = time.monotonic()
        with self._lock:
            self._trim(now)
            self._times.append(now)
            self.total += 1
            recent = len(self._times)
        log.warning(
            "inbox: refused a request with %s (%d in the last %g s, %d in all)",
            what,
            recent,
            self.window,
            self.total,
        )
        if recent == self.max_failures:
            log.warning(
                "inbox: %d failed attempts in %g s: something on this machine is trying "
                "tokens; every request is refused until the attempts stop",
                recent,
                self.window,
            )
