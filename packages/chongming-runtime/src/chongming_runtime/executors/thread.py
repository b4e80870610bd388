"""`ThreadExecutor`: every attempt on its own daemon thread, no pool (guide §7.1, §7.3).

A pool would join its workers at interpreter exit, so one task that ignores
cancellation would keep the whole process alive, and a pool cannot give up on a
stuck worker. Each attempt therefore gets a daemon thread of its own; an
abandoned thread leaks, which is why such an attempt is recorded as ``lost``.
The limit on parallelism belongs to the scheduling layer, not to the executor.

Starting a thread is slow (``Thread.start()`` waits until the new thread runs,
which under GIL contention takes a scheduler round), so a thread whose attempt
has *returned* parks for a few seconds and the next attempt is handed to it.
This is a cache, not a pool, and §7.3's reasons still hold:

* no size limit and no queue: an attempt never waits for a thread; when no
  parked thread is there, a new one is started;
* every thread is a daemon thread, never joined at exit;
* a thread whose body never returned is never handed anything again (only a
  thread that came back parks), so an abandoned attempt just leaks its thread;
* parked threads exit after `IDLE_SECONDS`; at most `MAX_IDLE` are kept;
* each attempt runs in a fresh `contextvars.Context`, as on a new thread, and a
  parked thread is renamed ``chongming-task-idle``.

A thread whose body has returned and that is only reporting the result may, in
that report, release the next attempt (its slot freed one). That attempt is kept
for this same thread, which runs it right after the report instead of waking
another thread: with many short tasks queued, a busy thread goes from one
attempt to the next without a thread switch. Only a thread whose body returned
takes such a hand-off, one attempt at most; every other launch goes to a parked
or a new thread. A report that is about to block (a durable store write) first
passes the kept attempt on to another thread (`hand_over`).

``async def`` bodies run to completion on a private event loop inside the
attempt's thread, and ``await ctx.acheckpoint()`` responds to stop and pause.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chongming_core import Clock
from chongming_runtime._attempt import call_body

if TYPE_CHECKING:
    from chongming_runtime._attempt import Attempt

__all__ = ["IDLE_SECONDS", "MAX_IDLE", "ThreadExecutor"]

#: How long a thread whose attempt returned waits for the next one before it exits.
IDLE_SECONDS = 5.0
#: At most this many threads wait for work; more returning threads exit at once.
MAX_IDLE = 64
_IDLE_NAME = "chongming-task-idle"


_Job = tuple[Callable[[Any], None], Any]


_local = threading.local()


class _Worker:
    """One cached daemon thread: runs the job it was given, then parks."""

    __slots__ = ("cache", "finishing", "job", "next_job", "parked", "thread")

    def __init__(self, cache: _ThreadCache, job: _Job, name: str) -> None:
        self.cache = cache
        self.job: _Job | None = job
        self.next_job: tuple[_Job, str] | None = None  # handed to itself while finishing
        self.finishing = False  # the body returned; only the report is left
        self.parked = threading.Lock()  # held while idle; released to hand over a job
        self.parked.acquire()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def _serve(self) -> None:
        _local.worker = self
        job = self.job
        while job is not None:
            self.job = None
            target, arg = job
            del job
            contextvars.Context().run(target, arg)  # a fresh context, as on a new thread
            del target, arg
            self.finishing = False
            handed, self.next_job = self.next_job, None
            if handed is not None:
                job, self.thread.name = handed
            else:
                job = self.cache.park(self)


def body_returned() -> None:
    """Mark the calling worker thread as only reporting a result: it may take a hand-off."""
    worker: _Worker | None = getattr(_local, "worker", None)
    if worker is not None:
        worker.finishing = True


def hand_over() -> None:
    """The calling thread is about to block (a durable store write, say): an attempt it
    kept for itself starts on another thread now instead of waiting for the block."""
    worker: _Worker | None = getattr(_local, "worker", None)
    if worker is None or not worker.finishing:
        return
    worker.finishing = False  # it takes no more hand-offs in this report
    kept, worker.next_job = worker.next_job, None
    if kept is not None:
        (target, arg), name = kept
        worker.cache.launch(target, arg, name)


class _ThreadCache:
    """Parked threads, most recently parked first (a cache, never a queue of work)."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, max_idle: int = MAX_IDLE) -> None:
        self.idle_seconds = idle_seconds
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []

    def launch(self, target: Callable[[Any], None], arg: Any, name: str) -> threading.Thread:
        """Run ``target(arg)`` on a parked thread, or on a new one; returns the thread.

        Called by a worker thread whose body returned (see `body_returned`), the job
        is kept for that thread, which runs it as soon as its report is done.
        """
        current: _Worker | None = getattr(_local, "worker", None)
        if current is not None and current.finishing and current.next_job is None:
            current.next_job = ((target, arg), name)
            return current.thread
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
                worker.job = (target, arg)
                worker.thread.name = name
                worker.parked.release()
                return worker.thread
        worker = _Worker(self, (target, arg), name)
        worker.thread.start()
        return worker.thread

    def park(self, worker: _Worker) -> _Job | None:
        """Called by a thread whose job returned: its next job, or None to exit."""
        with self._lock:
            if len(self._idle) >= self.max_idle:
                return None
            worker.thread.name = _IDLE_NAME
            self._idle.append(worker)
        handed = worker.parked.acquire(timeout=self.idle_seconds)
        with self._lock:
            if worker.job is None:  # timed out (or cleared) and nobody handed it a job: exit
                if worker in self._idle:
                    self._idle.remove(worker)
                return None
        if not handed:  # handed a job just as the wait ran out: take the release back
            worker.parked.acquire()
        return worker.job

    @property
    def idle_count(self) -> int:
        """How many threads are parked."""
        with self._lock:
            return len(self._idle)

    def clear(self) -> None:
        """Let every parked thread exit now and wait for them (tests count threads)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.parked.release()
        for worker in idle:
            worker.thread.join(5)


_CACHE = _ThreadCache()


def _run_attempt(attempt: Attempt) -> None:
    """Run `attempt` on this worker thread: begin, call the body, report the result."""
    if not attempt.begin(os.getpid(), in_process=True):
        return
    result = call_body(attempt.fn, attempt.context, attempt.args, attempt.kwargs)
    body_returned()
    attempt.finish(result)


class _ThreadHandle:
    __slots__ = ()

    def force_stop(self, clock: Clock) -> bool:
        return False  # Python cannot end a thread safely: the supervisor abandons it


class ThreadExecutor:
    """Run each attempt on a daemon thread of its own (the default executor).

    Threads whose attempt returned are reused for later attempts for a few
    seconds (see the module docstring); a thread is never shared by two attempts
    at once and never joined at exit.

    Example::

        run = TaskRun(my_task, executor=ThreadExecutor())
    """

    name = "thread"
    inline = False
    supports_pause = True

    def __init__(self, *, thread_name_prefix: str = "chongming-task") -> None:
        self._prefix = thread_name_prefix

    def validate(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Closures, lambdas and local functions are all fine on a thread."""

    def launch(self, attempt: Attempt) -> _ThreadHandle:
        """Hand the attempt to a thread and return at once."""
        handle = _ThreadHandle()
        attempt.handle = handle
        _CACHE.launch(_run_attempt, attempt, f"{self._prefix}-{attempt.task_id}-{attempt.number}")
        return handle

    def __repr__(self) -> str:
        return "ThreadExecutor()"
