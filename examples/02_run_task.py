"""02 — run_task: one line, blocks until the task is terminal, returns a TaskOutcome.

Run: python examples/02_run_task.py
"""

from __future__ import annotations

from typing import Any

from chongming_task import FailureKind, TaskContext, TaskStatus, run_task, task


@task(tags={"io"})
def extract(ctx: TaskContext, source: str, *, batch_size: int = 100) -> dict[str, Any]:
    """Read a source in batches."""
    batches = 0
    for _ in range(0, 1000, batch_size):
        ctx.checkpoint()
        batches += 1
    return {"source": source, "batches": batches}


def broken(ctx: TaskContext) -> None:
    raise ValueError("the source is empty")


def main() -> None:
    outcome = run_task(extract, "s3://bucket/x", batch_size=250, task_id="job-1", name="抽取")
    print(outcome.status.value, outcome.value, "attempt", outcome.snapshot.attempt)
    assert outcome.ok
    assert outcome.value == {"source": "s3://bucket/x", "batches": 4}
    assert outcome.snapshot.name == "抽取"
    assert outcome.snapshot.tags == frozenset({"io"})  # from the @task spec

    outcome = run_task(broken, task_id="job-2")
    assert outcome.failure is not None
    print(outcome.status.value, outcome.failure.kind.value, outcome.failure.message)
    assert outcome.status is TaskStatus.FAILED
    assert outcome.failure.kind is FailureKind.EXCEPTION
    assert outcome.value is None


if __name__ == "__main__":
    main()
