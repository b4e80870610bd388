"""16 — the state model: a task is a trajectory, not a boolean (guide §1, §9).

Run: python examples/16_state_model.py
"""

from __future__ import annotations

from chongming_task import TERMINAL_STATUSES, TRANSITIONS, Failure, FailureKind
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import InvalidTransition
from chongming_task.states import TaskStatus


def main() -> None:
    """Walk one task through a retry and a pause, then show what is refused and why."""
    machine = StateMachine.create("t1", "抽取", max_attempts=3)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_retry_wait(Failure.of(FailureKind.TIMEOUT_ATTEMPT, "attempt ran 600s"))
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_pausing(actor="ops", reason="release window")
    machine.mark_paused()
    machine.resume(actor="ops")
    machine.mark_succeeded(outcome={"rows": 42})

    for record in machine.transitions:
        print(
            f"v{record.status_version:<2} {record.from_status.value:>10} -> "
            f"{record.to_status.value:<10} {record.trigger}"
        )
    snapshot = machine.snapshot
    # a timeout is a failure kind of one attempt, never a status of the task
    assert [a.failure.kind for a in snapshot.attempts if a.failure] == [FailureKind.TIMEOUT_ATTEMPT]
    assert snapshot.attempt == 2
    assert snapshot.status is TaskStatus.SUCCEEDED

    refused: InvalidTransition | None = None
    try:
        machine.mark_running()
    except InvalidTransition as exc:
        refused = exc
    assert refused is not None, "a terminal task must refuse to run again"
    print(f"refused: {refused}")
    assert refused.allowed == frozenset()
    assert TRANSITIONS[TaskStatus.SUCCEEDED] == frozenset()
    assert len(TERMINAL_STATUSES) == 6

    # revival is explicit: retry() keeps the attempt history
    lost = StateMachine.create("t2", "load")
    lost.mark_queued()
    lost.mark_starting()
    lost.mark_running()
    lost.mark_lost(Failure.of(FailureKind.LOST, "worker host rebooted"))
    assert lost.can_retry()
    lost.retry(actor="ops", reason="side effects checked")
    print(f"t2 revived: {lost.status.value}, attempts kept: {len(lost.snapshot.attempts)}")
    assert lost.status is TaskStatus.QUEUED


if __name__ == "__main__":
    main()
