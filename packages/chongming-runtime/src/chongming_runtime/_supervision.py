"""The lifecycle decisions of a `TaskRun`: stop, pause, retries and timeouts (guide §4–§6).

Rules implemented here (rulings in brackets):

* Stop is request -> graceful window -> fallback. Not yet running (pending,
  queued, retry_wait, paused before start) -> ``stopped`` at once. Running ->
  ``stopping``; the body unwinds at a checkpoint -> ``stopped`` (kind
  ``cancelled``); it returns a value -> ``succeeded``; the window passes -> a
  thread is abandoned (``lost``) while a process is terminated, then killed
  (``stopped``) [R9]. A task paused in place goes ``paused -> running ->
  stopping`` because its body is still on the stack [R3].
* Pause is confirmed only by the body blocking at a checkpoint (``pausing ->
  paused``); a window without a checkpoint aborts it (``runtime:pause_aborted``).
  Queued/retry-waiting tasks pause at once and hold nothing; they resume to
  ``queued`` [R3].
* While paused, no timeout runs: the per-attempt budget counts running time
  only (its remainder is kept at the pause and re-armed on resume), and the idle
  clock restarts on resume.
* A timeout sets the attempt's stop flag without entering ``stopping`` [R2]; it is
  recorded as ``timeout_start``/``timeout_attempt``/``timeout_idle`` (retryable).
  A start timeout before the attempt is launched cancels the task [R1].
* Retries: ``retry_wait`` with the backoff as a clock timer; ``TaskCancelled`` is
  never retried; a stop never retries.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from chongming_core import (
    Clock,
    ConfigurationError,
    Failure,
    FailureKind,
    Progress,
    RetryPolicy,
    StateMachine,
    TaskExecutionError,
    TaskSnapshot,
    TaskStatus,
    TaskTimeout,
    Timeout,
    TimerHandle,
    Transition,
)
from chongming_runtime._attempt import Attempt, AttemptResult, ResultKind
from chongming_runtime._command import CommandFailed
from chongming_runtime._listeners import RunEvent, RunListener
from chongming_runtime._results import result_failure, result_problem
from chongming_runtime.executors._base import Executor

if TYPE_CHECKING:
    from chongming_runtime._task_run import TaskRun

__all__ = ["Supervision"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.runtime")

# Triggers the runtime adds on top of the state machine's defaults.
_STOP_TRIGGER = "control:stop"
_RESUME_TRIGGER = "control:resume"
_ENDED_WHILE_PAUSED = "runtime:ended_while_paused"
_CANCEL_TRIGGER = "orchestrator:cancel"

_BEFORE_START = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})


class _PauseTicket:
    """One pending ``pause()``: resolved True by the body, False by the window or a stop."""

    __slots__ = ("event", "result", "timer")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: bool | None = None
        self.timer: TimerHandle | None = None


class Supervision:
    """The lifecycle half of `TaskRun` (a mixin; `TaskRun` provides the state below)."""

    _machine: StateMachine
    _executor: Executor
    _policy: RetryPolicy
    _timeout: Timeout
    _graceful: float
    _pause_window: float
    _clock: Clock
    _monotonic: Callable[[], float]
    _actor: str
    _task_id: str
    _lock: threading.Lock
    _cond: threading.Condition
    _wakeup: threading.Event
    _listeners: list[RunListener]
    _outbox: list[RunEvent]
    _admission: Callable[[TaskRun], None] | None
    _logs: deque[str]
    _upstream: Mapping[str, Any]

    def _init_supervision(self) -> None:
        self._attempt: Attempt | None = None
        self._progress: Progress | None = None
        self._start_requested = False
        self._admitted = False
        self._admission_due = False
        self._dispatching = False
        self._redispatch = False
        self._retry_due = False
        self._backoff_timer: TimerHandle | None = None
        self._start_timer: TimerHandle | None = None
        self._start_deadline: float | None = None
        self._start_remaining: float | None = None
        self._start_timeout_over = False
        self._pause_ticket: _PauseTicket | None = None
        self._stop_reason: str | None = None
        self._cancel_reason: str | None = None

    # Provided by TaskRun.
    def _compose(self) -> TaskSnapshot:
        raise NotImplementedError

    def _record(self, transition: Transition) -> None:
        raise NotImplementedError

    def _deliver(self) -> None:
        raise NotImplementedError

    def _new_attempt(self) -> Attempt:
        raise NotImplementedError

    # ================================================================ start / dispatch
    def start(self) -> None:
        """Start the supervised execution; returns at once (inline: once terminal).

        Raises:
            ConfigurationError: `start()` was already called, or the task is terminal.
        """
        with self._lock:
            status = self._machine.status
            if self._start_requested:
                raise ConfigurationError(
                    f"TaskRun.start() was already called for task {self._task_id!r}; a run "
                    "starts once (create a new TaskRun with a new task_id to run it again)"
                )
            if status.is_terminal:
                raise ConfigurationError(
                    f"task {self._task_id!r} is already {status.value}; it cannot be started"
                )
            self._start_requested = True
            if status in {_S.PENDING, _S.BLOCKED}:
                self._record(self._machine.mark_queued(actor=self._actor))
            self._arm_start_timeout()
        self._deliver()
        if self._executor.inline:
            self._drive_inline()
        else:
            self._dispatch()

    def dispatch(self) -> None:
        """Admit the next attempt (for schedulers that passed ``admission=``)."""
        with self._lock:
            self._admitted = True
        self._kick()

    def _kick(self) -> None:
        if self._executor.inline:
            self._wakeup.set()
        else:
            self._dispatch()

    def _drive_inline(self) -> None:
        # The inline executor carries every attempt in this (the caller's) thread;
        # between attempts this thread waits on an event that timers and controls set.
        while True:
            self._wakeup.clear()
            self._dispatch()
            if self._machine.status.is_terminal:
                break
            self._wakeup.wait()
        self._deliver()

    def _dispatch(self) -> None:
        with self._lock:
            if self._dispatching:
                self._redispatch = True
                return
            self._dispatching = True
        try:
            while True:
                with self._lock:
                    self._redispatch = False
                    attempt = self._next_attempt()
                    admission_due, self._admission_due = self._admission_due, False
                self._deliver()
                if admission_due and self._admission is not None:
                    self._admission(self)  # type: ignore[arg-type]
                if attempt is not None:
                    self._launch(attempt)
                    continue
                with self._lock:
                    if not self._redispatch:
                        self._dispatching = False
                        return
        except BaseException:
            with self._lock:
                self._dispatching = False
            raise

    def _next_attempt(self) -> Attempt | None:
        """Move to ``starting`` and build the next attempt if one is due. Under the lock."""
        status = self._machine.status
        if not self._start_requested:
            return None
        if status is _S.RETRY_WAIT:
            if not self._retry_due:
                return None
            self._retry_due = False
            if self._admission is not None:
                self._record(self._machine.mark_queued(actor=self._actor, reason="retry due"))
                self._admitted = False
                self._admission_due = True
                return None
        elif status is _S.QUEUED:
            if self._admission is not None and not self._admitted:
                self._admission_due = True
                return None
        else:
            return None
        self._admitted = False
        self._record(self._machine.mark_starting(executor=self._executor.name, actor=self._actor))
        self._progress = None
        attempt = self._new_attempt()
        self._attempt = attempt
        return attempt

    def _launch(self, attempt: Attempt) -> None:
        try:
            self._executor.launch(attempt)
        except BaseException as exc:  # e.g. no thread or process could be started
            self._attempt_finished(attempt, AttemptResult.raised(exc))

    # ================================================================ executor callbacks
    def _attempt_began(self, attempt: Attempt, pid: int | None, *, in_process: bool) -> bool:
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return False
            status = self._machine.status
            skip = in_process and (status is _S.STOPPING or self._cancel_reason is not None)
            if not skip:
                attempt.started = True
                attempt.pid = pid
                now = self._monotonic()
                attempt.context.last_beat = now
                self._end_start_timeout()
                if status is _S.STARTING:
                    self._record(self._machine.mark_running(pid=pid, actor=self._actor))
                if status is not _S.STOPPING:
                    self._arm_deadlines(attempt, now)
        self._deliver()
        if skip:  # stopped before its body began: the body never runs
            self._attempt_finished(attempt, AttemptResult.cancelled())
            return False
        return True

    def _hold_at_checkpoint(self, attempt: Attempt) -> None:
        """The body reached a checkpoint with a pause requested: confirm it and block here."""
        control = attempt.control
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return
            if not control.pause_requested or control.stop_requested:
                return
            if self._machine.status is _S.PAUSING:
                self._confirm_pause(attempt)
        self._deliver()
        with self._lock:
            while (
                attempt is self._attempt
                and not attempt.closed
                and control.pause_requested
                and not control.stop_requested
            ):
                self._cond.wait()

    def _attempt_paused_remotely(self, attempt: Attempt, generation: int) -> None:
        with self._lock:
            control = attempt.control
            if (
                attempt is self._attempt
                and not attempt.closed
                and self._machine.status is _S.PAUSING
                and control.pause_requested
                and not control.stop_requested
                and control.pause_generation == generation
            ):
                self._confirm_pause(attempt)
        self._deliver()

    def _confirm_pause(self, attempt: Attempt) -> None:
        self._record(self._machine.mark_paused(actor=self._actor))
        self._suspend_deadlines(attempt)
        self._resolve_pause(True)

    def _attempt_finished(self, attempt: Attempt, result: AttemptResult) -> None:
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                _log.debug("ignoring the late result of closed attempt %s", attempt.number)
                return
            self._close_attempt(attempt)
            self._leave_suspension("the attempt ended before reaching a checkpoint")
            retry_now = self._settle(attempt, result)
        self._deliver()
        if retry_now:
            self._kick()

    def _settle(self, attempt: Attempt, result: AttemptResult) -> bool:
        """Record how the attempt ended; True when the next attempt is due at once."""
        machine = self._machine
        stopping = machine.status is _S.STOPPING
        if result.kind is ResultKind.RETURNED:
            problem = result_problem(result.value)
            if problem is None:
                self._record(machine.mark_succeeded(outcome=result.value, actor=self._actor))
                return False
            return self._fail(result_failure(self._task_id, result.value, problem), None)
        if result.kind is ResultKind.CANCELLED and stopping:
            self._record(machine.mark_stopped(actor=self._actor, reason=self._stop_reason))
            return False
        if result.kind is ResultKind.CRASHED and stopping:  # killed after a stop request (R9)
            requested = (
                f"stopped: {self._stop_reason}" if self._stop_reason else "stopped on request"
            )
            crash = result.failure.message if result.failure else "the carrier ended"
            failure = Failure.of(
                FailureKind.CANCELLED,
                f"{requested}; the body did not stop within the graceful window of "
                f"{self._graceful:g}s, so it was ended by force ({crash})",
                retryable=False,
            )
            self._record(
                machine.mark_stopped(failure=failure, actor=self._actor, reason=self._stop_reason)
            )
            return False
        if self._cancel_reason is not None and result.kind in {
            ResultKind.CANCELLED,
            ResultKind.CRASHED,
        }:
            failure = Failure.of(
                FailureKind.CANCELLED, f"cancelled: {self._cancel_reason}", retryable=False
            )
            self._record(
                machine.mark_cancelled(
                    failure=failure, actor=self._actor, reason=self._cancel_reason
                )
            )
            return False
        if attempt.timeout_kind is not None:
            message = attempt.timeout_message or attempt.timeout_kind.value
            if result.kind is not ResultKind.CANCELLED:
                detail = result.failure.message if result.failure else None
                if detail is None and result.exception is not None:
                    detail = f"{type(result.exception).__qualname__}: {result.exception}"
                if result.kind is ResultKind.CRASHED:
                    message = (
                        f"{message}; the body did not unwind within the graceful window of "
                        f"{self._graceful:g}s, so it was ended by force ({detail})"
                    )
                elif detail:
                    message = f"{message}; then the body ended with {detail}"
            timeout_error = TaskTimeout(
                message, task_id=self._task_id, kind=attempt.timeout_kind.value
            )
            failure = Failure.of(
                attempt.timeout_kind, message, retryable=self._policy.should_retry(timeout_error)
            )
            return self._fail(failure, timeout_error)
        if result.kind is ResultKind.CANCELLED:
            failure = Failure.of(
                FailureKind.CANCELLED,
                "the body raised TaskCancelled without a stop request",
                retryable=False,
            )
            return self._fail(failure, None)
        if result.kind is ResultKind.CRASHED:
            assert result.failure is not None
            error = TaskExecutionError(result.failure.message, task_id=self._task_id)
            failure = Failure.of(
                FailureKind.NONZERO_EXIT,
                result.failure.message,
                retryable=self._policy.should_retry(error),
            )
            return self._fail(failure, error)
        # RAISED
        exc = result.exception
        if result.failure is not None:  # described across a process boundary
            failure = result.failure
            if exc is not None and failure.kind is not FailureKind.RESULT_INVALID:
                failure = dataclasses.replace(failure, retryable=self._policy.should_retry(exc))
        elif exc is not None:
            kind = (
                FailureKind.NONZERO_EXIT
                if isinstance(exc, CommandFailed)
                else FailureKind.EXCEPTION
            )
            failure = Failure.from_exception(
                exc, kind=kind, retryable=self._policy.should_retry(exc)
            )
        else:
            failure = Failure.of(FailureKind.EXCEPTION, "the attempt failed without details")
        return self._fail(failure, exc)

    def _fail(self, failure: Failure, exc: BaseException | None) -> bool:
        """Retry if the failure deserves it and budget is left, else fail. Under the lock."""
        machine = self._machine
        snap = machine.snapshot
        status = machine.status
        retry = (
            failure.retryable
            and self._cancel_reason is None
            and status in {_S.STARTING, _S.RUNNING}
            and snap.attempt < snap.max_attempts
        )
        if not retry:
            self._record(machine.mark_failed(failure, actor=self._actor))
            return False
        delay = max(0.0, float(self._policy.delay_after(snap.attempt)))
        retry_at = self._clock.now() + timedelta(seconds=delay)
        self._record(machine.mark_retry_wait(failure, retry_at=retry_at, actor=self._actor))
        if delay <= 0:
            self._retry_due = True
            return True
        self._backoff_timer = self._clock.call_later(delay, self._backoff_due)
        return False

    def _backoff_due(self) -> None:
        with self._lock:
            self._backoff_timer = None
            if self._machine.status is not _S.RETRY_WAIT:
                return
            self._retry_due = True
        self._kick()

    def _close_attempt(self, attempt: Attempt) -> None:
        attempt.closed = True
        attempt.cancel_timers()
        self._cond.notify_all()

    def _leave_suspension(self, why: str) -> None:
        """Before an attempt-ending transition: pausing/paused have no edge to most ends."""
        status = self._machine.status
        if status is _S.PAUSING:
            self._record(self._machine.abort_pause(actor=self._actor, reason=why))
            self._resolve_pause(False)
        elif status is _S.PAUSED and self._machine.snapshot.paused_in_place:
            self._record(
                self._machine.mark_running(
                    actor=self._actor, reason=why, trigger=_ENDED_WHILE_PAUSED
                )
            )

    def _on_terminal(self) -> None:
        for timer in (self._backoff_timer, self._start_timer):
            if timer is not None:
                timer.cancel()
        self._backoff_timer = self._start_timer = None
        self._retry_due = False
        if self._pause_ticket is not None:
            self._resolve_pause(False)
        self._cond.notify_all()

    # ================================================================ stop
    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """Request a stop; never blocks. Returns False when already terminal or stopping."""
        who = actor or self._actor
        with self._lock:
            machine = self._machine
            status = machine.status
            if status.is_terminal or status is _S.STOPPING:
                return False
            self._stop_reason = reason
            paused_in_place = status is _S.PAUSED and machine.snapshot.paused_in_place
            if status in _BEFORE_START or (status is _S.PAUSED and not paused_in_place):
                self._record(machine.mark_stopped(actor=who, reason=reason))
            else:
                attempt = self._attempt
                assert attempt is not None
                if paused_in_place:  # R3: the body is on the stack and must unwind
                    self._record(
                        machine.mark_running(actor=who, reason=reason, trigger=_STOP_TRIGGER)
                    )
                    self._resume_deadlines(attempt)
                self._record(machine.mark_stopping(actor=who, reason=reason))
                if self._pause_ticket is not None:
                    self._resolve_pause(False)
                attempt.control.request_stop(reason)
                self._cancel_deadlines(attempt)
                if attempt.graceful_timer is None:
                    attempt.graceful_timer = self._clock.call_later(
                        self._graceful, lambda: self._graceful_window_passed(attempt)
                    )
                self._cond.notify_all()
        self._deliver()
        return True

    def cancel(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """The orchestration layer gives up on the task (e.g. a pipeline's fail_fast, R16).

        Not yet running -> ``cancelled`` at once. Running -> the attempt's stop flag is
        set (the status stays ``running``: ``stopping`` belongs to operator stops and has
        no edge to ``cancelled``) and the task ends ``cancelled`` once the body unwinds;
        a body that returns its value first ends ``succeeded``. The graceful window and
        its fallback apply as for a stop. Returns False when terminal or already ending.
        """
        who = actor or self._actor
        text = reason or "cancelled by the orchestration layer"
        with self._lock:
            machine = self._machine
            status = machine.status
            if status.is_terminal or status is _S.STOPPING or self._cancel_reason is not None:
                return False
            self._cancel_reason = text
            paused_in_place = status is _S.PAUSED and machine.snapshot.paused_in_place
            if status in _BEFORE_START or (status is _S.PAUSED and not paused_in_place):
                failure = Failure.of(FailureKind.CANCELLED, f"cancelled: {text}", retryable=False)
                self._record(machine.mark_cancelled(failure=failure, actor=who, reason=text))
            else:
                attempt = self._attempt
                assert attempt is not None
                if paused_in_place:  # R3: the body must unwind from its checkpoint
                    self._record(
                        machine.mark_running(actor=who, reason=text, trigger=_CANCEL_TRIGGER)
                    )
                elif status is _S.PAUSING:
                    self._record(machine.abort_pause(actor=who, reason=text))
                    self._resolve_pause(False)
                attempt.control.request_stop(text)
                self._cancel_deadlines(attempt)
                if attempt.graceful_timer is None:
                    attempt.graceful_timer = self._clock.call_later(
                        self._graceful, lambda: self._graceful_window_passed(attempt)
                    )
                self._cond.notify_all()
        self._deliver()
        return True

    def _graceful_window_passed(self, attempt: Attempt) -> None:
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return
            attempt.graceful_timer = None
            handle = attempt.handle
        if handle is not None and handle.force_stop(self._clock):
            return  # a child process is being terminated; its exit will be reported
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return
            self._close_attempt(attempt)
            self._leave_suspension("the graceful window passed")
            if attempt.timeout_kind is not None:
                why = (
                    f"{attempt.timeout_message}, and the body did not unwind within the graceful "
                    f"window of {self._graceful:g}s"
                )
            elif self._cancel_reason is not None and self._machine.status is not _S.STOPPING:
                why = (
                    f"the body did not unwind within the graceful window of {self._graceful:g}s "
                    f"after it was cancelled ({self._cancel_reason})"
                )
            else:
                requested = f" ({self._stop_reason})" if self._stop_reason else ""
                why = (
                    f"the body did not stop within the graceful window of {self._graceful:g}s "
                    f"after the stop request{requested}"
                )
            failure = Failure.of(
                FailureKind.LOST,
                f"{why}; its thread was abandoned and may still be running (result unknown)",
                retryable=True,
            )
            self._record(self._machine.mark_lost(failure, actor=self._actor))
        self._deliver()

    # ================================================================ pause / resume
    def pause(self, timeout: float | None = None, *, actor: str | None = None) -> bool:
        """Request a pause and wait until the body is suspended at a checkpoint.

        Returns True once the task is ``paused``; False when the window (`timeout`,
        default ``pause_timeout``) passed without a checkpoint (the status goes back to
        ``running`` with a ``runtime:pause_aborted`` transition), when the executor
        cannot pause (inline), or when the task cannot be paused now.
        """
        window = self._pause_window
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                raise ConfigurationError(f"pause timeout must be > 0 seconds, got {timeout!r}")
            window = float(timeout)
        who = actor or self._actor
        ticket: _PauseTicket | None = None
        result = False
        with self._lock:
            machine = self._machine
            status = machine.status
            attempt = self._attempt
            if status in {_S.QUEUED, _S.RETRY_WAIT}:  # before start: at once, holds nothing
                self._record(machine.mark_paused(actor=who))
                if self._backoff_timer is not None:
                    self._backoff_timer.cancel()
                    self._backoff_timer = None
                self._retry_due = False
                self._suspend_start_timeout()
                result = True
            elif status is _S.PAUSED:
                result = True
            elif status is _S.PAUSING and self._pause_ticket is not None:
                ticket = self._pause_ticket
            elif (
                status in {_S.STARTING, _S.RUNNING}
                and self._executor.supports_pause
                and attempt is not None
                and not attempt.closed
                and not attempt.control.stop_requested
            ):
                self._record(machine.mark_pausing(actor=who))
                attempt.control.request_pause()
                ticket = _PauseTicket()
                self._pause_ticket = ticket
                chosen = ticket
                ticket.timer = self._clock.call_later(
                    window, lambda: self._pause_window_passed(chosen, window)
                )
        self._deliver()
        if ticket is None:
            return result
        ticket.event.wait()
        self._deliver()
        return bool(ticket.result)

    def _pause_window_passed(self, ticket: _PauseTicket, window: float) -> None:
        with self._lock:
            if ticket.result is not None or self._pause_ticket is not ticket:
                return
            if self._machine.status is _S.PAUSING:
                self._record(
                    self._machine.abort_pause(
                        actor=self._actor,
                        reason=f"no checkpoint was reached within the pause window of {window:g}s",
                    )
                )
                if self._attempt is not None:
                    self._attempt.control.clear_pause()
            self._resolve_pause(False)
        self._deliver()

    def _resolve_pause(self, result: bool) -> None:
        ticket = self._pause_ticket
        if ticket is None:
            return
        self._pause_ticket = None
        ticket.result = result
        if ticket.timer is not None:
            ticket.timer.cancel()
        ticket.event.set()

    def resume(self, *, actor: str | None = None) -> bool:
        """Withdraw a pause: ``running`` for an in-place pause, ``queued`` for a pause before
        start (which then starts normally). Returns False when not paused or pausing."""
        who = actor or self._actor
        requeued = False
        with self._lock:
            machine = self._machine
            status = machine.status
            attempt = self._attempt
            if status is _S.PAUSED and machine.snapshot.paused_in_place:
                assert attempt is not None
                self._record(machine.resume(actor=who))
                attempt.control.clear_pause()
                self._resume_deadlines(attempt)
                self._cond.notify_all()
            elif status is _S.PAUSED:
                self._record(machine.resume(actor=who))
                self._resume_start_timeout()
                requeued = True
            elif status is _S.PAUSING:
                self._record(
                    machine.mark_running(
                        actor=who, reason="pause withdrawn", trigger=_RESUME_TRIGGER
                    )
                )
                if attempt is not None:
                    attempt.control.clear_pause()
                self._resolve_pause(False)
            else:
                return False
        self._deliver()
        if requeued:
            self._kick()
        return True

    # ================================================================ timeouts
    def _arm_start_timeout(self) -> None:
        limit = self._timeout.start
        if limit is None or self._start_timeout_over or self._start_timer is not None:
            return
        self._start_deadline = self._monotonic() + limit
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
            machine = self._machine
            status = machine.status
            message = f"start timeout of {self._timeout.start:g}s expired before the task started"
            error = TaskTimeout(
                message, task_id=self._task_id, kind=FailureKind.TIMEOUT_START.value
            )
            failure = Failure.of(
                FailureKind.TIMEOUT_START, message, retryable=self._policy.should_retry(error)
            )
            if status in {_S.PENDING, _S.BLOCKED, _S.QUEUED}:  # R1
                self._record(
                    machine.mark_cancelled(failure=failure, actor=self._actor, reason=message)
                )
            elif status in {_S.STARTING, _S.PAUSING} and self._attempt is not None:
                attempt = self._attempt
                attempt.control.request_stop(message)
                self._close_attempt(attempt)
                self._leave_suspension(message)
                force = attempt
                retry_now = self._fail(failure, error)
            else:
                return
        if force is not None and force.handle is not None:
            force.handle.force_stop(self._clock)
        self._deliver()
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
        self._cond.notify_all()
        if attempt.graceful_timer is None:
            attempt.graceful_timer = self._clock.call_later(
                self._graceful, lambda: self._graceful_window_passed(attempt)
            )
        _log.warning(
            "task %r attempt %s: %s; stop requested", self._task_id, attempt.number, message
        )
