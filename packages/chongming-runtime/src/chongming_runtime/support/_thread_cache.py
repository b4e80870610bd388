"""The thread cache: a low-level primitive, the one way the runtime gets a thread.

Like trio's ``_core/_thread_cache.py``, this module has one entry point that the
higher layers build on: `run_elsewhere` runs a call soon on another daemon
thread. The `ThreadExecutor` runs each attempt through it, and so do the
controller's scheduler, `TaskRun`'s delivery of a result and the supervisor's
hand-off of a dispatch. It imports nothing else of the runtime but the helper
that logs a job that raised, so any of them may use it without a cycle.

It exists for two reasons. No thread per waiting task (architecture principle
4): a thread is taken only when there is work for it, and starting one is slow
(``Thread.start()`` waits until the new thread runs, which under GIL contention
takes a scheduler round), so a thread whose job *returned* parks for a few
seconds and the next job is handed to it. And a thread handed over at a launch:
a thread that is only reporting its attempt's result runs the one attempt that
its report released instead of waking another thread.

This is a cache, not a pool, and the reasons of guide §7.3 against a pool still
hold:

* no size limit and no queue: a job never waits for a thread; when no parked
  thread is there, a new one is started;
* every thread is a daemon thread, never joined at exit;
* a thread whose job never returned is never handed anything again (only a
  thread that came back parks), so an abandoned attempt just leaks its thread;
* parked threads exit after `IDLE_SECONDS`; at most `MAX_IDLE` are kept;
* each job runs in a fresh `contextvars.Context`, as on a new thread, and a
  parked thread is renamed ``chongming-task-idle``.

A thread whose body has returned (`body_returned`) and that is only reporting
the result may, in that report, free a slot that releases the next queued
attempt. The scheduler starts that one attempt through `keeping_launch`, which
keeps it for this same thread: the thread runs it right after the report instead
of waking another one, so with many short tasks queued a busy thread goes from
one attempt to the next without a thread switch. Only that launch is kept (never
one made by a listener or while the body is still on the stack, never more than
one), and a report that is about to block — a durable store write, a listener
the runtime does not know — first passes it on to another thread (`hand_over`);
so does a report that raises.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import Any

from chongming_runtime.support._background import carry_on

__all__ = [
    "IDLE_SECONDS",
    "MAX_IDLE",
    "body_returned",
    "hand_over",
    "keeping_launch",
    "run_elsewhere",
]

#: How long a thread whose job returned waits for the next one before it exits.
IDLE_SECONDS = 5.0
#: At most this many threads wait for work; more returning threads exit at once.
MAX_IDLE = 64
_IDLE_NAME = "chongming-task-idle"
_log = logging.getLogger("chongming_task.runtime")


_Job = tuple[Callable[[Any], None], Any]


_local = threading.local()


class _Worker:
    """One cached daemon thread: runs the job it was given, then parks."""

    __slots__ = ("body_done", "cache", "job", "keeping", "next_job", "parked", "thread")

    def __init__(self, cache: _ThreadCache, job: _Job, name: str) -> None:
        self.cache = cache
        self.job: _Job | None = job
        self.next_job: tuple[_Job, str] | None = None  # kept for itself (see keeping_launch)
        self.body_done = False  # the body returned; only the report is left
        self.keeping = False  # inside keeping_launch: the next launch is kept
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
            try:
                contextvars.Context().run(target, arg)  # a fresh context, as on a new thread
            except BaseException as exc:
                self.pass_on()  # the kept attempt must not wait behind what follows
                # logged, and the thread goes on to its next job (D65): a job that raised
                # (a report, a release of a pipeline node) took nothing of the thread with it
                carry_on(f"the job of thread {self.thread.name!r}", exc, _log, None)
            finally:
                self.body_done = self.keeping = False
            del target, arg
            handed, self.next_job = self.next_job, None
            if handed is not None:
                job, self.thread.name = handed
            else:
                job = self.cache.park(self)

    def pass_on(self) -> None:
        """Start a kept job on another thread now, and keep nothing more in this report."""
        self.body_done = self.keeping = False
        kept, self.next_job = self.next_job, None
        if kept is not None:
            (target, arg), name = kept
            self.cache.launch(target, arg, name)


def body_returned() -> None:
    """Mark the calling worker thread as only reporting a result (see `keeping_launch`)."""
    worker: _Worker | None = getattr(_local, "worker", None)
    if worker is not None:
        worker.body_done = True


def keeping_launch(call: Callable[[], Any]) -> None:
    """Run `call`; when the caller is a worker thread whose body returned, the first
    attempt that `call` launches is kept for that thread, which runs it right after its
    report instead of waking another thread.

    The scheduler wraps in this the start of the one run that a finishing task's freed
    slot released; nothing else a report does (listeners, pipeline releases) is kept.
    """
    worker: _Worker | None = getattr(_local, "worker", None)
    if worker is None or not worker.body_done or worker.next_job is not None:
        call()
        return
    worker.keeping = True
    try:
        call()
    finally:
        worker.keeping = False


def hand_over() -> None:
    """The calling thread may block now (a durable store write, a listener): an attempt it
    kept for itself starts on another thread at once instead of waiting behind it."""
    worker: _Worker | None = getattr(_local, "worker", None)
    if worker is not None and worker.body_done:
        worker.pass_on()


class _ThreadCache:
    """Parked threads, most recently parked first (a cache, never a queue of work)."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, max_idle: int = MAX_IDLE) -> None:
        self.idle_seconds = idle_seconds
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []

    def launch(self, target: Callable[[Any], None], arg: Any, name: str) -> threading.Thread:
        """Run ``target(arg)`` on a parked thread, or on a new one; returns the thread.

        Inside `keeping_launch` on a worker thread whose body returned, the job is kept
        for that thread, which runs it as soon as its report is done.
        """
        current: _Worker | None = getattr(_local, "worker", None)
        if current is not None and current.keeping and current.next_job is None:
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


def run_elsewhere(call: Callable[[], None], name: str) -> None:
    """Run `call` soon on another (cached) daemon thread, never on the caller's."""
    _CACHE.launch(_call, call, name)


def _call(call: Callable[[], None]) -> None:
    call()
