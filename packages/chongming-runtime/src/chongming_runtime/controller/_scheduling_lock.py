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
Work returns the runs it made startable. A thread that ran posted work while
reporting a task (inside `run_or_post`) starts them itself once the lock is free;
any other holder (a query, a submit, a pipeline release holding its own lock)
hands them to another thread, so it never starts runs it did not ask for. A posted
piece of work can carry a callback (``then``) called after its runs were started;
the controller uses it to hold a finished run's ``wait()`` until the slot it gave
back has been passed on, as when the finishing thread does it itself.

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

from chongming_runtime.controller._schedulable import SchedulableRun

__all__ = ["SchedulingLock", "Then", "Work"]

_log = logging.getLogger("chongming_task.controller")

#: Work done under the lock; returns the runs it made startable (started after release).
Work = Callable[[], list[SchedulableRun]]
#: Called after the runs a posted piece of work made startable were started.
Then = Callable[[], None]
#: Starts runs and then calls the callbacks (outside the lock).
Start = Callable[[list[SchedulableRun], list[Then]], None]


class SchedulingLock:
    """A re-entrant lock (use ``with``) whose holder also runs work other threads posted.

    Args:
        start_here: starts runs (then calls the callbacks) on the calling thread; used
            when the thread that ran posted work was reporting a task itself.
        start_elsewhere: the same on another thread; used by every other holder.
    """

    __slots__ = ("_after", "_depth", "_lock", "_posted", "_start_elsewhere", "_start_here", "_then")

    def __init__(self, start_here: Start, start_elsewhere: Start) -> None:
        self._lock = threading.RLock()
        self._posted: deque[tuple[Work, Then | None]] = deque()
        self._after: list[SchedulableRun] = []  # made startable by posted work; the holder's
        self._then: list[Then] = []  # callbacks of posted work; the holder's
        self._depth = 0  # nesting of the holder's critical sections
        self._start_here = start_here
        self._start_elsewhere = start_elsewhere

    # ------------------------------------------------------------------ as a lock
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (see `threading.RLock.acquire`); posted work runs first."""
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1 and self._posted:
            try:
                self._run_posted()
            except BaseException:  # KeyboardInterrupt in posted work: never keep the lock
                self.release()
                raise
        return True

    def release(self) -> None:
        """Let go of the lock; the outermost release has what posted work made startable
        started on another thread."""
        self._release(self._start_elsewhere)

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
    def run_or_post(
        self, work: Work, on_posted: Callable[[], Then | None] | None = None
    ) -> list[SchedulableRun] | None:
        """Run `work` under the lock now if it is free and return what it returned (for
        the caller to start); else leave it to the holder and return None at once. When
        it is posted, `on_posted` is called first and the callback it returns is called
        after the runs the work made startable were started."""
        if not self._lock.acquire(blocking=False):
            then = on_posted() if on_posted is not None else None
            self._posted.append((work, then))
            # the holder looks for posted work after letting go of the lock; if it let go
            # between the failed attempt above and the append, nobody would: try again
            if not self._lock.acquire(blocking=False):
                return None  # the holder of this moment lets go later, and sees the append
            self._depth += 1  # from 0: a moment ago another thread held it
            try:
                self._run_posted()
            finally:
                self._release(self._start_here)
            return None
        self._depth += 1
        try:
            if self._depth == 1 and self._posted:
                self._run_posted()
            return work()
        finally:
            self._release(self._start_here)

    def _run_posted(self) -> None:
        """Run every posted piece of work. Hold the lock (outermost)."""
        posted = self._posted
        while posted:
            work, then = posted.popleft()
            if then is not None:
                self._then.append(then)  # whatever the work does: its waiter must be told
            try:
                self._after.extend(work())
            except Exception:  # one failure must not strand the work posted after it
                _log.exception("scheduling work failed")

    def _release(self, start: Start) -> None:
        self._depth -= 1
        if self._depth:
            self._lock.release()
            return
        # the outermost release: let go, start what posted work released, and run what
        # was posted meanwhile if nobody else took the lock to do it. A failure (even a
        # KeyboardInterrupt) never skips a step: it is raised once all are done.
        interrupted: BaseException | None = None
        while True:
            after, then = self._after, self._then
            if after or then:
                self._after, self._then = [], []
            self._lock.release()
            if after or then:
                try:
                    start(after, then)
                except BaseException as exc:
                    interrupted = interrupted or exc
            if not self._posted or not self._lock.acquire(blocking=False):
                break  # nothing posted meanwhile, or the new holder runs it
            self._depth = 1
            try:
                self._run_posted()
            except BaseException as exc:  # the rest stays posted for the next holder
                interrupted = interrupted or exc
            self._depth = 0
        if interrupted is not None:
            raise interrupted
