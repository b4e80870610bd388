"""`ThreadExecutor`: every attempt on its own daemon thread, no pool (guide §7.1, §7.3).

A pool would join its workers at interpreter exit, so one task that ignores
cancellation would keep the whole process alive, and a pool cannot give up on a
stuck worker. Each attempt therefore gets a daemon thread of its own; an
abandoned thread leaks, which is why such an attempt is recorded as ``lost``.
The limit on parallelism belongs to the scheduling layer, not to the executor.

The thread comes from the runtime's thread cache (`chongming_runtime.support._thread_cache`,
whose docstring tells why it is a cache and not a pool): a thread whose attempt
*returned* parks for a few seconds and the next attempt is handed to it, so a
thread is never shared by two attempts at once, and an attempt never waits for a
thread. When the body returns, the attempt tells the cache (`body_returned`) so
that the one attempt its report releases can run on this same thread.

``async def`` bodies run to completion on a private event loop inside the
attempt's thread, and ``await ctx.acheckpoint()`` responds to stop and pause.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from chongming_core import Clock
from chongming_runtime.executors._attempt import call_body
from chongming_runtime.support._thread_cache import (
    IDLE_SECONDS,
    MAX_IDLE,
    body_returned,
    run_elsewhere,
)

if TYPE_CHECKING:
    from chongming_runtime.executors._attempt import Attempt

__all__ = ["IDLE_SECONDS", "MAX_IDLE", "ThreadExecutor"]


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
        name = f"{self._prefix}-{attempt.task_id}-{attempt.number}"
        run_elsewhere(partial(_run_attempt, attempt), name)
        return handle

    def __repr__(self) -> str:
        return "ThreadExecutor()"
