"""`waiting_reason`: why a durable queued task waits, from the worker rows; and
`Controller.waiting_reasons`, which reads them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

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
    fleet_limits: dict[str, object] | None = None,
    registered_tags: dict[str, object] | None = None,
    num_buckets: int | None = None,
) -> WorkerRecord:
    until = NOW + timedelta(seconds=30) if live else NOW - timedelta(seconds=1)
    capacity: dict[str, object] = {}
    if num_buckets is not None:
        capacity["num_buckets"] = num_buckets
    if fleet_limits is not None:
        capacity["fleet_limits"] = fleet_limits
    if registered_tags is not None:
        capacity["registered_tags"] = registered_tags
    return WorkerRecord(
        owner=owner,
        host="h",
        pid=1,
        buckets=buckets,
        names=names,
        capacity=capacity,
        started_at=NOW - timedelta(hours=1),
        last_seen=NOW,
        lease_until=until,
    )


def _reason(
    snapshot: TaskSnapshot, workers: list[WorkerRecord], held: dict[str, int] | None = None
) -> str | None:
    served = frozenset(n for w in workers if w.is_live(NOW) for n in w.names)
    return waiting_reason(snapshot, now=NOW, served=served, workers=workers, fleet_held=held)


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
    # a task without a bucket is claimed only by a worker that owns every bucket
    assert _reason(_task(), workers) == (
        "no live worker owns every bucket, as a task without a bucket needs"
    )
    assert _reason(_task(), [*workers, _worker("w4")]) is None


def test_a_bucket_past_every_live_workers_count_says_so() -> None:
    def counting(owner: str, count: int | None, buckets: tuple[int, ...]) -> WorkerRecord:
        return _worker(owner, buckets=buckets, num_buckets=count)

    four = [counting("w1", 4, (0, 1)), counting("w2", 4, (2, 3))]
    assert _reason(_task(bucket=26), four) == (
        "no live worker owns bucket 26: the live workers count 4 buckets (--num-buckets), "
        "so none ever owns it; it was enqueued by a node counting more: give every node "
        "the same count"
    )
    # a bucket within the count is only not owned now: no hint
    assert _reason(_task(bucket=26), [counting("w1", 64, (0,))]) == "no live worker owns bucket 26"
    # a row that does not say its count (an older worker): nothing is claimed
    assert _reason(_task(bucket=26), [*four, counting("w3", None, (5,))]) == (
        "no live worker owns bucket 26"
    )


def test_due_later() -> None:
    later = NOW + timedelta(minutes=5)
    assert _reason(_task(run_at=later), [_worker()]) == "due at 2026-10-02 08:05:00 UTC"
    # a row another program wrote with a time UTC cannot hold is shown as it is stored
    far = datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-5)))
    assert _reason(_task(run_at=far), [_worker()]) == "due at 9999-12-31 23:59:00-05:00"
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


def test_every_slot_of_a_fleet_limit_it_needs_is_held() -> None:
    gpu = _task(tags=frozenset({"gpu"}))
    limited = _worker(fleet_limits={"gpu": 2})
    assert _reason(gpu, [limited], {"gpu": 2}) == "fleet limit 'gpu' is full (2 of 2 held)"
    assert _reason(gpu, [limited], {"gpu": 1}) is None  # room: a worker just has not claimed
    assert _reason(gpu, [limited], {}) is None  # not counted: nothing is said
    assert _reason(gpu, [limited]) is None
    assert _reason(_task(), [limited], {"gpu": 2}) is None  # it does not hold the tag
    # a limit one live worker declares holds for every worker: one started without it too
    assert _reason(gpu, [limited, _worker("w2")], {"gpu": 2}) == (
        "fleet limit 'gpu' is full (2 of 2 held)"
    )
    # but not the limit of an expired worker
    assert _reason(gpu, [_worker(live=False, fleet_limits={"gpu": 2}), _worker("w2")],
                   {"gpu": 2}) is None  # fmt: skip
    # workers that cannot take it anyway do not count
    others = [limited, _worker("w2", live=False), _worker("w3", names=("other",))]
    assert _reason(gpu, others, {"gpu": 2}) == "fleet limit 'gpu' is full (2 of 2 held)"
    # workers that limit one tag differently: the smallest limit holds, and is said
    mixed = [limited, _worker("w2", fleet_limits={"gpu": 1})]
    assert _reason(gpu, mixed, {"gpu": 1}) == "fleet limit 'gpu' is full (1 of 1 held)"
    # a limit of 0 holds every task of the tag back
    assert _reason(gpu, [_worker(fleet_limits={"gpu": 0})], {"gpu": 0}) == (
        "fleet limit 'gpu' is full (0: none may run)"
    )
    # a limit shown in a worker row that is not a whole number is not judged
    assert _reason(gpu, [_worker(fleet_limits={"gpu": "2"})], {"gpu": 2}) is None


def test_a_task_enqueued_without_tags_is_judged_by_the_tags_its_workers_register() -> None:
    """A producer that registers nothing enqueues a task with no tags; the worker that
    claims it gives it the tags its registration has (`claim_tags`), and so does the
    reason it waits."""
    untagged = _task()
    gpu_here = _worker(fleet_limits={"gpu": 1}, registered_tags={"resize": ["gpu"]})
    assert _reason(untagged, [gpu_here], {"gpu": 1}) == "fleet limit 'gpu' is full (1 of 1 held)"
    assert _reason(untagged, [gpu_here], {"gpu": 0}) is None
    # another worker registers the name without tags: it can take the task
    plain = _worker("w2", fleet_limits={"gpu": 1})
    assert _reason(untagged, [gpu_here, plain], {"gpu": 1}) is None
    # a task's own tags win over the registered ones
    assert _reason(_task(tags=frozenset({"io"})), [gpu_here], {"gpu": 1}) is None
    # registered tags of another name, or a value that is not a list of text, say nothing
    other = _worker(fleet_limits={"gpu": 1}, registered_tags={"other": ["gpu"]})
    assert _reason(untagged, [other], {"gpu": 1}) is None
    odd = _worker(fleet_limits={"gpu": 1}, registered_tags={"resize": "gpu"})
    assert _reason(untagged, [odd], {"gpu": 1}) is None


def test_every_full_fleet_limit_a_task_would_hold_is_named() -> None:
    both = _task(tags=frozenset({"gpu", "db"}))
    workers = [_worker(fleet_limits={"gpu": 1}), _worker("w2", fleet_limits={"db": 3})]
    assert _reason(both, workers, {"gpu": 1, "db": 3}) == (
        "fleet limits are full: 'db' (3 of 3 held), 'gpu' (1 of 1 held)"
    )
    # either limit holds it back, at every worker
    assert _reason(both, workers, {"gpu": 1, "db": 2}) == "fleet limit 'gpu' is full (1 of 1 held)"
    assert _reason(both, workers, {"gpu": 0, "db": 2}) is None


def test_a_due_time_comes_before_a_full_fleet_limit() -> None:
    later = _task(tags=frozenset({"gpu"}), run_at=NOW + timedelta(minutes=5))
    held = {"gpu": 1}
    assert _reason(later, [_worker(fleet_limits={"gpu": 1})], held) == (
        "due at 2026-10-02 08:05:00 UTC"
    )


def test_a_controller_counts_the_tasks_holding_a_fleet_slot() -> None:
    store = InMemoryTaskStore()
    console = Controller(store=store, owner="console", clock=FakeClock(NOW))
    try:
        waiting = console.enqueue("render", tags=["gpu"])
        untagged = console.enqueue("render")
        store.register_worker(_worker(names=("render",), fleet_limits={"gpu": 2}))
        started = NOW - timedelta(minutes=1)
        holding = TaskSnapshot(
            task_id="h1", name="render", status=TaskStatus.RUNNING, status_version=2,
            attempt=1, tags=frozenset({"gpu"}), durable=True, created_at=started,
            updated_at=started, started_at=started,
        )  # fmt: skip
        store.create(holding)
        # neither a task run in its own process nor one paused before it started holds one
        store.create(holding.evolve(task_id="local", durable=False))
        store.create(holding.evolve(task_id="p1", status=TaskStatus.PAUSED))
        snapshots = [s for s in (store.get(waiting), store.get(untagged)) if s is not None]
        assert console.waiting_reasons(snapshots) == {}  # one slot of two is held
        store.create(holding.evolve(task_id="h2", status=TaskStatus.STOPPING))
        assert console.waiting_reasons(snapshots) == {
            waiting: "fleet limit 'gpu' is full (2 of 2 held)"
        }
    finally:
        console.close()


def test_a_serving_controller_counts_the_registered_tags_of_untagged_tasks(
    make_controller: Callable[..., Controller],
) -> None:
    """End to end in one store: a worker registers ``render`` with tag ``gpu`` under a
    fleet limit of one, and its row says so; a console's reason for an untagged task then
    names the limit once the one slot is held."""
    store = InMemoryTaskStore()
    console = make_controller(store=store, owner="console", clock=FakeClock(NOW))
    worker = make_controller(store=store, owner="w1", clock=FakeClock(NOW), fleet_limits={"gpu": 1})
    worker.register("render", lambda ctx: None, tags=["gpu"])
    worker.serve()
    worker.stop_serving()  # the row stays, expired: make it live again, as if serving
    (row,) = store.workers()
    assert row.capacity["registered_tags"] == {"render": ["gpu"]}
    store.register_worker(
        WorkerRecord(
            owner=row.owner, host=row.host, pid=row.pid, buckets=row.buckets,
            names=row.names, capacity=row.capacity, started_at=row.started_at,
            last_seen=NOW, lease_until=NOW + timedelta(seconds=30),
        )
    )  # fmt: skip
    waiting = console.enqueue("render")
    snapshot = store.get(waiting)
    assert snapshot is not None
    assert not snapshot.tags
    assert console.waiting_reasons([snapshot]) == {}  # no slot is held: it can run
    started = NOW - timedelta(minutes=1)
    store.create(
        TaskSnapshot(
            task_id="h1", name="render", status=TaskStatus.RUNNING, status_version=2,
            attempt=1, tags=frozenset({"gpu"}), durable=True, created_at=started,
            updated_at=started, started_at=started,
        )
    )  # fmt: skip
    assert console.waiting_reasons([snapshot]) == {
        waiting: "fleet limit 'gpu' is full (1 of 1 held)"
    }


def test_active_by_worker_counts_the_tasks_active_under_each_workers_lease() -> None:
    from chongming_runtime import active_by_worker

    store = InMemoryTaskStore()
    started = NOW - timedelta(minutes=1)
    base = TaskSnapshot(
        task_id="x", name="render", status=TaskStatus.RUNNING, status_version=2, attempt=1,
        durable=True, created_at=started, updated_at=started, started_at=started,
        lease_owner="w1", lease_until=NOW + timedelta(seconds=30),
    )  # fmt: skip
    for task_id, status, owner in (
        ("a", TaskStatus.RUNNING, "w1"),
        ("b", TaskStatus.STARTING, "w1"),
        ("c", TaskStatus.STOPPING, "w2"),
        ("d", TaskStatus.SUCCEEDED, "w1"),  # ended: its owner is only a trace
        ("e", TaskStatus.QUEUED, "w2"),  # queued again: not active
    ):
        store.create(base.evolve(task_id=task_id, status=status, lease_owner=owner))
    rows = [_worker("w1"), _worker("w2", live=False), _worker("w3")]
    assert active_by_worker(store, rows) == {"w1": 2, "w2": 1, "w3": 0}
