"""`waiting_reason`: why a durable queued task waits, from the worker rows; and
`Controller.waiting_reasons`, which reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chongming_core import FakeClock, InMemoryTaskStore, TaskSnapshot, TaskStatus, WorkerRecord
from chongming_runtime import Controller, waiting_reason

NOW = datetime(2026, 10, 2, 8, 0, tzinfo=UTC)


def _task(**fields: object) -> TaskSnapshot:
    base = TaskSnapshot(task_id="t1", name="resize", status=TaskStatus.QUEUED)
    return base.evolve(**{"durable": True, **fields})


def _worker(
    owner: str = "w1",
    names: tuple[str, ...] = ("resize",),
    buckets: tuple[int, ...] | None = None,
    live: bool = True,
) -> WorkerRecord:
    until = NOW + timedelta(seconds=30) if live else NOW - timedelta(seconds=1)
    return WorkerRecord(
        owner=owner,
        host="h",
        pid=1,
        buckets=buckets,
        names=names,
        capacity={},
        started_at=NOW - timedelta(hours=1),
        last_seen=NOW,
        lease_until=until,
    )


def _reason(snapshot: TaskSnapshot, workers: list[WorkerRecord]) -> str | None:
    served = frozenset(n for w in workers if w.is_live(NOW) for n in w.names)
    return waiting_reason(snapshot, now=NOW, served=served, workers=workers)


def test_no_live_worker_serves_the_name() -> None:
    assert _reason(_task(), []) == "no worker serves 'resize'"
    assert _reason(_task(), [_worker(live=False)]) == "no worker serves 'resize'"
    assert _reason(_task(), [_worker(names=("other",))]) == "no worker serves 'resize'"


def test_no_live_worker_owns_the_bucket() -> None:
    workers = [_worker(buckets=(0, 1)), _worker("w2", buckets=(7,), live=False),
               _worker("w3", names=("other",), buckets=(7,))]  # fmt: skip
    assert _reason(_task(bucket=7), workers) == "no live worker owns bucket 7"
    assert _reason(_task(bucket=1), workers) is None
    assert _reason(_task(bucket=7), [_worker()]) is None  # it owns every bucket


def test_due_later() -> None:
    later = NOW + timedelta(minutes=5)
    assert _reason(_task(run_at=later), [_worker()]) == "due at 2026-10-02 08:05:00 UTC"
    assert _reason(_task(run_at=NOW - timedelta(seconds=1)), [_worker()]) is None


def test_nothing_to_say_of_other_tasks() -> None:
    assert _reason(_task(durable=False), []) is None
    assert _reason(_task(status=TaskStatus.RUNNING), []) is None
    held = _task(lease_owner="w1", lease_until=NOW + timedelta(seconds=5))
    assert _reason(held, []) is None  # claimed: it waits for nobody
    expired = _task(lease_owner="w1", lease_until=NOW - timedelta(seconds=5))
    assert _reason(expired, []) == "no worker serves 'resize'"


def test_a_controller_reads_the_worker_rows_only_for_tasks_that_wait() -> None:
    store = InMemoryTaskStore()
    console = Controller(store=store, owner="console", clock=FakeClock(NOW))
    try:
        waiting = console.enqueue("resize")
        later = console.enqueue("resize", run_at=NOW + timedelta(minutes=5))
        store.register_worker(_worker())
        snapshots = [s for s in (store.get(waiting), store.get(later)) if s is not None]
        assert console.waiting_reasons(snapshots) == {later: "due at 2026-10-02 08:05:00 UTC"}
        gone = NOW + timedelta(minutes=1)  # the worker's row has expired by then
        assert console.waiting_reasons(snapshots, now=gone) == {
            waiting: "no worker serves 'resize'",
            later: "no worker serves 'resize'",
        }
        assert console.waiting_reasons([]) == {}
    finally:
        console.close()
