"""Who is signed in to an inbox: one-time login tokens, sessions and their CSRF tokens.

A login token is made per person when the inbox starts and printed in a link. It works
once: exchanging it for a session burns it, so a link seen later (in a terminal's
scrollback, a browser's history) signs nobody in. A session is a random cookie value,
kept here only as its SHA-256 (so a lookup's timing says nothing about a valid value), with
the person's name, its own CSRF token and an end. Tokens are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Logins", "SignedIn"]


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A session: who it is, and the CSRF token every answer it sends must carry."""

    user: str
    csrf: str = field(repr=False)
    expires_at: float

    def csrf_matches(self, presented: str | None) -> bool:
        """Whether ``presented`` is this session's CSRF token (constant time)."""
        if not presented:
            return False
        return hmac.compare_digest(presented.encode(), self.csrf.encode())


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Logins:
    """One-time login tokens and the sessions they open (see the module docstring).

    Args:
        users: the people who may sign in, one login token each.
        session_ttl: seconds a session lasts from sign-in.

    Raises:
        ValueError: no user, an empty or repeated name.
    """

    def __init__(self, users: Iterable[str], *, session_ttl: float) -> None:
        names = list(users)
        if not names:
            raise ValueError("an inbox needs at least one user")
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"an inbox user needs a name, not {name!r}")
        if len(set(names)) != len(names):
            raise ValueError("inbox users must have different names")
        self.session_ttl = session_ttl
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {secrets.token_urlsafe(32): name for name in names}
        self._sessions: dict[str, SignedIn] = {}

    @property
    def tokens(self) -> dict[str, str]:
        """The login tokens not used yet, by person."""
        with self._lock:
            return {user: token for token, user in self._tokens.items()}

    def _find_token(self, presented: str) -> str | None:
        found = None
        for token in self._tokens:  # every one, in constant time each
            if hmac.compare_digest(presented.encode(), token.encode()) and found is None:
                found = token
        return found

    def user_of_token(self, presented: str | None) -> str | None:
        """Who an unused login token is for (the token stays valid)."""
        if not presented:
            return None
        with self._lock:
            token = self._find_token(presented)
            return self._tokens[token] if token is not None else None

    def sign_in(self, presented: str | None) -> tuple[str, SignedIn] | None:
        """Burn a login token and open a session: ``(cookie value, session)``, or None for
        a token that is not (or no longer) valid."""
        if not presented:
            return None
        with self._lock:
            token = self._find_token(presented)
            if token is None:
                return None
            user = self._tokens.pop(token)
            cookie = secrets.token_urlsafe(32)
            session = SignedIn(user, secrets.token_urlsafe(32), time.time() + self.session_ttl)
            self._sessions[_digest(cookie)] = session
            return cookie, session

    def session(self, cookie: str | None) -> SignedIn | None:
        """The live session of a cookie value, or None."""
        if not cookie:
            return None
        key = _digest(cookie)
        with self._lock:
            found = self._sessions.get(key)
            if found is not None and found.expires_at <= time.time():
                del self._sessions[key]
                return None
            return found

    def sign_out(self, cookie: str | None) -> None:
        """End the session of a cookie value (nothing when there is none)."""
        if cookie:
            with self._lock:
                self._sessions.pop(_digest(cookie), None)
