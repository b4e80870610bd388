"""``make demo``: drive one task through a real trajectory and print every transition.

Run it with ``python -m chongming_task.demo``.
"""

from __future__ import annotations

from chongming_core import (
    Failure,
    FailureKind,
    InvalidTransition,
    StateMachine,
    TaskStatus,
)


def _print_trajectory(machine: StateMachine) -> None:
    for record in machine.transitions:
        reason = f"  ({record.reason})" if record.reason else ""
        print(
            f"  v{record.status_version:<2} {record.from_status.value:>10} -> "
            f"{record.to_status.value:<10} {record.trigger:<26} by {record.actor}{reason}"
        )


def main() -> None:
    """Walk a task through retry, pause, resume and a refused move, printing the trajectory."""
    machine = StateMachine.create("demo-1", "extract", max_attempts=2, label="抽取")
    machine.mark_queued(actor="scheduler")
    machine.mark_starting(executor="thread", actor="scheduler")
    machine.mark_running(actor="executor")
    machine.mark_retry_wait(
        Failure.of(FailureKind.EXCEPTION, "ConnectionError: upstream reset"), actor="runtime"
    )
    machine.mark_starting(executor="thread", actor="scheduler")
    machine.mark_running(actor="executor")
    machine.mark_pausing(actor="ops", reason="release window")
    machine.mark_paused(actor="runtime")
    machine.resume(actor="ops")
    machine.mark_succeeded(outcome={"rows": 42}, actor="executor")

    snapshot = machine.snapshot
    print(f"task {snapshot.task_id} ({snapshot.label}) — trajectory:")
    _print_trajectory(machine)
    print(
        f"final: {snapshot.status.value}, attempt {snapshot.attempt}/{snapshot.max_attempts}, "
        f"outcome {snapshot.outcome}"
    )
    for attempt in snapshot.attempts:
        failure = attempt.failure.message if attempt.failure else "-"
        print(f"  attempt {attempt.number}: {attempt.status.value} ({failure})")
    try:
        machine.mark_running(actor="executor")
    except InvalidTransition as refused:
        print(f"refused, as it must be: {refused}")
    assert snapshot.status is TaskStatus.SUCCEEDED


if __name__ == "__main__":
    main()
