"""The ask protocol of one session: who answers a :class:`PermissionAsk`, and how.

An :class:`AskDesk` belongs to a session. The pipeline hands it an ask with
:meth:`AskDesk.answer` and gets back ``(decision or None, how)``:

- with an ``on_permission_ask`` callback, the callback answers (``how="callback"``); a
  callback that raises or answers nonsense denies (``"error"``, rule R1);
- otherwise the ask goes to every open :meth:`AskDesk.listen` iterator (what
  ``session.permission_asks()`` returns) and waits for ``await ask.respond(...)``
  (``"stream"``). An ask raised while no iterator is open waits a short grace
  (``listener_grace``, for a UI task started just before) and is then denied
  (``"unanswerable"``), unless the caller waits for an answer given elsewhere
  (``elsewhere=True``: ``harness.answer_ask``, a store another process answers);
- an answer given elsewhere settles the ask at once, whoever else was asked: a callback
  still waiting is cancelled (``"store"``);
- no answer within ``timeout`` denies (``"timeout"``); closing the desk denies every open
  ask (``"closed"``); a call cancelled while it waits withdraws its ask (``"withdrawn"``).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from clearance.errors import AskError
from clearance.harness.approvals import (
    AskCallback,
    PermissionAsk,
    PermissionDecision,
    coerce_decision,
)

__all__ = ["AskDesk"]

log = logging.getLogger("clearance")

Diagnostics = Callable[[str, BaseException, Mapping[str, Any]], None]


class AskDesk:
    """Where one session's asks are answered (see the module docstring).

    Args:
        callback: the session's ``on_permission_ask``, or None to answer through
            :meth:`listen`.
        timeout: seconds an ask waits for an answer.
        diagnostics: the harness's diagnostics callback (a failing ask callback goes there).
        listener_grace: seconds an ask waits for a first listener when none is open.
    """

    def __init__(
        self,
        *,
        callback: AskCallback | None,
        timeout: float,
        diagnostics: Diagnostics | None = None,
        listener_grace: float = 0.1,
    ) -> None:
        self.callback = callback
        self.timeout = timeout
        self.diagnostics = diagnostics
        self.listener_grace = listener_grace
        self._open: dict[str, PermissionAsk] = {}
        self._listeners = 0
        self._listener_arrived: anyio.Event | None = None
        self._closed = False
        # Made on first use: most sessions answer through a callback.
        self._stream: (
            tuple[MemoryObjectSendStream[PermissionAsk], MemoryObjectReceiveStream[PermissionAsk]]
            | None
        ) = None

    @property
    def open_asks(self) -> list[PermissionAsk]:
        """The asks waiting for an answer now."""
        return list(self._open.values())

    def find(self, ask_id: str) -> PermissionAsk | None:
        """The open ask with this id, if it waits here."""
        return self._open.get(ask_id)

    @property
    def answerable(self) -> bool:
        """Whether someone here can answer an ask now (a callback or a listener)."""
        return self.callback is not None or self._listeners > 0

    @property
    def listeners(self) -> int:
        """How many :meth:`listen` iterators are open."""
        return self._listeners

    def listen(self) -> AsyncIterator[PermissionAsk]:
        """An iterator over the asks, from now on, to answer with ``ask.respond``.

        The listener counts from this call (not from the first ``__anext__``), so an ask
        raised right after it reaches it.
        """
        self._listeners += 1
        if self._listener_arrived is not None:
            self._listener_arrived.set()
        receive = self._streams()[1].clone()
        return self._iterate(receive)

    async def _iterate(
        self, receive: MemoryObjectReceiveStream[PermissionAsk]
    ) -> AsyncIterator[PermissionAsk]:
        try:
            async with receive:
                async for ask in receive:
                    if ask.open:
                        yield ask
        finally:
            self._listeners -= 1

    def _streams(
        self,
    ) -> tuple[MemoryObjectSendStream[PermissionAsk], MemoryObjectReceiveStream[PermissionAsk]]:
        if self._stream is None:
            self._stream = anyio.create_memory_object_stream[PermissionAsk](math.inf)
        return self._stream

    async def answer(
        self, ask: PermissionAsk, *, elsewhere: bool = False
    ) -> tuple[PermissionDecision | None, str]:
        """Get an answer for ``ask``: ``(decision or None for deny, how it was answered)``.

        ``elsewhere``: with nobody here to answer (no callback, no listener), wait for an
        answer given elsewhere (``ask.settle`` from ``harness.answer_ask`` or a watched
        store) up to the timeout, instead of denying it as ``unanswerable``."""
        self._open[ask.ask_id] = ask
        try:
            with anyio.move_on_after(self.timeout):
                if self.callback is not None:
                    return await self._from_callback(ask)
                if not await self._a_listener():
                    if not elsewhere:
                        ask.close("unanswerable")
                        return None, "unanswerable"
                    await ask.wait()
                    if ask.decision is not None:
                        return ask.decision, "store"
                    return None, ask.closed or "closed"
                self._streams()[0].send_nowait(ask)
                await ask.wait()
                if ask.decision is not None:
                    return ask.decision, "stream"
                return None, ask.closed or "closed"
            ask.close("timeout")
            if ask.decision is not None:  # answered at the very last moment
                return ask.decision, "stream"
            return None, "timeout"
        except anyio.get_cancelled_exc_class():
            ask.close("withdrawn")
            raise
        finally:
            self._open.pop(ask.ask_id, None)

    async def _from_callback(self, ask: PermissionAsk) -> tuple[PermissionDecision | None, str]:
        """The callback's answer; an answer given elsewhere meanwhile (the store, the
        inbox, ``harness.answer_ask``) or a close settles the ask at once, and the
        callback, still waiting, is cancelled."""
        callback = self.callback
        assert callback is not None
        got: list[PermissionDecision | Exception] = []
        async with anyio.create_task_group() as tg:

            async def settled_elsewhere() -> None:
                await ask.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(settled_elsewhere)
            # The callback runs in the call's own task (a callback may close its session,
            # which then does not wait for the call it is part of).
            try:
                value: Any = callback(ask)
                if inspect.isawaitable(value):
                    value = await value
                got.append(coerce_decision(value))
            except Exception as exc:
                got.append(exc)
            tg.cancel_scope.cancel()
        if not got:  # settled or closed before the callback answered: it was cancelled
            if ask.decision is not None:
                return ask.decision, "store"
            return None, ask.closed or "closed"
        decision = got[0]
        if isinstance(decision, Exception):
            # R1: a callback that raises or answers nonsense denies.
            if self.diagnostics is not None:
                self.diagnostics(ask.ask_id, decision, {"stage": "ask callback"})
            else:
                log.warning("permission callback failed for %s: %s", ask.call_id, type(decision))
            if ask.decision is not None:  # answered elsewhere meanwhile: that answer stands
                return ask.decision, "store"
            ask.close("error")
            return None, "error"
        try:
            ask.settle(decision)
        except AskError:
            if ask.decision is not None:  # answered elsewhere meanwhile (a shared store)
                return ask.decision, "store"
            return None, "closed"
        return decision, "callback"

    async def _a_listener(self) -> bool:
        """Whether a listener is open, waiting ``listener_grace`` for a first one."""
        if self._listeners or self._closed:
            return self._listeners > 0
        if self.listener_grace <= 0:
            return False
        if self._listener_arrived is None or self._listener_arrived.is_set():
            self._listener_arrived = anyio.Event()
        with anyio.move_on_after(self.listener_grace):
            await self._listener_arrived.wait()
        return self._listeners > 0

    def close(self) -> None:
        """Deny every open ask (``closed``) and end the listeners."""
        self._closed = True
        for ask in list(self._open.values()):
            ask.close("closed")
        if self._listener_arrived is not None:
            self._listener_arrived.set()
        if self._stream is not None:
            self._stream[0].close()
            self._stream[1].close()
