"""`StartGate`: an attempt's carrier is started only once its task's row is in the store (D105).

Data flow: a run about to launch an attempt hands the gate its task id, the version
of its latest transition (its ``starting``, or later) and the launch itself. The
gate asks the `StoreWriter` to call back once the store holds the task at that
version (`StoreWriter.when_stored`): the row's creation and every transition up to
``starting`` then went in with one commit, shared with every other start and write
recorded meanwhile (the writer flushes at once when asked, so a scheduling round
costs one commit, not one per task).

The callback comes on the thread that flushed — mostly the writer's own, which must
never spawn a process or run a body. A launch that only hands the body to another
thread (a `ThreadExecutor`'s) is made there (`hand_off`): one thread switch, as
without the gate. Any other (a child process to spawn) is queued, and one other
thread from the thread cache starts the queued launches in order (`carry`). A row
stored already opens the gate at once, on the caller's thread, with no thread switch.

Nothing else is the gate's business: an attempt that ended while it waited (a stop
and its window, a start timeout, D92) is refused by the launch itself, and a store
that fails lets the launch go ahead once a flush tried the row (guide §8.9: a store
failure never holds a task back; D106).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from functools import partial

from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.support._thread_cache import run_elsewhere

__all__ = ["StartGate"]

_log = logging.getLogger("chongming_task.controller")


class StartGate:
    """Hold each launch until the writer has stored its task's row (a run's launch gate)."""

    __slots__ = ("_carrying", "_opened", "_writer")

    def __init__(self, writer: StoreWriter) -> None:
        self._writer = writer
        self._opened: deque[Callable[[], None]] = deque()  # appended and popped under the GIL
        self._carrying = False  # a thread is starting the opened launches

    def carry(self, task_id: str, version: int, launch: Callable[[], None]) -> None:
        """Call `launch` once the store holds `task_id` at `version` or later: here and now
        when it does already, else on a thread of its own after the flush that stored it."""
        if self._writer.when_stored(task_id, version, partial(self._open, launch)):
            launch()

    def hand_off(self, task_id: str, version: int, launch: Callable[[], None]) -> None:
        """`carry` for a `launch` that only hands its body to another thread and returns:
        made by the thread that flushed."""
        if self._writer.when_stored(task_id, version, launch):
            launch()

    def _open(self, launch: Callable[[], None]) -> None:
        """On the flushing thread: queue `launch` for the carrying thread (started if none)."""
        self._opened.append(launch)
        if not self._carrying:
            self._start_carrying()

    def _start_carrying(self) -> None:
        self._carrying = True
        try:
            run_elsewhere(self._carry, "chongming-start")
        except Exception:  # no thread to be had (a process limit, shutdown): start them here
            _log.exception("could not start a thread to launch attempts; launching them here")
            self._carry()

    def _carry(self) -> None:
        """Launch every opened launch, in order, until none is left."""
        opened = self._opened
        try:
            while True:
                while opened:
                    try:
                        launch = opened.popleft()
                    except IndexError:  # a second carrying thread took the last one
                        break
                    try:
                        launch()  # a run's launch settles its own failure (no carrier: raised)
                    except Exception:
                        _log.exception("could not launch an attempt")
                # cleared, then looked at again: a launch queued in between is never
                # stranded (its `_open` saw the flag cleared and started a thread of its own)
                self._carrying = False
                if not opened:
                    return
                self._carrying = True
        except BaseException:  # a SystemExit in a launch: the rest go on another thread
            self._carrying = False
            if opened:
                self._start_carrying()
            raise
