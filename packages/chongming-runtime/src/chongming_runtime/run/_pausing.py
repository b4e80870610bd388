"""Pause and resume of a `TaskRun` (guide §4.2, §4.3).

Pause is confirmed only by the body blocking at a checkpoint (``pausing ->
paused``); a window without a checkpoint aborts it (``runtime:pause_aborted``).
Queued/retry-waiting tasks pause at once and hold nothing; they resume to
``queued`` [R3]. While paused, no timeout runs. A pause asked while the attempt is
``starting`` waits for the body to begin, within its window, before ``pausing`` is
entered (D90): no body, no checkpoint to reach, and no way back to ``starting``.
"""

from __future__ import annotations

import math
import threading

from chongming_core import ConfigurationError, TaskStatus, TimerHandle
from chongming_runtime.executors._attempt import Attempt
from chongming_runtime.run._deadlines import Deadlines

__all__ = ["PauseTicket", "Pausing", "pause_window"]

_S = TaskStatus
_RESUME_TRIGGER = "control:resume"


#: The longest single wait of a ``pause()`` caller: it looks at the clock at least this
#: often (a fake clock's time moves without waking it; a far deadline must not overflow).
_LONGEST_WAIT = 60.0


class PauseTicket:
    """One pending pause: resolved True by the body, False by its window, a resume or a stop.

    Attributes:
        deadline: when its window ends, on the run's monotonic clock.
        window: the window's length in seconds (for the ``pause_aborted`` reason).
        actor: who asked for it (named by ``pausing`` when it is entered).
        applied: ``pausing`` was entered; False while it waits for the body to begin (D90).
    """

    __slots__ = ("actor", "applied", "deadline", "event", "result", "timer", "window")

    def __init__(self, deadline: float, window: float, actor: str) -> None:
        self.deadline = deadline
        self.window = window
        self.actor = actor
        self.applied = False
        self.event = threading.Event()
        self.result: bool | None = None
        self.timer: TimerHandle | None = None


def pause_window(value: object, name: str = "pause timeout") -> float:
    """A pause window checked: a finite number of seconds > 0.

    Raises:
        ConfigurationError: anything else (a window that never ends is no window: the
            caller would wait forever, and the clock cannot keep such a deadline).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(f"{name} must be > 0 seconds and finite, got {value!r}")
    return float(value)


class Pausing(Deadlines):
    """The pause/resume half of `TaskRun` (a mixin)."""

    __slots__ = ()

    # ================================================================ pause / resume
    def pause(self, timeout: float | None = None, *, actor: str | None = None) -> bool:
        """Request a pause and wait until the body is suspended at a checkpoint.

        Returns True once the task is ``paused``; False when the window (`timeout`,
        default ``pause_timeout``) passed without a checkpoint (the status goes back to
        ``running`` with a ``runtime:pause_aborted`` transition), when the executor
        cannot pause (inline), or when the task cannot be paused now. It returns within
        its window: a pause already under way with a longer window is not waited for
        past this one (it goes on, and ends by its own window). A task still
        ``starting`` stays so until its body begins; the pause is applied then, within
        the same window, and is withdrawn without a transition if the window ends first.

        Raises:
            ConfigurationError: `timeout` is not a finite number of seconds > 0.
        """
        window = self._pause_window if timeout is None else pause_window(timeout)
        deadline = self._monotonic() + window
        ticket, result = self._request_pause(window, deadline, actor)
        if ticket is None:
            return result
        return self._await_pause(ticket, deadline)

    def _pause_without_waiting(self, *, actor: str | None = None) -> bool:
        """Request a pause (default window) and return at once: True when the task is paused
        now or a pause of it is under way (its window ends it; nobody waits for it)."""
        window = self._pause_window
        ticket, result = self._request_pause(window, self._monotonic() + window, actor)
        return ticket is not None or result

    def _request_pause(
        self, window: float, deadline: float, actor: str | None
    ) -> tuple[PauseTicket | None, bool]:
        """Request a pause without waiting for it: the pending ticket (a new one, or the
        one of a pause already under way), or None and whether the task is paused now.
        A command applies a pause so, in the order of its batch (D61)."""
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
            elif status in {_S.PAUSING, _S.STARTING} and self._pause_ticket is not None:
                ticket = self._pause_ticket  # under way, or waiting for the body (D90)
            elif (
                status in {_S.STARTING, _S.RUNNING}
                and self._executor.supports_pause
                and attempt is not None
                and not attempt.closed
                and not attempt.control.stop_requested
            ):
                ticket = PauseTicket(deadline, window, who)
                self._pause_ticket = ticket
                chosen = ticket
                ticket.timer = self._clock.call_at(
                    deadline, lambda: self._pause_window_passed(chosen)
                )
                if status is _S.RUNNING:  # starting: applied once the body begins (D90)
                    self._apply_pause(attempt, ticket, None)
        self._deliver()
        return ticket, result

    def _apply_pause(self, attempt: Attempt, ticket: PauseTicket, reason: str | None) -> None:
        """Enter ``pausing`` for `ticket` and ask the body to hold. Call under the lock."""
        self._record(self._machine.mark_pausing(actor=ticket.actor, reason=reason))
        ticket.applied = True
        attempt.control.request_pause()
        # a body still held at its checkpoint (a resume it has not seen yet) confirms this
        # pause at once
        self._notify_all()

    def _apply_held_pause(self, attempt: Attempt) -> None:
        """The body has just begun (``running`` recorded): apply a pause asked while the
        attempt was ``starting``, if its window is still open (D90). Call under the lock."""
        ticket = self._pause_ticket
        if ticket is None or ticket.applied:
            return
        if self._monotonic() >= ticket.deadline or attempt.control.stop_requested:
            self._settle_ticket(ticket, False)  # its window ended before the body began
            return
        self._apply_pause(
            attempt, ticket, "asked while the task was starting; applied once its body began"
        )

    def _await_pause(self, ticket: PauseTicket, deadline: float) -> bool:
        """Wait for `ticket` until `deadline` (this caller's window) at the latest.

        The ticket's window is kept by its waiters as well as by the clock's timer: a
        timer thread made late by another callback must not hold a ``pause()`` past its
        window (D62).
        """
        while not ticket.event.is_set():
            now = self._monotonic()
            if now >= ticket.deadline:  # its window is over, whether or not the timer ran
                self._pause_window_passed(ticket)
                break
            if now >= deadline:  # joined a longer pause: not confirmed within this window
                break
            ticket.event.wait(min(min(ticket.deadline, deadline) - now, _LONGEST_WAIT))
        self._deliver()
        return ticket.result is True

    def _pause_window_passed(self, ticket: PauseTicket) -> None:
        with self._lock:
            if ticket.result is not None:
                return
            if self._pause_ticket is ticket and self._machine.status is _S.PAUSING:
                self._record(
                    self._machine.abort_pause(
                        actor=self._actor,
                        reason=(
                            "no checkpoint was reached within the pause window of "
                            f"{ticket.window:g}s"
                        ),
                    )
                )
                if self._attempt is not None:
                    self._withdraw_pause(self._attempt)
            self._settle_ticket(ticket, False)
        self._deliver()

    def _resolve_pause(self, result: bool) -> None:
        """Resolve the pending pause, if any. Call under the lock."""
        if self._pause_ticket is not None:
            self._settle_ticket(self._pause_ticket, result)

    def _settle_ticket(self, ticket: PauseTicket, result: bool) -> None:
        if self._pause_ticket is ticket:
            self._pause_ticket = None
        ticket.result = result
        if ticket.timer is not None:
            ticket.timer.cancel()
        ticket.event.set()

    def _withdraw_pause(self, attempt: Attempt) -> None:
        """Clear the attempt's pause request and wake its body if it is held. Under the lock.

        Every withdrawal wakes the body: one left waiting at its checkpoint with no pause
        requested would be held while its status says ``running``.
        """
        attempt.control.clear_pause()
        self._notify_all()

    def resume(self, *, actor: str | None = None) -> bool:
        """Withdraw a pause: ``running`` for an in-place pause, ``queued`` for a pause before
        start (which then starts normally); a pause asked while ``starting`` is dropped
        before it was applied (the status stays ``starting``, D90). Returns False when not
        paused, pausing or waiting for a pause to be applied."""
        who = actor or self._actor
        requeued = False
        with self._lock:
            machine = self._machine
            status = machine.status
            attempt = self._attempt
            if status is _S.PAUSED and machine.snapshot.paused_in_place:
                assert attempt is not None
                self._record(machine.resume(actor=who))
                self._withdraw_pause(attempt)
                self._resume_deadlines(attempt)
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
                    self._withdraw_pause(attempt)
                self._resolve_pause(False)
            elif status is _S.STARTING and self._pause_ticket is not None:
                self._resolve_pause(False)  # never applied: no transition to record (D90)
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
        """The body reached a checkpoint with a pause requested: confirm it and block here.

        The body stays here while a pause is requested, and confirms each pause that
        awaits confirmation meanwhile: a resume wakes it, but a pause that follows the
        resume before the body has run again finds it still here, at its checkpoint
        (D60). Leaving only once no pause is requested keeps ``running`` true of a body
        that runs.
        """
        control = attempt.control
        while True:
            with self._lock:
                while True:
                    if (
                        attempt is not self._attempt
                        or attempt.closed
                        or not control.pause_requested
                        or control.stop_requested
                    ):
                        return
                    if self._machine.status is _S.PAUSING:
                        self._confirm_pause(attempt)
                        break
                    self._condition().wait()
            self._deliver()  # outside the lock, then back to the hold

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
