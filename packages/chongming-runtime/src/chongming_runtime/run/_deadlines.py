"""Deadlines of a `TaskRun`: start/attempt/idle timeouts and the graceful window (guide §6).

Every deadline is a timer on the run's `Clock` (one timer structure per
supervisor, never a sleeping thread per task). A run without timeouts arms no
timer while it waits; a start timeout is the only timer a queued run may hold.

* The per-attempt budget counts running time only: its remainder is kept at a
  pause and re-armed on resume; the idle clock restarts on resume.
* A timeout sets the attempt's stop flag without entering ``stopping`` [R2]; it is
  recorded as ``timeout_start``/``timeout_attempt``/``timeout_idle`` (retryable).
  A start timeout before the attempt is launched cancels the task [R1].
* When the graceful window passes, a thread body is abandoned (``lost``) while a
  process is terminated, then killed [R9]; a thread that has not begun the body yet
  never will, nor will a child process not started yet, and the attempt ends as if
  the body had unwound at once (D55, D92).
"""

from __future__ import annotations

import logging

from chongming_core import Failure, FailureKind, RetryPolicy, TaskStatus, TaskTimeout
from chongming_runtime.executors._attempt import Attempt, AttemptResult
from chongming_runtime.run._run_core import RunCore

__all__ = ["Deadlines"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.runtime")

#: Where a start timeout finds a task whose body has not begun and no attempt is under way:
#: it ends ``cancelled`` (R1). A task paused before start holds no timer (its remainder is
#: kept) and a stopping one ends by its stop.
_NOT_STARTED = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})


def start_timeout_failure(
    task_id: str, limit: float, policy: RetryPolicy
) -> tuple[str, TaskTimeout, Failure]:
    """The message, error and failure of a start timeout that expired (R1)."""
    message = f"start timeout of {limit:g}s expired before the task started"
    error = TaskTimeout(message, task_id=task_id, kind=FailureKind.TIMEOUT_START.value)
    failure = Failure.of(FailureKind.TIMEOUT_START, message, retryable=policy.should_retry(error))
    return message, error, failure


class Deadlines(RunCore):
    """The timeout and graceful-window half of `TaskRun` (a mixin)."""

    __slots__ = ()

    def _arm_start_timeout(self) -> None:
        limit = self._timeout.start
        if limit is None or self._start_timeout_over or self._start_timer is not None:
            return
        origin = self._start_origin
        self._start_deadline = (self._monotonic() if origin is None else origin) + limit
        self._start_timer = self._clock.call_at(self._start_deadline, self._start_timeout_passed)

    def _end_start_timeout(self) -> None:
        self._start_timeout_over = True
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None

    def _suspend_start_timeout(self) -> None:
        if self._start_timer is None or self._start_deadline is None:
            return
        self._start_timer.cancel()
        self._start_timer = None
        self._start_remaining = max(0.0, self._start_deadline - self._monotonic())

    def _resume_start_timeout(self) -> None:
        if self._start_remaining is None or self._start_timeout_over:
            return
        self._start_deadline = self._monotonic() + self._start_remaining
        self._start_remaining = None
        self._start_timer = self._clock.call_at(self._start_deadline, self._start_timeout_passed)

    def _start_timeout_passed(self) -> None:
        force: Attempt | None = None
        retry_now = False
        with self._lock:
            if self._start_timeout_over or self._start_timer is None:
                return
            self._start_timer = None
            self._start_timeout_over = True
            status = self._machine.status
            assert self._timeout.start is not None  # armed only with a start limit
            message, _, failure = start_timeout_failure(
                self._task_id, self._timeout.start, self._policy
            )
            if status in _NOT_STARTED:  # R1; retry_wait after an attempt that never began (D91)
                self._conclude(None, self._ending(None, None, start_timeout=failure))
            elif status is _S.STARTING and self._attempt is not None:
                # a pause asked meanwhile waits for the body (D90): it never hides this
                attempt = self._attempt
                attempt.control.request_stop(message)
                self._close_attempt(attempt)
                self._leave_suspension(message)
                force = attempt
                retry_now = self._conclude(
                    attempt, self._ending(attempt, None, start_timeout=failure)
                )
            else:
                return
        if force is not None and force.handle is not None:
            force.forced = True  # before the signal: its exit may be settled at once
            force.forced = force.handle.force_stop(self._clock)
        try:
            self._deliver()
        finally:  # even when a listener interrupts the telling: the retry is due
            if retry_now:
                self._kick()

    def _arm_deadlines(self, attempt: Attempt, now: float) -> None:
        per_attempt = self._timeout.per_attempt
        if per_attempt is not None:
            remaining = attempt.per_attempt_remaining
            attempt.per_attempt_remaining = None
            attempt.per_attempt_deadline = now + (per_attempt if remaining is None else remaining)
            attempt.per_attempt_timer = self._clock.call_at(
                attempt.per_attempt_deadline,
                lambda: self._per_attempt_passed(attempt),
            )
        if self._timeout.idle is not None:
            attempt.idle_timer = self._clock.call_at(
                attempt.context.last_beat + self._timeout.idle, lambda: self._idle_check(attempt)
            )

    def _cancel_deadlines(self, attempt: Attempt) -> None:
        for timer in (attempt.per_attempt_timer, attempt.idle_timer):
            if timer is not None:
                timer.cancel()
        attempt.per_attempt_timer = attempt.idle_timer = None

    def _suspend_deadlines(self, attempt: Attempt) -> None:
        if attempt.per_attempt_deadline is not None and attempt.per_attempt_timer is not None:
            attempt.per_attempt_remaining = max(
                0.0, attempt.per_attempt_deadline - self._monotonic()
            )
        self._cancel_deadlines(attempt)

    def _resume_deadlines(self, attempt: Attempt) -> None:
        if attempt.timeout_kind is not None or attempt.control.stop_requested:
            return
        now = self._monotonic()
        attempt.context.last_beat = now
        self._arm_deadlines(attempt, now)

    def _deadline_applies(self, attempt: Attempt) -> bool:
        return (
            attempt is self._attempt
            and not attempt.closed
            and attempt.timeout_kind is None
            and self._machine.status in {_S.RUNNING, _S.PAUSING}
        )

    def _per_attempt_passed(self, attempt: Attempt) -> None:
        with self._lock:
            if not self._deadline_applies(attempt):
                return
            message = f"per-attempt timeout of {self._timeout.per_attempt:g}s expired"
            self._expire(attempt, FailureKind.TIMEOUT_ATTEMPT, message)
        self._deliver()

    def _idle_check(self, attempt: Attempt) -> None:
        with self._lock:
            if not self._deadline_applies(attempt) or self._timeout.idle is None:
                return
            deadline = attempt.context.last_beat + self._timeout.idle
            if self._monotonic() < deadline:  # it beat meanwhile: re-arm for the new deadline
                attempt.idle_timer = self._clock.call_at(
                    deadline, lambda: self._idle_check(attempt)
                )
                return
            message = f"idle timeout: no checkpoint() or heartbeat for {self._timeout.idle:g}s"
            self._expire(attempt, FailureKind.TIMEOUT_IDLE, message)
        self._deliver()

    def _expire(self, attempt: Attempt, kind: FailureKind, message: str) -> None:
        """R2: request the stop without entering ``stopping``; the status stays running."""
        attempt.timeout_kind = kind
        attempt.timeout_message = message
        self._cancel_deadlines(attempt)
        attempt.control.request_stop(message)
        self._notify_all()
        if attempt.graceful_timer is None:
            attempt.graceful_timer = self._clock.call_later(
                self._graceful, lambda: self._graceful_window_passed(attempt)
            )
        _log.warning(
            "task %r attempt %s: %s; stop requested", self._task_id, attempt.number, message
        )

    # ================================================================ graceful window
    def _graceful_window_passed(self, attempt: Attempt) -> None:
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return
            attempt.graceful_timer = None
            handle = attempt.handle
        if handle is not None:
            attempt.forced = True  # before the signal: its exit may be settled at once
            if handle.force_stop(self._clock):
                return  # a child process is being terminated; its exit will be reported
            attempt.forced = False
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return
            self._close_attempt(attempt)
            self._leave_suspension("the graceful window passed")
            if not attempt.started:
                # no body has begun, and now none will: a thread refuses a closed attempt
                # at its start (D55), a child process not started yet never is (D92). A
                # body stopped before it began, not one abandoned that may still be running
                retry_now = self._end_unbegun(attempt)
            else:
                retry_now = False
                self._abandon(attempt)
        try:
            self._deliver()
        finally:  # even when a listener interrupts the telling: the retry is due
            if retry_now:
                self._kick()

    def _end_unbegun(self, attempt: Attempt) -> bool:
        """End an attempt whose body had not begun when its graceful window passed, as if
        it had unwound at once; True when the next attempt is due. Call under the lock,
        with the attempt closed."""
        if self._machine.status is not _S.STOPPING:  # a cancel: ends as the body unwound
            return self._settle(attempt, AttemptResult.cancelled())
        how = f"its body had not begun when the graceful window of {self._graceful:g}s passed"
        failure = Failure.of(
            FailureKind.CANCELLED,
            f"{self._stop_text()}; {how}, and now never will",
            retryable=False,
        )
        self._record(
            self._machine.mark_stopped(failure=failure, actor=self._actor, reason=self._stop_reason)
        )
        return False

    def _abandon(self, attempt: Attempt) -> None:
        """End a body that did not unwind in its graceful window: ``lost``. Call under the
        lock, with the attempt closed."""
        self._conclude(attempt, self._ending(attempt, None))
