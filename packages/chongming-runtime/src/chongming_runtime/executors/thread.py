"""`ThreadExecutor`: one daemon thread per attempt, no pool (guide §7.1, §7.3).

A pool would join its workers at interpreter exit, so one task that ignores
cancellation would keep the whole process alive, and a pool cannot give up on a
stuck worker. Each attempt therefore gets its own daemon thread; an abandoned
thread leaks, which is why such an attempt is recorded as ``lost``. The limit on
parallelism belongs to the scheduling layer, not to the executor.

``async def`` bodies run to completion on a private event loop inside the
attempt's thread, and ``await ctx.acheckpoint()`` responds to stop and pause.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chongming_core import Clock
from chongming_runtime._attempt import run_in_current_thread

if TYPE_CHECKING:
    from chongming_runtime._attempt import Attempt

__all__ = ["ThreadExecutor"]


class _ThreadHandle:
    __slots__ = ("thread",)

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread

    def force_stop(self, clock: Clock) -> bool:
        return False  # Python cannot end a thread safely: the supervisor abandons it


class ThreadExecutor:
    """Run each attempt on its own daemon thread (the default executor).

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
        """Start the attempt's thread and return at once."""
        thread = threading.Thread(
            target=run_in_current_thread,
            args=(attempt,),
            name=f"{self._prefix}-{attempt.task_id}-{attempt.number}",
            daemon=True,
        )
        handle = _ThreadHandle(thread)
        attempt.handle = handle
        thread.start()
        return handle

    def __repr__(self) -> str:
        return "ThreadExecutor()"
