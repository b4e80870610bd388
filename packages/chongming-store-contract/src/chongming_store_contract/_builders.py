"""Builders of snapshots, transitions and commands for store tests.

Every snapshot is produced by `StateMachine` on a `FakeClock`, so the data a
store is asked to keep is exactly what the runtime would hand it.

Example::

    clock = FakeClock()
    snapshot, transitions = build_task("t1", TaskStatus.RUNNING, clock=clock)
    store.create(snapshot, transitions)
    nxt, more = advance(snapshot, StateMachine.mark_pausing, clock=clock)
    store.save(nxt, expect_version=snapshot.status_version, transitions=more)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from chongming_core import (
    Command,
    Failure,
    FailureKind,
    FakeClock,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

__all__ = [
    "BASE_TIME",
    "BuiltTask",
    "advance",
    "build_command",
    "build_task",
    "build_versions",
    "next_version",
]

#: The wall-clock start of every `FakeClock` the builders create.
BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)

_S = TaskStatus
_Step = Callable[[StateMachine], Transition]


def _fail(message: str) -> Failure:
    return Failure.of(FailureKind.EXCEPTION, message, exception_type="RuntimeError")


def _queued(m: StateMachine) -> Transition:
    return m.mark_queued()


def _starting(m: StateMachine) -> Transition:
    return m.mark_starting(executor="thread")


def _running(m: StateMachine) -> Transition:
    return m.mark_running(pid=4242)


_TO_RUNNING: tuple[_Step, ...] = (_queued, _starting, _running)

#: The steps that lead a fresh ``pending`` task to each status.
_PATHS: dict[TaskStatus, tuple[_Step, ...]] = {
    _S.PENDING: (),
    _S.BLOCKED: (lambda m: m.mark_blocked(reason="waiting for upstream"),),
    _S.QUEUED: (_queued,),
    _S.STARTING: (_queued, _starting),
    _S.RUNNING: _TO_RUNNING,
    _S.PAUSING: (*_TO_RUNNING, lambda m: m.mark_pausing(actor="ops", reason="maintenance")),
    _S.PAUSED: (
        *_TO_RUNNING,
        lambda m: m.mark_pausing(actor="ops", reason="maintenance"),
        lambda m: m.mark_paused(),
    ),
    _S.RETRY_WAIT: (
        *_TO_RUNNING,
        lambda m: m.mark_retry_wait(
            _fail("flaky upstream"), retry_at=m.clock.now() + timedelta(seconds=30)
        ),
    ),
    _S.STOPPING: (*_TO_RUNNING, lambda m: m.mark_stopping(actor="ops", reason="release window")),
    _S.SUCCEEDED: (*_TO_RUNNING, lambda m: m.mark_succeeded(outcome={"rows": 42})),
    _S.FAILED: (*_TO_RUNNING, lambda m: m.mark_failed(_fail("boom"))),
    _S.STOPPED: (
        *_TO_RUNNING,
        lambda m: m.mark_stopping(actor="ops", reason="release window"),
        lambda m: m.mark_stopped(actor="ops", reason="release window"),
    ),
    _S.CANCELLED: (_queued, lambda m: m.mark_cancelled(reason="fail_fast")),
    _S.SKIPPED: (lambda m: m.mark_skipped(reason="condition false"),),
    _S.LOST: (*_TO_RUNNING, lambda m: m.mark_lost(reason="worker vanished")),
}


class BuiltTask(NamedTuple):
    """A snapshot and the transitions that led to it; ``store.create(*built)`` stores both."""

    snapshot: TaskSnapshot
    transitions: tuple[Transition, ...]


def _run(machine: StateMachine, steps: Iterable[_Step], clock: FakeClock) -> None:
    for step in steps:
        clock.advance(1)
        step(machine)


def build_task(
    task_id: str,
    status: TaskStatus = TaskStatus.PENDING,
    *,
    name: str = "job",
    clock: FakeClock | None = None,
    max_attempts: int = 3,
    **create_kwargs: Any,
) -> BuiltTask:
    """A task driven by `StateMachine` from ``pending`` to `status`, one fake second a step.

    Args:
        task_id: the task's id.
        status: the status to reach (every status has a fixed, legal path).
        name: the registered name.
        clock: the clock stamping the transitions (a fresh `FakeClock` at `BASE_TIME`
            by default); it is advanced by one second before each transition.
        max_attempts: the attempt budget (3, so ``retry_wait`` is reachable).
        **create_kwargs: more arguments of `StateMachine.create` (label, tags, bucket, ...).

    Returns:
        The snapshot and every transition, versions 1..n.
    """
    clk = clock if clock is not None else FakeClock(BASE_TIME)
    machine = StateMachine.create(
        task_id, name, max_attempts=max_attempts, clock=clk, **create_kwargs
    )
    _run(machine, _PATHS[TaskStatus(status)], clk)
    return BuiltTask(machine.snapshot, machine.transitions)


def _wobble(machine: StateMachine) -> Transition:
    """One more legal version of a running/pausing task (pause requested, then aborted)."""
    if machine.status is _S.RUNNING:
        return machine.mark_pausing(actor="ops", reason="pause requested")
    if machine.status is _S.PAUSING:
        return machine.abort_pause(reason="no checkpoint reached")
    raise ValueError(
        f"next_version() needs a running or pausing task, got {machine.status.value!r}; "
        "build it with build_task(..., TaskStatus.RUNNING)"
    )


def build_versions(
    task_id: str, versions: int, *, clock: FakeClock | None = None, **create_kwargs: Any
) -> BuiltTask:
    """A task with exactly `versions` transitions (any count >= 0).

    The first three move it to ``running``; after that it alternates between
    ``pausing`` and ``running`` (a pause requested and aborted), all legal.
    """
    if versions < 0:
        raise ValueError(f"versions must be >= 0, got {versions}")
    clk = clock if clock is not None else FakeClock(BASE_TIME)
    machine = StateMachine.create(task_id, "job", clock=clk, **create_kwargs)
    steps = list(_TO_RUNNING[:versions])
    steps.extend(_wobble for _ in range(versions - len(steps)))
    _run(machine, steps, clk)
    return BuiltTask(machine.snapshot, machine.transitions)


def advance(
    snapshot: TaskSnapshot,
    *steps: _Step,
    clock: FakeClock | None = None,
) -> BuiltTask:
    """Apply `steps` (e.g. ``StateMachine.mark_queued``) to `snapshot`.

    Returns:
        The new snapshot and only the new transitions (ready for `TaskStore.save`).
    """
    clk = clock if clock is not None else FakeClock(snapshot.updated_at or BASE_TIME)
    machine = StateMachine(snapshot, clock=clk)
    _run(machine, steps, clk)
    return BuiltTask(machine.snapshot, machine.transitions)


def next_version(snapshot: TaskSnapshot, *, clock: FakeClock | None = None) -> BuiltTask:
    """The next legal version of a running or pausing task (see `build_versions`)."""
    return advance(snapshot, _wobble, clock=clock)


def build_command(
    command_id: str,
    task_id: str,
    *,
    action: str = "stop",
    issued_at: datetime = BASE_TIME,
    issued_by: str = "ops@host-a",
    reason: str | None = None,
    bucket: int | None = None,
) -> Command:
    """A fresh, unclaimed command."""
    return Command(
        command_id=command_id,
        task_id=task_id,
        action=action,
        issued_by=issued_by,
        issued_at=issued_at,
        reason=reason,
        bucket=bucket,
    )
