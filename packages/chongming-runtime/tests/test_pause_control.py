"""`PauseControl` on its own: pausing a body, its window, its hold and resume (§4.2, §4.3,
D60, D62, D90), against a run that records what it is asked and a `FakeClock`.
"""

from __future__ import annotations

import threading

from chongming_core import FakeClock, StateMachine, TaskStatus, Transition
from chongming_runtime.executors._attempt import Attempt
from chongming_runtime.run._pausing import PauseControl, PauseTicket
from chongming_runtime.run._setup import RunSetup
from run_helpers import machine_at, new_attempt

S = TaskStatus
_WINDOW = 5.0


def _body(ctx: object) -> None:
    """The body the fake's setup names (never called)."""


class PausableFake:
    """A run as `PauseControl` sees it (`PausableRun`): settings, state, and its acts."""

    def __init__(self, status: TaskStatus = S.RUNNING) -> None:
        self.clock = FakeClock()
        self._setup = RunSetup.make(_body, clock=self.clock, actor="supervisor")
        self._monotonic = self.clock.monotonic
        self._lock = threading.Lock()
        self._machine: StateMachine = machine_at(status, self.clock)
        self._attempt: Attempt | None = new_attempt(self._monotonic)
        self.recorded: list[Transition] = []
        self.suspended: list[Attempt] = []
        self.resumed: list[Attempt] = []
        self.told = 0

    def _record(self, transition: Transition) -> None:
        assert self._lock.locked()
        self.recorded.append(transition)

    def _suspend_deadlines(self, attempt: Attempt) -> None:
        self.suspended.append(attempt)

    def _resume_deadlines(self, attempt: Attempt) -> None:
        self.resumed.append(attempt)

    def _deliver(self) -> None:
        self.told += 1

    @property
    def attempt(self) -> Attempt:
        assert self._attempt is not None
        return self._attempt

    def moves(self) -> list[tuple[TaskStatus, TaskStatus, str | None]]:
        return [(t.from_status, t.to_status, t.reason) for t in self.recorded]


def status(run: PausableFake) -> TaskStatus:
    """The run's status, read afresh (keeps the type checker from narrowing it)."""
    return run._machine.status


def opened(run: PausableFake) -> tuple[PauseControl, PauseTicket, float]:
    """A pause control of `run` with a pause asked of its attempt by ``ops``: the control,
    the pause's ticket and its deadline."""
    pauses = PauseControl(run)
    deadline = run._setup.monotonic() + _WINDOW
    with run._lock:
        ticket = pauses.open(run.attempt, _WINDOW, deadline, "ops")
    return pauses, ticket, deadline


def test_a_pause_of_a_running_body_enters_pausing_and_asks_the_body_to_hold() -> None:
    run = PausableFake()
    pauses, _, _ = opened(run)
    assert run.moves() == [(S.RUNNING, S.PAUSING, None)]
    assert run.recorded[0].actor == "ops"  # named after whoever asked
    assert run.attempt.control.pause_requested
    assert pauses.ticket is not None
    assert pauses.ticket.applied


def test_a_pause_asked_while_starting_waits_for_the_body_then_applies() -> None:
    run = PausableFake(S.STARTING)
    pauses, _, _ = opened(run)
    assert run.recorded == []  # D90: no body, no pausing
    assert not run.attempt.control.pause_requested
    run._machine.mark_running(pid=1)  # the body began
    with run._lock:
        pauses.apply_held(run.attempt)
    assert run.moves() == [
        (S.RUNNING, S.PAUSING, "asked while the task was starting; applied once its body began")
    ]
    assert run.attempt.control.pause_requested


def test_a_pause_whose_window_ended_before_the_body_began_is_dropped_unapplied() -> None:
    run = PausableFake(S.STARTING)
    pauses, ticket, _ = opened(run)
    assert ticket.timer is not None
    ticket.timer.cancel()  # the clock's timer is late
    run.clock.advance(_WINDOW)
    run._machine.mark_running(pid=1)
    with run._lock:
        pauses.apply_held(run.attempt)
    assert run.recorded == []
    assert ticket.result is False
    assert pauses.ticket is None


def test_a_body_held_at_its_checkpoint_confirms_the_pause_until_resumed() -> None:
    run = PausableFake()
    pauses, ticket, deadline = opened(run)
    held = threading.Thread(target=pauses.hold, args=(run.attempt,), daemon=True)
    held.start()
    assert pauses.wait(ticket, deadline) is True
    assert run.moves()[-1][:2] == (S.PAUSING, S.PAUSED)
    assert run.suspended == [run.attempt]  # no timeout runs while paused
    assert held.is_alive()  # still at its checkpoint
    with run._lock:
        assert pauses.resume("ops") is True
    held.join(10)
    assert not held.is_alive()
    assert run.moves()[-1][:2] == (S.PAUSED, S.RUNNING)
    assert run.resumed == [run.attempt]
    assert not run.attempt.control.pause_requested


def test_a_window_without_a_checkpoint_aborts_the_pause() -> None:
    run = PausableFake()
    pauses, ticket, deadline = opened(run)
    run.clock.advance(_WINDOW)
    assert ticket.result is False
    assert run.moves()[-1] == (
        S.PAUSING,
        S.RUNNING,
        "no checkpoint was reached within the pause window of 5s",
    )
    assert not run.attempt.control.pause_requested
    assert pauses.wait(ticket, deadline) is False


def test_the_waiter_keeps_the_window_when_the_clocks_timer_is_late() -> None:
    """D62: the window ends on time even if no timer ran."""
    run = PausableFake()
    pauses, ticket, deadline = opened(run)
    assert ticket.timer is not None
    ticket.timer.cancel()
    run.clock.advance(_WINDOW)
    assert ticket.result is None
    assert pauses.wait(ticket, deadline) is False
    assert run.moves()[-1][:2] == (S.PAUSING, S.RUNNING)


def test_a_shorter_waiter_returns_at_its_own_deadline_and_the_pause_goes_on() -> None:
    """D62: joining a longer pause does not wait past one's own window."""
    run = PausableFake()
    pauses, ticket, _ = opened(run)
    assert pauses.wait(ticket, run._setup.monotonic()) is False
    assert ticket.result is None
    assert pauses.ticket is ticket
    assert status(run) is S.PAUSING


def test_a_resume_of_a_pause_under_way_withdraws_it() -> None:
    run = PausableFake()
    pauses, ticket, _ = opened(run)
    with run._lock:
        assert pauses.resume("ops") is True
    assert run.moves()[-1] == (S.PAUSING, S.RUNNING, "pause withdrawn")
    assert run.recorded[-1].trigger == "control:resume"
    assert ticket.result is False
    assert not run.attempt.control.pause_requested


def test_a_resume_while_starting_drops_the_pause_without_a_transition() -> None:
    run = PausableFake(S.STARTING)
    pauses, ticket, _ = opened(run)
    with run._lock:
        assert pauses.resume("ops") is True
    assert run.recorded == []
    assert ticket.result is False


def test_a_resume_with_no_pause_changes_nothing() -> None:
    run = PausableFake()
    pauses = PauseControl(run)
    with run._lock:
        assert pauses.resume("ops") is False
    assert run.recorded == []


def test_an_attempt_that_ends_while_pausing_leaves_the_pause_first() -> None:
    run = PausableFake()
    pauses, ticket, _ = opened(run)
    with run._lock:
        pauses.leave("the graceful window passed")
    assert run.moves()[-1] == (S.PAUSING, S.RUNNING, "the graceful window passed")
    assert ticket.result is False


def test_an_attempt_that_ends_while_paused_in_place_runs_again_first() -> None:
    run = PausableFake(S.PAUSED)
    pauses = PauseControl(run)
    with run._lock:
        pauses.leave("the attempt ended before reaching a checkpoint")
    assert run.moves() == [(S.PAUSED, S.RUNNING, "the attempt ended before reaching a checkpoint")]
    assert run.recorded[0].trigger == "runtime:ended_while_paused"


def test_a_child_confirms_only_the_pause_it_was_asked() -> None:
    run = PausableFake()
    pauses, _, _ = opened(run)
    generation = run.attempt.control.pause_generation
    pauses.confirm_remote(run.attempt, generation - 1)  # an earlier request's late report
    assert status(run) is S.PAUSING
    pauses.confirm_remote(run.attempt, generation)
    assert status(run) is S.PAUSED
    assert run.suspended == [run.attempt]


def test_waking_before_any_hold_makes_nothing() -> None:
    run = PausableFake()
    pauses = PauseControl(run)
    with run._lock:
        pauses.wake_held()
    assert pauses._held is None
