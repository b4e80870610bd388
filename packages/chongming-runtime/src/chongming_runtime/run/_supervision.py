"""The lifecycle decisions of a `TaskRun`: start, results, retries and stop (guide §4–§6).

Pause/resume live in ``_pausing.py`` and the deadlines (timeouts, graceful
window) in ``_deadlines.py``. What an attempt's end means (the next status and
its failure) is one pure function, `decide` in ``_decision.py`` (D95): this
module gathers its facts under the lock and enacts the answer. The rules of all
of them (rulings in brackets):

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
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from chongming_core import (
    ACTIVE_STATUSES,
    ConfigurationError,
    Failure,
    FailureKind,
    TaskStatus,
)
from chongming_runtime.body._results import keep_result
from chongming_runtime.executors._attempt import Attempt, AttemptResult
from chongming_runtime.run._decision import AttemptEnding, decide
from chongming_runtime.run._pausing import Pausing
from chongming_runtime.support._call_each import call_each
from chongming_runtime.support._text import refuse_unstorable
from chongming_runtime.support._thread_cache import run_elsewhere

if TYPE_CHECKING:
    from chongming_runtime.executors._base import AttemptHandle

__all__ = ["Supervision"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.runtime")

# Triggers the runtime adds on top of the state machine's defaults.
_STOP_TRIGGER = "control:stop"
_RESUME_TRIGGER = "control:resume"
_ENDED_WHILE_PAUSED = "runtime:ended_while_paused"
_CANCEL_TRIGGER = "orchestrator:cancel"

_BEFORE_START = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})


class Supervision(Pausing):
    """The lifecycle half of `TaskRun` (a mixin; `TaskRun` provides the state of `RunCore`)."""

    __slots__ = ()

    def _init_supervision(self) -> None:
        self._attempt = None
        self._abandoned = None
        self._progress = None
        self._start_requested = False
        self._admitted = False
        self._admission_due = False
        self._dispatching = False
        self._redispatch = False
        self._retry_due = False
        self._backoff_timer = None
        self._start_timer = None
        self._start_deadline = None
        self._start_origin = None
        self._start_remaining = None
        self._start_timeout_over = False
        self._pause_ticket = None
        self._stop_reason = None
        self._cancel_reason = None
        self._cond = None

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
        try:
            self._deliver()
        except BaseException:  # a listener interrupted the telling: still dispatch it
            if not self._executor.inline:  # (an inline body would hold the interrupt)
                self._dispatch()
            raise
        if self._executor.inline:
            self._drive_inline()
        else:
            self._dispatch()

    def _start_unless_ended(self) -> None:
        """`start()` for a run a controller has just made: a stop that reached it first
        (``stop_all()`` or a stop by id from another thread, between its registration and
        this call) ended it before its start, and it stays so."""
        try:
            self.start()
        except ConfigurationError:
            if not self._machine.status.is_terminal:
                raise

    def dispatch(self) -> None:
        """Admit the next attempt (for schedulers that passed ``admission=``).

        Does nothing unless the run is queued: a run paused or ended since the scheduler
        chose it is not started (its admission is void; it asks again when queued).
        """
        if self._admit_now():
            self._kick()

    def _needs_slot(self) -> tuple[TaskStatus, bool]:
        """The current status, and whether the run needs its execution slot now: it is
        active, paused in place, or queued with a scheduler's admission. A scheduler asks
        this rather than trusting a status it was told, which may be out of date."""
        with self._lock:
            snap = self._machine.snapshot
            status = snap.status
            if status is _S.QUEUED:
                return status, self._admitted
            if status is _S.PAUSED:
                return status, snap.paused_in_place
            if self._abandoned is not None:  # lost, its body still executing (D54)
                return status, True
            return status, status in ACTIVE_STATUSES

    def _when_body_returns(self, callback: Callable[[], None]) -> bool:
        """Call `callback` once the body abandoned after its graceful window returns (from
        its thread); False, and no call, when no abandoned body is executing."""
        with self._lock:
            if self._abandoned is None:
                return False
            self._abandoned.append(callback)
            return True

    def _admit_now(self) -> bool:
        """Record the scheduler's admission if the run is queued; False otherwise."""
        with self._lock:
            if self._machine.status is not _S.QUEUED:
                return False
            self._admitted = True
            return True

    def _kick(self) -> None:
        if self._executor.inline:
            if self._wakeup is not None:
                self._wakeup.set()
        else:
            self._dispatch()

    def _drive_inline(self) -> None:
        # The inline executor carries every attempt in this (the caller's) thread;
        # between attempts this thread waits on an event that timers and controls set.
        wakeup = self._wakeup = threading.Event()
        while True:
            wakeup.clear()
            self._dispatch()
            if self._machine.status.is_terminal:
                break
            wakeup.wait()
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
                try:
                    self._deliver()
                except BaseException:
                    # interrupted while telling (Ctrl-C in a listener on the main thread):
                    # still queue or launch the run, so it is never left starting or
                    # unqueued holding its slot
                    if admission_due and self._admission is not None:
                        self._admission(self)  # type: ignore[arg-type]
                    if attempt is not None:
                        self._launch(attempt)
                    raise
                if admission_due and self._admission is not None:
                    self._admission(self)  # type: ignore[arg-type]
                if attempt is not None:
                    self._launch(attempt)
                    continue
                with self._lock:
                    if not self._redispatch:
                        self._dispatching = False
                        return
        except BaseException:  # interrupted (Ctrl-C in a listener on the main thread)
            with self._lock:
                self._dispatching = False
                again = self._redispatch
            if again:  # a kick that came meanwhile is never lost: another thread takes it
                try:
                    run_elsewhere(self._dispatch, f"chongming-dispatch-{self._task_id}")
                except Exception:  # no thread to be had: take it here first
                    self._dispatch()
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
        gate = self._launch_gate
        if gate is None:
            self._carry(attempt)
        else:  # a controller's store: carried once the task's row holds this version (D105)
            gate(self._task_id, self._machine.version, partial(self._carry, attempt))

    def _carry(self, attempt: Attempt) -> None:
        with self._lock:
            # ended while its `starting` was being told (a stop and its window, a start
            # timeout): it was settled then, and no carrier is started for it (D92)
            if attempt.closed:
                return
        try:
            self._executor.launch(attempt)
        except BaseException as exc:  # e.g. no thread or process could be started
            self._attempt_finished(attempt, AttemptResult.raised(exc))

    # ================================================================ executor callbacks
    def _attempt_attached(self, attempt: Attempt, handle: AttemptHandle) -> bool:
        with self._lock:  # ordered against the closing of the attempt (D92)
            if attempt is not self._attempt or attempt.closed:
                return False
            attempt.handle = handle
            return True

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
                    running = self._machine.mark_running(
                        pid=pid, heartbeat_at=self._clock.now(), actor=self._actor
                    )
                    attempt.beat_shown = now
                    self._record(running)
                    self._apply_held_pause(attempt)  # asked while starting (D90)
                if status is not _S.STOPPING:
                    self._arm_deadlines(attempt, now)
        self._deliver()
        if skip:  # stopped before its body began: the body never runs
            self._attempt_finished(attempt, AttemptResult.cancelled())
            return False
        return True

    def _attempt_finished(self, attempt: Attempt, result: AttemptResult) -> None:
        with self._lock:
            late = attempt is not self._attempt or attempt.closed
            if late:
                waiters = self._late_result(attempt)
            else:
                self._close_attempt(attempt)
                self._leave_suspension("the attempt ended before reaching a checkpoint")
                retry_now = self._settle(attempt, result)
        if late:
            if waiters:  # what the abandoned body held is free now
                call_each(waiters, _log, "could not release what an abandoned body held")
            return
        try:
            self._deliver()
        finally:  # even when a listener interrupts the telling: the retry is due
            if retry_now:
                self._kick()

    def _late_result(self, attempt: Attempt) -> list[Callable[[], None]] | None:
        """The result of an attempt already closed is ignored; an abandoned body that
        returns at last gives back who waited for it to return. Call under the lock."""
        _log.debug("ignoring the late result of closed attempt %s", attempt.number)
        if not attempt.abandoned:
            return None
        waiters, self._abandoned = self._abandoned, None
        return waiters

    def _settle(self, attempt: Attempt, result: AttemptResult) -> bool:
        """Record how the attempt ended; True when the next attempt is due at once."""
        return self._conclude(attempt, self._ending(attempt, result))

    def _ending(
        self,
        attempt: Attempt | None,
        result: AttemptResult | None,
        *,
        start_timeout: Failure | None = None,
    ) -> AttemptEnding:
        """The facts `decide` judges the attempt's end on. Under the lock."""
        snap = self._machine.snapshot
        return AttemptEnding(
            task_id=self._task_id,
            status=self._machine.status,
            result=result,
            attempt=snap.attempt,
            max_attempts=snap.max_attempts,
            policy=self._policy,
            graceful=self._graceful,
            stop_reason=self._stop_reason,
            cancel_reason=self._cancel_reason,
            timeout_kind=None if attempt is None else attempt.timeout_kind,
            timeout_message=None if attempt is None else attempt.timeout_message,
            forced=attempt is not None and attempt.forced,
            began=attempt is not None and attempt.started,
            start_timeout=start_timeout,
        )

    def _conclude(self, attempt: Attempt | None, ending: AttemptEnding) -> bool:
        """Enact what `decide` says of `ending`; True when the next attempt is due at once.
        Under the lock."""
        machine = self._machine
        decision = decide(ending)
        if decision.keeps_value:
            assert ending.result is not None
            # the store decides what it can keep, before anyone is told the task succeeded
            # (D68); every reader, this process too, then sees the value it keeps (D69)
            outcome, invalid = keep_result(self._task_id, ending.result.value, self._stored_outcome)
            if invalid is None:
                self._record(machine.mark_succeeded(outcome=outcome, actor=self._actor))
                return False
            decision = decide(dataclasses.replace(ending, value_refused=invalid))
        status, failure, reason = decision.status, decision.failure, decision.reason
        if status is _S.STOPPED:
            self._record(machine.mark_stopped(failure=failure, actor=self._actor, reason=reason))
        elif status is _S.CANCELLED:
            self._record(machine.mark_cancelled(failure=failure, actor=self._actor, reason=reason))
        elif status is _S.LOST:
            # its body goes on executing: what its slot stands for stays held until it
            # returns (D54; see `_when_body_returns`)
            assert attempt is not None
            attempt.abandoned = True
            self._abandoned = []
            self._record(machine.mark_lost(failure, actor=self._actor))
        elif status is _S.RETRY_WAIT:
            assert failure is not None
            return self._wait_to_retry(failure)
        else:
            assert status is _S.FAILED
            assert failure is not None
            self._record(machine.mark_failed(failure, actor=self._actor))
        return False

    def _stop_text(self) -> str:
        """How an operator's stop is named in the failure it ends the task with."""
        return f"stopped: {self._stop_reason}" if self._stop_reason else "stopped on request"

    def _wait_to_retry(self, failure: Failure) -> bool:
        """``retry_wait`` with the policy's backoff; True when the retry is due at once."""
        machine = self._machine
        delay = max(0.0, float(self._policy.delay_after(machine.snapshot.attempt)))
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
        self._notify_all()

    def _leave_suspension(self, why: str) -> None:
        """Before an attempt-ending transition: pausing/paused have no edge to most ends.
        A pause still waiting for the body to begin ends with the attempt (D90)."""
        status = self._machine.status
        if status is _S.PAUSING:
            self._record(self._machine.abort_pause(actor=self._actor, reason=why))
        elif status is _S.PAUSED and self._machine.snapshot.paused_in_place:
            self._record(
                self._machine.mark_running(
                    actor=self._actor, reason=why, trigger=_ENDED_WHILE_PAUSED
                )
            )
        self._resolve_pause(False)

    def _on_terminal(self) -> None:
        for timer in (self._backoff_timer, self._start_timer):
            if timer is not None:
                timer.cancel()
        self._backoff_timer = self._start_timer = None
        self._retry_due = False
        if self._pause_ticket is not None:
            self._resolve_pause(False)
        self._notify_all()

    # ================================================================ stop
    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """Request a stop; never blocks. Returns False when already terminal or stopping."""
        refuse_unstorable("reason", reason)  # written with the stop
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
                self._notify_all()
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
                self._resolve_pause(False)  # a pause under way, or held while starting
                attempt.control.request_stop(text)
                self._cancel_deadlines(attempt)
                if attempt.graceful_timer is None:
                    attempt.graceful_timer = self._clock.call_later(
                        self._graceful, lambda: self._graceful_window_passed(attempt)
                    )
                self._notify_all()
        self._deliver()
        return True
