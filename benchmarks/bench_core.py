"""Core: the cost of a recorded, validated transition against an unchecked copy of the snapshot."""

from __future__ import annotations

import dataclasses
import time

from chongming_core import FakeClock, StateMachine, TaskSnapshot, TaskStatus

ROUNDS = 20_000


def _trajectories(clock: FakeClock) -> float:
    started = time.perf_counter()
    for i in range(ROUNDS):
        machine = StateMachine.create(f"t{i}", "noop", clock=clock)
        machine.mark_queued()
        machine.mark_starting(executor="thread")
        machine.mark_running()
        machine.mark_succeeded(outcome=None)
    return time.perf_counter() - started


def _plain_copies() -> float:
    started = time.perf_counter()
    for i in range(ROUNDS):
        snap = TaskSnapshot(task_id=f"t{i}", name="noop")
        for status in (
            TaskStatus.QUEUED,
            TaskStatus.STARTING,
            TaskStatus.RUNNING,
            TaskStatus.SUCCEEDED,
        ):
            snap = dataclasses.replace(snap, status=status, status_version=snap.status_version + 1)
    return time.perf_counter() - started


def main() -> None:
    """Print transitions per second and the ratio to plain dataclass copies."""
    clock = FakeClock()
    machine_time = min(_trajectories(clock) for _ in range(3))
    plain_time = min(_plain_copies() for _ in range(3))
    transitions = ROUNDS * 4
    print(f"   state machine: {transitions / machine_time:,.0f} transitions/s")
    print(
        f"   baseline (dataclasses.replace, no checks, no history): "
        f"{transitions / plain_time:,.0f} copies/s"
    )
    print(
        f"   ratio: a checked, recorded transition costs {machine_time / plain_time:.1f}x "
        "an unchecked copy"
    )


if __name__ == "__main__":
    main()
