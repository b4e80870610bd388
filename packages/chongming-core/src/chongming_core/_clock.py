"""Time as a seam: `Clock`, the real `SystemClock` and the deterministic `FakeClock` (guide §12).

A clock tells the time and keeps deadlines. Every deadline of a process
(timeouts, backoff, graceful windows, lease renewals) lives in the clock's one
timer heap, served by one daemon thread for the real clock, and fired by
`FakeClock.advance()` in tests, so no test has to sleep.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "FakeClock", "SystemClock", "TimerHandle"]

_log = logging.getLogger("chongming_task.clock")

#: The longest single sleep of the timer thread: a deadline further away (a window of
#: 1e300 seconds) is waited for in turns, as the platform cannot sleep that long at once.
_LONGEST_SLEEP = 3600.0


class TimerHandle:
    """A scheduled callback; `cancel()` it when the deadline no longer matters."""

    __slots__ = ("_cancelled", "callback", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self._cancelled = False

    def cancel(self) -> None:
        """Prevent the callback from running (no effect once it ran)."""
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        """True once `cancel()` was called."""
        return self._cancelled


@runtime_checkable
class Clock(Protocol):
    """What the runtime needs of time."""

    def now(self) -> datetime:
        """The wall-clock time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; deadlines are expressed in it."""
        ...

    def call_at(self, deadline: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once `monotonic()` reaches `deadline`.

        Callbacks run on the clock's timer thread (or inside `FakeClock.advance`);
        they must be quick and must not block.
        """
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` after `delay` seconds."""
        ...


def _run_callback(handle: TimerHandle) -> None:
    try:
        handle.callback()
    except Exception:  # a broken callback must not take the timer down with it
        _log.exception("timer callback %r failed", handle.callback)


def _serve_callback(handle: TimerHandle) -> None:
    """`_run_callback` on the timer thread, where nothing may end the thread: it serves
    every deadline of the process (a `SystemExit` or a `TaskCancelled` raised by one
    callback would leave every timeout, graceful window and lease renewal unserved)."""
    try:
        _run_callback(handle)
    except BaseException:
        _log.exception("timer callback %r raised; the timer thread goes on", handle.callback)


class _TimerHeap:
    """A heap of timer handles ordered by deadline, then by insertion."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._counter = itertools.count()

    def push(self, handle: TimerHandle) -> None:
        heapq.heappush(self._heap, (handle.deadline, next(self._counter), handle))

    def pop_due(self, now: float) -> TimerHandle | None:
        while self._heap:
            deadline, _, handle = self._heap[0]
            if handle.cancelled:
                heapq.heappop(self._heap)
                continue
            if deadline > now:
                return None
            heapq.heappop(self._heap)
            return handle
        return None

    def next_deadline(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return sum(1 for _, _, h in self._heap if not h.cancelled)


class SystemClock:
    """The real clock. Its deadlines are served by one lazily started daemon thread."""

    def __init__(self) -> None:
        self._heap = _TimerHeap()
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """`time.monotonic()`."""
        return time.monotonic()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> TimerHandle:
        """Schedule `callback` on the shared timer thread."""
        handle = TimerHandle(deadline, callback)
        with self._cond:
            self._heap.push(handle)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="chongming-timer", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return handle

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Schedule `callback` `delay` seconds from now."""
        return self.call_at(time.monotonic() + max(0.0, delay), callback)

    def _serve(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                handle = self._heap.pop_due(now)
                if handle is None:
                    nxt = self._heap.next_deadline()
                    # capped: a wait beyond the platform's time_t raises, and the one timer
                    # thread of the process would end with every deadline it keeps
                    self._cond.wait(
                        None if nxt is None else min(max(0.0, nxt - now), _LONGEST_SLEEP)
                    )
                    continue
            _serve_callback(handle)


#: The process-wide real clock (one timer thread for the whole process).
SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """A clock that only moves when told to; deadlines fire inside `advance()`.

    Example::

        clock = FakeClock()
        run = TaskRun(body, clock=clock, timeout=Timeout(idle=5))
        clock.advance(6)   # the idle timeout fires before advance() returns
    """

    def __init__(self, start: datetime | None = None, *, monotonic_start: float = 1000.0) -> None:
        if start is None:
            start = datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._wall_start = start
        self._mono_start = monotonic_start
        self._offset = 0.0
        self._heap = _TimerHeap()
        self._lock = threading.RLock()

    def now(self) -> datetime:
        """The fake wall-clock time."""
        with self._lock:
            return self._wall_start + timedelta(seconds=self._offset)

    def monotonic(self) -> float:
        """The fake monotonic time."""
        with self._lock:
            return self._mono_start + self._offset

    def call_at(self, deadline: float, callback: Callable[[], None]) -> TimerHandle:
        """Schedule `callback`; it runs inside the `advance()` that reaches `deadline`."""
        handle = TimerHandle(deadline, callback)
        with self._lock:
            self._heap.push(handle)
        return handle

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        """Schedule `callback` `delay` fake seconds from now."""
        return self.call_at(self.monotonic() + max(0.0, delay), callback)

    def advance(self, seconds: float) -> None:
        """Move time forward, firing every deadline that falls due, in order, before returning."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError(f"advance() takes a number of seconds, got {seconds!r}")
        if not math.isfinite(seconds):
            # NaN would fire every timer at once; infinity would leave a clock whose now()
            # overflows in every thread that reads it
            raise ValueError(
                f"advance() needs a finite number of seconds, got {seconds}; to fire every "
                "pending deadline, advance past the last one"
            )
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (advance({seconds}))")
        with self._lock:
            target = self._mono_start + self._offset + seconds
        while True:
            with self._lock:
                handle = self._heap.pop_due(target)
                if handle is None:
                    self._offset = target - self._mono_start
                    return
                self._offset = max(self._offset, handle.deadline - self._mono_start)
            _run_callback(handle)

    def run_due(self) -> None:
        """Fire the deadlines that are already due without moving time."""
        self.advance(0)

    @property
    def pending_timers(self) -> int:
        """How many scheduled callbacks have not run and were not cancelled."""
        with self._lock:
            return len(self._heap)
