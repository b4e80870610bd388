"""Helpers shared by the TaskRun tests (the tests folder is put on sys.path by conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from chongming_core import Clock, FailureKind, StateMachine, TaskStatus
from chongming_runtime import TaskRun
from chongming_runtime.body._context import RuntimeContext
from chongming_runtime.body._control import AttemptControl
from chongming_runtime.executors._attempt import Attempt

__all__ = [
    "Carrier",
    "machine_at",
    "new_attempt",
    "path",
    "pause_asked",
    "st",
    "stop_flag",
    "timeout_kind",
]

_S = TaskStatus
#: the way from ``pending`` to each status a run's collaborators are tested in
_WAY: dict[TaskStatus, tuple[str, ...]] = {
    _S.QUEUED: ("queued",),
    _S.STARTING: ("queued", "starting"),
    _S.RUNNING: ("queued", "starting", "running"),
    _S.PAUSING: ("queued", "starting", "running", "pausing"),
    _S.PAUSED: ("queued", "starting", "running", "pausing", "paused"),
    _S.STOPPING: ("queued", "starting", "running", "stopping"),
}
#: the supervisor an attempt made by `new_attempt` would report to: a test that gives a
#: run's collaborator an attempt plays the executor's part itself, so it is never told
_NO_SUPERVISOR = TaskRun(lambda ctx: None, task_id="t1")


def path(run: TaskRun) -> list[tuple[TaskStatus, TaskStatus]]:
    """The run's trajectory as (from, to) pairs."""
    return [(t.from_status, t.to_status) for t in run.transitions]


def st(run: TaskRun) -> TaskStatus:
    """The run's status, read afresh (keeps the type checker from narrowing it)."""
    return run.status


def timeout_kind(run: TaskRun) -> FailureKind | None:
    """The timeout that expired in the current attempt, if any."""
    attempt = run._attempt
    assert attempt is not None
    return attempt.timeout_kind


def stop_flag(run: TaskRun) -> bool:
    """Whether the current attempt's stop flag is set."""
    attempt = run._attempt
    assert attempt is not None
    return attempt.control.stop_requested


def pause_asked(run: TaskRun) -> bool:
    """Whether a pause of the run's body is pending (asked, applied or not yet)."""
    pauses = run._pauses
    return pauses is not None and pauses.ticket is not None


def machine_at(status: TaskStatus, clock: Clock) -> StateMachine:
    """A state machine of task ``t1`` brought to `status` the way a run brings it there."""
    machine = StateMachine.create("t1", "t", max_attempts=3, clock=clock)
    steps: dict[str, Callable[[], object]] = {
        "queued": machine.mark_queued,
        "starting": lambda: machine.mark_starting(executor="thread"),
        "running": lambda: machine.mark_running(pid=1, heartbeat_at=clock.now()),
        "pausing": machine.mark_pausing,
        "paused": machine.mark_paused,
        "stopping": machine.mark_stopping,
    }
    for step in _WAY[status]:
        steps[step]()
    assert machine.status is status
    return machine


def new_attempt(monotonic: Callable[[], float], number: int = 1) -> Attempt:
    """An attempt of task ``t1`` as a run makes it, its body not begun."""
    control = AttemptControl()
    context = RuntimeContext(
        task_id="t1", task_name="t", attempt=number, control=control, monotonic=monotonic
    )
    return Attempt(
        _NO_SUPERVISOR,
        number=number,
        fn=lambda ctx: None,
        args=(),
        kwargs={},
        context=context,
        control=control,
    )


class Carrier:
    """An executor's handle of one attempt that counts its force stops.

    Attributes:
        ends: what `force_stop` answers: True for a child process being ended (its exit
            will be reported), False for a thread, which cannot be.
        forced: how many times it was asked to end by force.
    """

    def __init__(self, *, ends: bool) -> None:
        self.ends = ends
        self.forced = 0

    def force_stop(self, clock: Clock) -> bool:
        self.forced += 1
        return self.ends
