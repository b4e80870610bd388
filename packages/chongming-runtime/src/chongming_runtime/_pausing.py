"""Pause and resume of a `TaskRun` (guide §4.2, §4.3).

Pause is confirmed only by the body blocking at a checkpoint (``pausing ->
paused``); a window without a checkpoint aborts it (``runtime:pause_aborted``).
Queued/retry-waiting tasks pause at once and hold nothing; they resume to
``queued`` [R3]. While paused, no timeout runs.
"""

from __future__ import annotations

import threading

from chongming_core import ConfigurationError, TaskStatus, TimerHandle
from chongming_runtime._attempt import Attempt
from chongming_runtime._deadlines import Deadlines

__all__ = ["PauseTicket", "Pausing"]

_S = TaskStatus
_RESUME_TRIGGER = "control:resume"


class PauseTicket:
    """One pending ``pause()``: resolved True by the body, False by the window or a stop."""

    __slots__ = ("event", "result", "timer")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: bool | None = None
        self.timer: TimerHandle | None = None


class Pausing(Deadlines):
    """The pause/resume half of `TaskRun` (a mixin)."""

    __slots__ = ()

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
        ticket: PauseTicket | None = None
        result = False
        with self._lock:
            machine = self._machine
            status = machine.status
            attempt = self._attempt
            if status in {_S.QUEUED, _S.RETRY_WAIT}:  # before start: at once, holds nothing
                self._record(machine.mark_paused(actor=who))
                self._admitted = False  # a scheduler's admission ends with the queued state
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
                ticket = PauseTicket()
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

    def _pause_window_passed(self, ticket: PauseTicket, window: float) -> None:
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
                self._notify_all()
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
        try:
            self._deliver()
        finally:  # even when a listener interrupts the telling: the run is queued again
            if requeued:
                self._kick()
        return True

    # ================================================================ checkpoint hold
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
                self._condition().wait()

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
