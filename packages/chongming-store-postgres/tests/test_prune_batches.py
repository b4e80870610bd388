"""prune in small batches keeps exactly what one big prune would keep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming_core import TaskSnapshot, TaskStatus, Transition
from chongming_store_postgres import PostgresTaskStore, _housekeeping

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _finished(task_id: str, minutes: int) -> tuple[TaskSnapshot, list[Transition]]:
    at = T0 + timedelta(minutes=minutes)
    snapshot = TaskSnapshot(
        task_id=task_id, name="job", status=TaskStatus.SUCCEEDED, status_version=1, finished_at=at
    )
    record = Transition(task_id, TaskStatus.PENDING, TaskStatus.SUCCEEDED, "t", "a", None, 1, at)
    return snapshot, [record]


@pytest.mark.postgres
def test_small_batches_prune_the_same_tasks(
    store: PostgresTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_housekeeping, "PRUNE_BATCH_TASKS", 2)
    for i in range(9):
        store.create(*_finished(f"done-{i}", i))
    store.create(TaskSnapshot(task_id="live", name="job", status=TaskStatus.RUNNING))
    assert store.prune(3) == 6
    kept = {s.task_id for s in store.query()}
    assert kept == {"done-6", "done-7", "done-8", "live"}
    assert store.history("done-0") == []
    assert len(store.history("done-8")) == 1
