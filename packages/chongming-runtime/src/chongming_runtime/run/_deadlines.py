"""Deadlines of a `TaskRun`: start/attempt/idle timeouts and the graceful window (guide §6).

Every deadline is a timer on the run's `Clock` (one timer structure per
supervisor, never a sleeping thread per task). `RunDeadlines` keeps them for one
run, which makes it when it first needs a deadline: a run without timeouts whose
running body is never stopped or cancelled makes none, and a start timeout is the
only timer a queued run may hold. It acts on its run through `TimedRun`.

* The per-attempt budget counts running time only: its remainder is kept at a
  pause and re-armed on resume; the idle clock restarts on resume.
* A timeout sets the attempt's stop flag without entering ``stopping`` [R2]; it is
  recorded as ``timeout_start``/``timeout_attempt``/``timeout_idle`` (retryable).
  A start timeout before the attempt is launched cancels the task [R1].
* When the graceful window passes, a thread body is abandoned (``lost``) while a
  process is terminated, then killed [R9]; a thread that has not begun the body yet
  never will, nor will a child process not started yet, and the attempt ends as if
  the body had unwound at once (D55, D92). Which of these it is, `decide` says.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from chongming_core import (
    Failure,
    FailureKind,
    RetryPolicy,
    StateMachine,
    TaskStatus,
    TaskTimeout,
    TimerHandle,
)
from chongming_runtime.executors._attempt import Attempt
from chongming_runtime.run._setup import RunSetup

__all__ = ["RunDeadlines", "TimedRun", "start_timeout_failure"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.runtime")

#: Where a start timeout finds a task whose body has not begun and no attempt is under way:
#: it ends ``cancelled`` (R1). A task paused before start holds no timer (its remainder is
#: kept) and a stopping one ends by its stop.
_NOT_STARTED = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})
#: where the per-attempt and idle timeouts act: a body that runs (a paused one holds no timer)
_TIMED = frozenset({_S.RUNNING, _S.PAUSING})


def start_timeout_failure(
    task_id: str, limit: float, policy: RetryPolicy
) -> tuple[str, TaskTimeout, Failure]:
    """The message, error and failure of a start timeout that expired (R1)."""
    message = f"start timeout of {limit:g}s expired before the task started"
    error = TaskTimeout(message, task_id=task_id, kind=FailureKind.TIMEOUT_START.value)
    failure = Failure.of(FailureKind.TIMEOUT_START, message, retryable=policy.should_retry(error))
    return message, error, failure


class TimedRun(Protocol):
    """What `RunDeadlines` needs of its run (a `TaskRun`): its settings and the state a
    deadline is judged on, which it only reads (under the lock), and four acts."""

    # settings
    _setup: RunSetup
    # state, read under the lock
    _lock: threading.Lock
    _machine: StateMachine
    _attempt: Attempt | None

    def _end_attempt(
        self, attempt: Attempt | None, why: str, *, start_timeout: Failure | None = None
    ) -> bool:
        """End `attempt` (None: none is under way) with no result from its body, as
        `decide` says, leaving a pause for reason `why`; True when the next attempt is due
        at once. Under the lock."""
        ...

    def _wake_held(self) -> None:
        """Wake a body held at its checkpoint to see a stop. Under the lock."""
        ...

    def _deliver(self) -> None:
        """Tell the listeners what was recorded. Outside the lock."""
        ...

    def _deliver_then_kick(self, retry_due: bool) -> None:
        """`_deliver`, then start the next attempt if `retry_due`. Outside the lock."""
        ...


class RunDeadlines:
    """The deadlines of one run: its start timeout, and its attempts' per-attempt, idle and
    graceful-window timers (kept on each `Attempt`, which cancels them when it closes).

    Every method but the timers' callbacks is called under the run's lock.
    """

    __slots__ = (
        "_run",
        "_start_deadline",
        "_start_over",
        "_start_remaining",
        "_start_timer",
        "start_origin",
    )

    def __init__(self, run: TimedRun) -> None:
        self._run = run
        #: when the start timeout began to count (monotonic; None: at ``start()``). A
        #: pipeline node counts from its pipeline's submission, blocked time included (R1)
        self.start_origin: float | None = None
        self._start_timer: TimerHandle | None = None
        self._start_deadline: float | None = None
        self._start_remaining: float | None = None  # kept while paused before start
        self._start_over = False  # the body began, or the start timeout passed

    # ================================================================ start timeout
    def arm_start(self) -> None:
        """Arm the start timeout, if the run has one and it is not armed or over yet."""
        run = self._run
        limit = run._setup.timeout.start
        if limit is None or self._start_over or self._start_timer is not None:
            return
        origin = self.start_origin
        self._start_deadline = (run._setup.monotonic() if origin is None else origin) + limit
        self._start_timer = run._setup.clock.call_at(self._start_deadline, self._start_passed)

    def end_start(self) -> None:
        """The body began: the start timeout is over."""
        self._start_over = True
        self.cancel_start()

    def cancel_start(self) -> None:
        """Cancel the start timer (the run ended)."""
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None

    def suspend_start(self) -> None:
        """Paused before start: keep what is left of the start timeout, arm nothing."""
        if self._start_timer is None or self._start_deadline is None:
            return
        self._start_timer.cancel()
        self._start_timer = None
        self._start_remaining = max(0.0, self._start_deadline - self._run._setup.monotonic())

    def resume_start(self) -> None:
        """Resumed before start: re-arm what was left of the start timeout."""
        if self._start_remaining is None or self._start_over:
            return
        run = self._run
        self._start_deadline = run._setup.monotonic() + self._start_remaining
        self._start_remaining = None
        self._start_timer = run._setup.clock.call_at(self._start_deadline, self._start_passed)

    def _start_passed(self) -> None:
        run = self._run
        force: Attempt | None = None
        retry_now = False
        with run._lock:
            if self._start_over or self._start_timer is None:
                return
            self._start_timer = None
            self._start_over = True
            status = run._machine.status
            limit = run._setup.timeout.start
            assert limit is not None  # armed only with a start limit
            message, _, failure = start_timeout_failure(
                run._machine.task_id, limit, run._setup.policy
            )
            attempt = run._attempt
            if status in _NOT_STARTED:  # R1; retry_wait after an attempt that never began (D91)
                retry_now = run._end_attempt(None, message, start_timeout=failure)
            elif status is _S.STARTING and attempt is not None:
                # a pause asked meanwhile waits for the body (D90): it never hides this
                attempt.control.request_stop(message)
                retry_now = run._end_attempt(attempt, message, start_timeout=failure)
                force = attempt
            else:
                return
        if force is not None and force.handle is not None:
            force.forced = True  # before the signal: its exit may be settled at once
            force.forced = force.handle.force_stop(run._setup.clock)
        run._deliver_then_kick(retry_now)

    # ================================================================ an attempt's timeouts
    def arm(self, attempt: Attempt, now: float) -> None:
        """The body runs (began, or resumed): arm its per-attempt and idle timeouts."""
        run = self._run
        timeout = run._setup.timeout
        if timeout.per_attempt is not None:
            remaining = attempt.per_attempt_remaining
            attempt.per_attempt_remaining = None
            budget = timeout.per_attempt if remaining is None else remaining
            attempt.per_attempt_deadline = now + budget
            attempt.per_attempt_timer = run._setup.clock.call_at(
                attempt.per_attempt_deadline, lambda: self._per_attempt_passed(attempt)
            )
        if timeout.idle is not None:
            attempt.idle_timer = run._setup.clock.call_at(
                attempt.context.last_beat + timeout.idle, lambda: self._idle_check(attempt)
            )

    @staticmethod
    def cancel(attempt: Attempt) -> None:
        """Cancel the attempt's per-attempt and idle timers (a stop or a timeout asked it to
        stop: only its graceful window is left)."""
        for timer in (attempt.per_attempt_timer, attempt.idle_timer):
            if timer is not None:
                timer.cancel()
        attempt.per_attempt_timer = attempt.idle_timer = None

    def suspend(self, attempt: Attempt) -> None:
        """The body is paused: keep what is left of its per-attempt budget, arm nothing."""
        if attempt.per_attempt_deadline is not None and attempt.per_attempt_timer is not None:
            attempt.per_attempt_remaining = max(
                0.0, attempt.per_attempt_deadline - self._run._setup.monotonic()
            )
        self.cancel(attempt)

    def _applies(self, attempt: Attempt) -> bool:
        run = self._run
        return (
            attempt is run._attempt
            and not attempt.closed
            and attempt.timeout_kind is None
            and run._machine.status in _TIMED
        )

    def _per_attempt_passed(self, attempt: Attempt) -> None:
        run = self._run
        with run._lock:
            if not self._applies(attempt):
                return
            message = f"per-attempt timeout of {run._setup.timeout.per_attempt:g}s expired"
            self._expire(attempt, FailureKind.TIMEOUT_ATTEMPT, message)
        run._deliver()

    def _idle_check(self, attempt: Attempt) -> None:
        run = self._run
        with run._lock:
            idle = run._setup.timeout.idle
            if not self._applies(attempt) or idle is None:
                return
            deadline = attempt.context.last_beat + idle
            if run._setup.monotonic() < deadline:  # it beat meanwhile: re-arm for the new deadline
                attempt.idle_timer = run._setup.clock.call_at(
                    deadline, lambda: self._idle_check(attempt)
                )
                return
            message = f"idle timeout: no checkpoint() or heartbeat for {idle:g}s"
            self._expire(attempt, FailureKind.TIMEOUT_IDLE, message)
        run._deliver()

    def _expire(self, attempt: Attempt, kind: FailureKind, message: str) -> None:
        """R2: request the stop without entering ``stopping``; the status stays running."""
        attempt.timeout_kind = kind
        attempt.timeout_message = message
        self.cancel(attempt)
        attempt.control.request_stop(message)
        self._run._wake_held()
        self.keep_graceful_window(attempt)
        _log.warning(
            "task %r attempt %s: %s; stop requested", attempt.task_id, attempt.number, message
        )

    # ================================================================ graceful window
    def keep_graceful_window(self, attempt: Attempt) -> None:
        """The attempt was asked to stop: give its body the graceful window to unwind (one
        window per attempt: a second request does not extend it)."""
        if attempt.graceful_timer is None:
            attempt.graceful_timer = self._run._setup.clock.call_later(
                self._run._setup.graceful, lambda: self._graceful_window_passed(attempt)
            )

    def _graceful_window_passed(self, attempt: Attempt) -> None:
        run = self._run
        with run._lock:
            if attempt is not run._attempt or attempt.closed:
                return
            attempt.graceful_timer = None
            handle = attempt.handle
            if run._setup.executor.inline and attempt.started:
                # the body runs on the caller's own thread, inside `start()`: it cannot be
                # abandoned, and nobody is told anything before it returns, so its end is
                # known and decides (a value after a timeout still fails the attempt)
                return
        if handle is not None:
            attempt.forced = True  # before the signal: its exit may be settled at once
            if handle.force_stop(run._setup.clock):
                return  # a child process is being terminated; its exit will be reported
            attempt.forced = False
        with run._lock:
            if attempt is not run._attempt or attempt.closed:
                return
            # a body that began is abandoned (`lost`: it may still run); one that had not
            # begun never will (a thread refuses a closed attempt at its start, D55; a child
            # process not started yet never is, D92): it ends as if it had unwound at once
            retry_now = run._end_attempt(attempt, "the graceful window passed")
        run._deliver_then_kick(retry_now)
