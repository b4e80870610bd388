"""Pausing a `TaskRun`'s body and resuming it (guide §4.2, §4.3).

Pause is confirmed only by the body blocking at a checkpoint (``pausing ->
paused``); a window without a checkpoint aborts it (``runtime:pause_aborted``).
While paused, no timeout runs. A pause asked while the attempt is ``starting``
waits for the body to begin, within its window, before ``pausing`` is entered
(D90): no body, no checkpoint to reach, and no way back to ``starting``.

`PauseControl` keeps this for one run, which makes it at its first pause of a
body: a run never paused holds none. A queued or retry-waiting task pauses at
once and holds nothing [R3]: that pause is the run's own (it gives up its
admission, backoff and start clock) and needs no `PauseControl`. It acts on its
run through `PausableRun`.
"""

from __future__ import annotations

import threading
from typing import Protocol

from chongming_core import (
    StateMachine,
    TaskStatus,
    TimerHandle,
    Transition,
)
from chongming_runtime.executors._attempt import Attempt
from chongming_runtime.run._setup import RunSetup, pause_window

__all__ = ["PausableRun", "PauseControl", "PauseTicket", "pause_window"]

_S = TaskStatus
_RESUME_TRIGGER = "control:resume"
_ENDED_WHILE_PAUSED = "runtime:ended_while_paused"


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


class PausableRun(Protocol):
    """What `PauseControl` needs of its run (a `TaskRun`): its settings and the state a
    pause is judged on (read under the lock), and four acts."""

    # settings
    _setup: RunSetup
    # state, read under the lock
    _lock: threading.Lock
    _machine: StateMachine
    _attempt: Attempt | None

    def _record(self, transition: Transition) -> None:
        """Record `transition` of `_machine` for the listeners. Under the lock."""
        ...

    def _suspend_deadlines(self, attempt: Attempt) -> None:
        """The body is paused: no timeout runs. Under the lock."""
        ...

    def _resume_deadlines(self, attempt: Attempt) -> None:
        """The body runs again: its timeouts go on. Under the lock."""
        ...

    def _deliver(self) -> None:
        """Tell the listeners what was recorded. Outside the lock."""
        ...


class PauseControl:
    """The pauses of one run's body: the pending pause (its ticket and window), the body's
    hold at its checkpoint, its confirmation, and resume.

    Methods that say so are called under the run's lock; the others take it.
    """

    __slots__ = ("_held", "_run", "ticket")

    def __init__(self, run: PausableRun) -> None:
        self._run = run
        #: the pending pause: under way, or waiting for the body to begin (D90)
        self.ticket: PauseTicket | None = None
        self._held: threading.Condition | None = None  # made by the first hold

    # ================================================================ asking
    def open(self, attempt: Attempt, window: float, deadline: float, actor: str) -> PauseTicket:
        """A new pending pause of `attempt`'s body, ending at `deadline`; applied now if the
        body runs, or once it begins (``starting``, D90). Under the lock."""
        run = self._run
        ticket = self.ticket = PauseTicket(deadline, window, actor)
        ticket.timer = run._setup.clock.call_at(deadline, lambda: self._window_passed(ticket))
        if run._machine.status is _S.RUNNING:
            self._apply(attempt, ticket, None)
        return ticket

    def _apply(self, attempt: Attempt, ticket: PauseTicket, reason: str | None) -> None:
        """Enter ``pausing`` for `ticket` and ask the body to hold. Under the lock."""
        self._run._record(self._run._machine.mark_pausing(actor=ticket.actor, reason=reason))
        ticket.applied = True
        attempt.control.request_pause()
        # a body still held at its checkpoint (a resume it has not seen yet) confirms this
        # pause at once
        self.wake_held()

    def apply_held(self, attempt: Attempt) -> None:
        """The body has just begun (``running`` recorded): apply a pause asked while the
        attempt was ``starting``, if its window is still open (D90). Under the lock."""
        ticket = self.ticket
        if ticket is None or ticket.applied:
            return
        if self._run._setup.monotonic() >= ticket.deadline or attempt.control.stop_requested:
            self._settle(ticket, False)  # its window ended before the body began
            return
        self._apply(
            attempt, ticket, "asked while the task was starting; applied once its body began"
        )

    def wait(self, ticket: PauseTicket, deadline: float) -> bool:
        """Wait for `ticket` until `deadline` (this caller's window) at the latest; True
        once the body is paused.

        The ticket's window is kept by its waiters as well as by the clock's timer: a
        timer thread made late by another callback must not hold a ``pause()`` past its
        window (D62).
        """
        monotonic = self._run._setup.monotonic
        while not ticket.event.is_set():
            now = monotonic()
            if now >= ticket.deadline:  # its window is over, whether or not the timer ran
                self._window_passed(ticket)
                break
            if now >= deadline:  # joined a longer pause: not confirmed within this window
                break
            ticket.event.wait(min(min(ticket.deadline, deadline) - now, _LONGEST_WAIT))
        self._run._deliver()
        return ticket.result is True

    def _window_passed(self, ticket: PauseTicket) -> None:
        run = self._run
        with run._lock:
            if ticket.result is not None:
                return
            machine = run._machine
            if self.ticket is ticket and machine.status is _S.PAUSING:
                reason = f"no checkpoint was reached within the pause window of {ticket.window:g}s"
                run._record(machine.abort_pause(actor=run._setup.actor, reason=reason))
                if run._attempt is not None:
                    self._withdraw(run._attempt)
            self._settle(ticket, False)
        run._deliver()

    # ================================================================ ending
    def resolve(self, result: bool) -> None:
        """Resolve the pending pause, if any. Under the lock."""
        if self.ticket is not None:
            self._settle(self.ticket, result)

    def _settle(self, ticket: PauseTicket, result: bool) -> None:
        if self.ticket is ticket:
            self.ticket = None
        ticket.result = result
        if ticket.timer is not None:
            ticket.timer.cancel()
        ticket.event.set()

    def _withdraw(self, attempt: Attempt) -> None:
        """Clear the attempt's pause request and wake its body if it is held. Under the lock.

        Every withdrawal wakes the body: one left waiting at its checkpoint with no pause
        requested would be held while its status says ``running``.
        """
        attempt.control.clear_pause()
        self.wake_held()

    def resume(self, actor: str) -> bool:
        """Withdraw the body's pause: ``running`` for a body paused or pausing; a pause asked
        while ``starting`` is dropped before it was applied (the status stays ``starting``,
        D90). False when there is none. Under the lock."""
        run = self._run
        machine = run._machine
        status = machine.status
        attempt = run._attempt
        if status is _S.PAUSED and machine.snapshot.paused_in_place:
            assert attempt is not None
            run._record(machine.resume(actor=actor))
            self._withdraw(attempt)
            run._resume_deadlines(attempt)
        elif status is _S.PAUSING:
            run._record(
                machine.mark_running(actor=actor, reason="pause withdrawn", trigger=_RESUME_TRIGGER)
            )
            if attempt is not None:
                self._withdraw(attempt)
            self.resolve(False)
        elif status is _S.STARTING and self.ticket is not None:
            self.resolve(False)  # never applied: no transition to record (D90)
        else:
            return False
        return True

    def leave(self, why: str) -> None:
        """Before an attempt-ending transition: leave ``pausing``/``paused``, which have no
        edge to most ends; a pause still waiting for the body to begin ends with the
        attempt (D90). Under the lock."""
        run = self._run
        machine = run._machine
        status = machine.status
        if status is _S.PAUSING:
            run._record(machine.abort_pause(actor=run._setup.actor, reason=why))
        elif status is _S.PAUSED and machine.snapshot.paused_in_place:
            run._record(
                machine.mark_running(
                    actor=run._setup.actor, reason=why, trigger=_ENDED_WHILE_PAUSED
                )
            )
        self.resolve(False)

    # ================================================================ the body's hold
    def wake_held(self) -> None:
        """Wake a body held at its checkpoint to look again (under the lock; no-op before
        the first hold)."""
        if self._held is not None:
            self._held.notify_all()

    def hold(self, attempt: Attempt) -> None:
        """The body reached a checkpoint with a pause requested: confirm it and block here.

        The body stays here while a pause is requested, and confirms each pause that
        awaits confirmation meanwhile: a resume wakes it, but a pause that follows the
        resume before the body has run again finds it still here, at its checkpoint
        (D60). Leaving only once no pause is requested keeps ``running`` true of a body
        that runs.
        """
        run = self._run
        control = attempt.control
        while True:
            with run._lock:
                while True:
                    if (
                        attempt is not run._attempt
                        or attempt.closed
                        or not control.pause_requested
                        or control.stop_requested
                    ):
                        return
                    if run._machine.status is _S.PAUSING:
                        self._confirm(attempt)
                        break
                    self._condition().wait()
            run._deliver()  # outside the lock, then back to the hold

    def _condition(self) -> threading.Condition:
        """The condition a held body waits on, made on first use. Under the lock."""
        held = self._held
        if held is None:
            held = self._held = threading.Condition(self._run._lock)
        return held

    def confirm_remote(self, attempt: Attempt, generation: int) -> None:
        """A child process reports its body suspended at a checkpoint for pause
        `generation`: confirm the pause if it is still the one asked."""
        run = self._run
        with run._lock:
            control = attempt.control
            if (
                attempt is run._attempt
                and not attempt.closed
                and run._machine.status is _S.PAUSING
                and control.pause_requested
                and not control.stop_requested
                and control.pause_generation == generation
            ):
                self._confirm(attempt)
        run._deliver()

    def _confirm(self, attempt: Attempt) -> None:
        run = self._run
        run._record(run._machine.mark_paused(actor=run._setup.actor))
        run._suspend_deadlines(attempt)
        self.resolve(True)
