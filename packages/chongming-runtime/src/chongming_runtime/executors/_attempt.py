"""One attempt: what an executor receives, and how it reports back.

An `Attempt` carries the body, its arguments, the attempt's own context and
control token, and the supervisor's bookkeeping (timers, timeout cause). An
executor calls `begin()` when the body is about to run (or runs, in a child
process) and `finish()` with an `AttemptResult` when it ended. Late calls of an
attempt the supervisor has already closed (an abandoned thread that finally
returned) are ignored.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chongming_core import Clock, Failure, FailureKind, TaskCancelled, TimerHandle
from chongming_runtime.body._context import RuntimeContext
from chongming_runtime.body._control import AttemptControl

__all__ = [
    "Attempt",
    "AttemptHandle",
    "AttemptResult",
    "ResultKind",
    "call_body",
    "run_in_current_thread",
]


@runtime_checkable
class AttemptHandle(Protocol):
    """The executor's grip on one running attempt."""

    def force_stop(self, clock: Clock) -> bool:
        """The graceful window is over: end the attempt by force if possible.

        Returns True when the carrier is being ended and a result will still be
        reported (a child process is terminated, then killed); False when it
        cannot be ended (a thread), and the supervisor abandons it if its body
        began. An out-of-process carrier returns False only when it was not started
        yet, and then it never is (D92). Any further deadline (terminate, then kill)
        is a timer on `clock`.
        """
        ...


class ResultKind(enum.Enum):
    """How an attempt's body ended."""

    RETURNED = "returned"
    CANCELLED = "cancelled"
    RAISED = "raised"
    CRASHED = "crashed"


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """The end of one attempt as the executor saw it.

    Attributes:
        kind: returned / cancelled (``TaskCancelled``) / raised / crashed (a child died).
        value: the return value (RETURNED).
        exception: the exception raised by the body, when it is available in this process.
        failure: a failure already described by the executor (a child's exception, a crash).
        exception_types: the qualified names of the exception's classes (most derived
            first), for a retry policy to judge an exception that could not cross a process
            boundary whole.
    """

    kind: ResultKind
    value: Any = None
    exception: BaseException | None = None
    failure: Failure | None = None
    exception_types: tuple[str, ...] = ()

    @classmethod
    def returned(cls, value: Any) -> AttemptResult:
        """The body returned `value`."""
        return cls(ResultKind.RETURNED, value=value)

    @classmethod
    def cancelled(cls, exc: BaseException | None = None) -> AttemptResult:
        """The body unwound with `TaskCancelled`."""
        return cls(ResultKind.CANCELLED, exception=exc)

    @classmethod
    def raised(
        cls,
        exc: BaseException | None,
        failure: Failure | None = None,
        *,
        exception_types: tuple[str, ...] = (),
    ) -> AttemptResult:
        """The body raised `exc` (or, across a process boundary, the `failure` describing it
        and the names of the exception's classes)."""
        return cls(
            ResultKind.RAISED, exception=exc, failure=failure, exception_types=exception_types
        )

    @classmethod
    def crashed(cls, message: str) -> AttemptResult:
        """The carrier died without reporting a result (kind ``nonzero_exit``)."""
        return cls(ResultKind.CRASHED, failure=Failure.of(FailureKind.NONZERO_EXIT, message))


class _Supervisor(Protocol):
    def _attempt_attached(self, attempt: Attempt, handle: AttemptHandle) -> bool: ...

    def _attempt_began(self, attempt: Attempt, pid: int | None, *, in_process: bool) -> bool: ...

    def _attempt_finished(self, attempt: Attempt, result: AttemptResult) -> None: ...

    def _attempt_paused_remotely(self, attempt: Attempt, generation: int) -> None: ...


class Attempt:
    """One execution of a task body, handed to an executor by the supervisor."""

    __slots__ = (
        "_supervisor",
        "abandoned",
        "args",
        "beat_shown",
        "closed",
        "context",
        "control",
        "fn",
        "forced",
        "graceful_timer",
        "handle",
        "idle_timer",
        "kwargs",
        "number",
        "per_attempt_deadline",
        "per_attempt_remaining",
        "per_attempt_timer",
        "pid",
        "started",
        "timeout_kind",
        "timeout_message",
    )

    def __init__(
        self,
        supervisor: _Supervisor,
        *,
        number: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        context: RuntimeContext,
        control: AttemptControl,
    ) -> None:
        self._supervisor = supervisor
        self.number = number
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.context = context
        self.control = control
        self.closed = False
        self.started = False
        self.pid: int | None = None
        # the context's `last_beat` that the machine's snapshot already shows as its
        # heartbeat (set when running is recorded): no copy is composed until a new beat
        self.beat_shown: float | None = None
        self.handle: AttemptHandle | None = None
        self.per_attempt_timer: TimerHandle | None = None
        self.per_attempt_deadline: float | None = None
        self.per_attempt_remaining: float | None = None
        self.idle_timer: TimerHandle | None = None
        self.graceful_timer: TimerHandle | None = None
        self.timeout_kind: FailureKind | None = None
        self.timeout_message: str | None = None
        self.forced = False  # its carrier was ended by force (a graceful window ran out)
        self.abandoned = False  # its thread was left running when the window ran out

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.context.task_id

    def attach(self, handle: AttemptHandle) -> bool:
        """Give the supervisor the handle of a carrier about to be started; False: the
        attempt has already ended (its window passed, its start timed out), so no carrier
        may be started for it."""
        return self._supervisor._attempt_attached(self, handle)

    def begin(self, pid: int | None, *, in_process: bool = True) -> bool:
        """The body is about to run (``in_process``) or runs in a child; False: do not run it."""
        return self._supervisor._attempt_began(self, pid, in_process=in_process)

    def finish(self, result: AttemptResult) -> None:
        """Report how the body ended."""
        self._supervisor._attempt_finished(self, result)

    def confirm_pause(self, generation: int) -> None:
        """A child process reports it is suspended at a checkpoint for pause `generation`."""
        self._supervisor._attempt_paused_remotely(self, generation)

    def release(self) -> None:
        """Unlink this attempt's parts once its carrier is done with it (its body returned,
        or never ran): its objects then go with their last reference instead of living on
        in reference cycles until a garbage collection comes for them."""
        self.control.unbind()
        self.handle = None

    def cancel_timers(self) -> None:
        """Cancel every deadline of this attempt."""
        for timer in (self.per_attempt_timer, self.idle_timer, self.graceful_timer):
            if timer is not None:
                timer.cancel()
        self.per_attempt_timer = self.idle_timer = self.graceful_timer = None


def call_body(
    fn: Callable[..., Any], ctx: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> AttemptResult:
    """Run a body in this thread; an ``async def`` body runs to completion on a private loop."""
    try:
        value = fn(ctx, *args, **kwargs)
        if inspect.iscoroutine(value):
            value = asyncio.run(value)
    except TaskCancelled as exc:
        return AttemptResult.cancelled(exc)
    except BaseException as exc:  # the body's failure is data, whatever it is
        return AttemptResult.raised(exc)
    return AttemptResult.returned(value)


def run_in_current_thread(attempt: Attempt) -> None:
    """Run `attempt` here: begin, call the body, report the result."""
    if not attempt.begin(os.getpid(), in_process=True):
        return
    attempt.finish(call_body(attempt.fn, attempt.context, attempt.args, attempt.kwargs))
