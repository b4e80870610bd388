"""`SchedulingLock`: the controller's lock, which a busy thread never has to wait for.

Threads finishing tasks each give a slot back under the controller's lock. When one
of them waits for that lock, it sleeps, and the lock is handed to it when it is
released: the sleeping thread owns the lock while it waits for the GIL, so the next
thread to need the lock sleeps too, and from then on every acquisition costs a
thread switch (a lock convoy). With four threads finishing no-op tasks this doubled
the CPU time per task.

So a thread that finds the lock taken can *post* its work (`run_or_post`) instead
of waiting: whoever holds the lock runs the posted work before it lets go of it,
and every thread that takes the lock runs what was posted before it reads anything,
so no critical section ever sees a state that lacks work posted before it began.
Work returns the runs it made startable; they are started after the lock is
released, by the thread that ran the work.

A posted piece of work runs under the lock on another thread, so it must decide
from the state it finds then (the controller's accounting does: it reads each run's
state at that moment), and it is never posted from inside a critical section.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chongming_runtime._task_run import TaskRun

__all__ = ["SchedulingLock", "Work"]

_log = logging.getLogger("chongming_task.controller")

#: Work done under the lock; returns the runs it made startable (started after release).
Work = Callable[[], list["TaskRun"]]


class SchedulingLock:
    """A re-entrant lock (use ``with``) whose holder also runs work other threads posted.

    Args:
        start: starts runs that posted work made startable; called outside the lock.
    """

    __slots__ = ("_after", "_depth", "_lock", "_posted", "_start")

    def __init__(self, start: Callable[[list[TaskRun]], None]) -> None:
        self._lock = threading.RLock()
        self._posted: deque[Work] = deque()
        self._after: list[TaskRun] = []  # made startable by posted work; held by the holder
        self._depth = 0  # nesting of the holder's critical sections
        self._start = start

    # ------------------------------------------------------------------ as a lock
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (see `threading.RLock.acquire`); posted work runs first."""
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1 and self._posted:
            self._run_posted()
        return True

    def release(self) -> None:
        """Let go of the lock; the outermost release starts what posted work made startable."""
        self._depth -= 1
        if self._depth:
            self._lock.release()
            return
        self._leave()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # ------------------------------------------------------------------ posting
    def run_or_post(self, work: Work) -> list[TaskRun] | None:
        """Run `work` under the lock now if it is free (returns what `work` returned, for
        the caller to start), else leave it to the holder and return None at once."""
        if not self._lock.acquire(blocking=False):
            # the holder runs it: it looks for posted work after letting go of the lock,
            # which is after this failed attempt, hence after the append
            self._posted.append(work)
            return None
        self._depth += 1
        try:
            if self._depth == 1 and self._posted:
                self._run_posted()
            return work()
        finally:
            self.release()

    def _run_posted(self) -> None:
        """Run every posted piece of work. Hold the lock (outermost)."""
        posted = self._posted
        while posted:
            work = posted.popleft()
            try:
                self._after.extend(work())
            except Exception:  # one failure must not strand the work posted after it
                _log.exception("scheduling work failed")

    def _leave(self) -> None:
        """The outermost release: let go, start what posted work released, and run work
        posted meanwhile if nobody else took the lock to do it."""
        while True:
            after = self._after
            if after:
                self._after = []
            self._lock.release()
            if after:
                self._start(after)
            if not self._posted or not self._lock.acquire(blocking=False):
                return  # nothing posted, or the new holder runs it
            self._depth = 1
            if self._posted:
                self._run_posted()
            self._depth = 0
