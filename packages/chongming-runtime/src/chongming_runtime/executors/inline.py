"""`InlineExecutor`: runs the body in the caller's thread (guide §7.2).

Zero scheduling cost, fully synchronous: ``TaskRun.start()`` returns once the
task is terminal. It deliberately breaks the "launch must not block" rule, so
an asynchronous scheduler must not use it, and it cannot be paused: ``pause()``
returns False rather than pretending.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chongming_core import Clock
from chongming_runtime.executors._attempt import run_in_current_thread

if TYPE_CHECKING:
    from chongming_runtime.executors._attempt import Attempt

__all__ = ["InlineExecutor"]


class _InlineHandle:
    __slots__ = ()

    def force_stop(self, clock: Clock) -> bool:
        return False  # the caller's own thread cannot be ended either


class InlineExecutor:
    """Run each attempt synchronously in the calling thread.

    Example::

        outcome = run_task(trivial_step, executor=InlineExecutor())
    """

    name = "inline"
    inline = True
    supports_pause = False

    def validate(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Any callable will do."""

    def launch(self, attempt: Attempt) -> _InlineHandle:
        """Run `attempt` to its end, here and now."""
        handle = _InlineHandle()
        attempt.handle = handle
        run_in_current_thread(attempt)
        return handle

    def __repr__(self) -> str:
        return "InlineExecutor()"
