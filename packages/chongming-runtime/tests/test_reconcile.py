"""reconcile_store: expired leases of resource-holding tasks become lost; nothing else changes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

from chongming_core import (
    FailureKind,
    FakeClock,
    InMemoryTaskStore,
    StateMachine,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_runtime.controller._reconcile import reconcile_store

S = TaskStatus


def _put(
    store: InMemoryTaskStore,
    clock: FakeClock,
    task_id: str,
    path: list[str],
    *,
    lease_seconds: float | None = -1,
    bucket: int | None = None,
    owner: str = "worker-1",
    durable: bool = False,
    pipeline_id: str | None = None,
) -> TaskSnapshot:
    machine = StateMachine.create(
        task_id, "job", clock=clock, bucket=bucket, durable=durable,
        arguments={"args": [], "kwargs": {}} if durable else None,
        pipeline_id=pipeline_id, node_id=None if pipeline_id is None else task_id,
    )  # fmt: skip
    for step in path:
        getattr(machine, step)()
    snapshot = machine.snapshot
    if lease_seconds is not None:
        snapshot = snapshot.evolve(
            lease_owner=owner, lease_until=clock.now() + timedelta(seconds=lease_seconds)
        )
    store.create(snapshot, machine.transitions)
    return snapshot


RUNNING = ["mark_queued", "mark_starting", "mark_running"]


def test_expired_running_task_is_lost_with_a_reason_and_a_contiguous_history() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "r", RUNNING)
    report = reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    assert [s.task_id for s in report.lost] == ["r"]
    stored = store.get("r")
    assert stored is not None
    assert stored.status is S.LOST
    assert stored.failure is not None
    assert stored.failure.kind is FailureKind.LOST
    assert stored.failure.retryable
    assert "worker-1" in stored.failure.message
    assert stored.failure.message.endswith("running it again under a new id")
    history = store.history("r")
    assert [t.status_version for t in history] == [1, 2, 3, 4]
    assert history[-1].from_status is S.RUNNING
    assert history[-1].actor == "worker-2"


def test_a_lost_durable_task_is_pointed_to_retry_under_its_own_id() -> None:
    """Its arguments are in the store, so it is queued again under its id (`retry`), not
    submitted under a new one."""
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "d 1", RUNNING, durable=True)
    reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    stored = store.get("d 1")
    assert stored is not None
    assert stored.failure is not None
    assert stored.failure.message.endswith(
        "check side effects before running it again (chongming-task retry 'd 1')"
    )


def test_live_lease_is_untouched_and_idle_tasks_are_adoptable() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "live", RUNNING, lease_seconds=30)
    _put(store, clock, "queued", ["mark_queued"])
    _put(store, clock, "waiting", [*RUNNING, "mark_pausing", "abort_pause"], lease_seconds=10)
    _put(store, clock, "paused-early", ["mark_queued", "mark_paused"])
    _put(store, clock, "done", [*RUNNING, "mark_succeeded"])
    report = reconcile_store(store, actor="w2", clock=clock, buckets=None)
    assert report.lost == ()
    assert {s.task_id for s in report.adoptable} == {"queued", "paused-early"}
    # not judged, and said so: their holders may be alive, or dead with a lease to run out
    assert {s.task_id for s in report.leased} == {"live", "waiting"}
    mine = reconcile_store(store, actor="w2", clock=clock, buckets=None, skip_task_ids={"live"})
    assert {s.task_id for s in mine.leased} == {"waiting"}
    assert store.get("queued").status is S.QUEUED  # type: ignore[union-attr]
    assert store.get("done").status is S.SUCCEEDED  # type: ignore[union-attr]
    clock.advance(31)
    later = reconcile_store(store, actor="w2", clock=clock, buckets=None)
    assert {s.task_id for s in later.lost} == {"live", "waiting"}


def test_in_place_pause_of_a_dead_process_is_lost_through_the_audited_door() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "p", [*RUNNING, "mark_pausing", "mark_paused"])
    report = reconcile_store(store, actor="w2", clock=clock, buckets=None)
    assert [s.task_id for s in report.lost] == ["p"]
    stored = store.get("p")
    assert stored is not None
    assert stored.status is S.LOST
    assert stored.failure is not None
    assert stored.failure.kind is FailureKind.LOST
    assert store.history("p")[-1].trigger == "control:force"


def test_dry_run_writes_nothing() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "r", RUNNING)
    report = reconcile_store(store, actor="w2", clock=clock, buckets=None, dry_run=True)
    assert [s.task_id for s in report.lost] == ["r"]
    assert report.dry_run
    assert not report.changed
    assert store.get("r").status is S.RUNNING  # type: ignore[union-attr]


def test_only_own_buckets_and_never_own_tasks() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "mine", RUNNING, bucket=1)
    _put(store, clock, "theirs", RUNNING, bucket=40)
    _put(store, clock, "held", RUNNING, bucket=2)
    report = reconcile_store(
        store, actor="w2", clock=clock, buckets=range(16), skip_task_ids={"held"}
    )
    assert [s.task_id for s in report.lost] == ["mine"]
    assert store.get("theirs").status is S.RUNNING  # type: ignore[union-attr]
    assert store.get("held").status is S.RUNNING  # type: ignore[union-attr]


def test_a_supervisor_that_writes_first_wins() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    original = _put(store, clock, "r", RUNNING)

    # the supervisor comes back and finishes the task between reconcile's read and its write
    real_save = store.save

    def racing_save(
        snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        machine = StateMachine(original, clock=clock)
        machine.mark_succeeded(outcome=1)
        real_save(machine.snapshot, expect_version=3, transitions=machine.transitions)
        real_save(snapshot, expect_version=expect_version, transitions=transitions)

    store.save = racing_save  # type: ignore[method-assign]
    report = reconcile_store(store, actor="w2", clock=clock, buckets=None)
    assert [s.task_id for s in report.skipped] == ["r"]
    assert report.lost == ()
    assert store.get("r").status is S.SUCCEEDED  # type: ignore[union-attr]


def test_a_lost_attempt_ends_when_its_lease_expired_not_when_it_was_noticed() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    started = clock.now()
    _put(store, clock, "r", RUNNING, lease_seconds=30)  # its holder died; the lease ran out
    clock.advance(2 * 3600)  # noticed two hours later
    reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    stored = store.get("r")
    assert stored is not None
    assert stored.status is S.LOST
    assert stored.finished_at == clock.now()  # when it was declared lost
    last = stored.attempts[-1]
    assert last.started_at == started
    assert last.ended_at == started + timedelta(seconds=30)
    assert stored.elapsed(clock.now()) == 30.0  # not 2 h: nobody vouched for it after that
    # a task never leased (written by hand) ends when it was declared lost, as before
    _put(store, clock, "bare", RUNNING, lease_seconds=None)
    clock.advance(60)
    reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    bare = store.get("bare")
    assert bare is not None
    assert bare.elapsed(clock.now()) == 60.0


def test_a_task_paused_in_place_whose_holder_died_ran_and_paused_until_its_lease() -> None:
    """Its body ran 5 s, then waited at a checkpoint until the process died; found two
    hours later, it shows 5 s of running time and a pause up to its lease's end (D88),
    not two hours of either."""
    clock = FakeClock()
    store = InMemoryTaskStore()
    machine = StateMachine.create("p", "job", clock=clock)
    for step in RUNNING:
        getattr(machine, step)()
    clock.advance(5)
    machine.mark_pausing()
    machine.mark_paused()
    snapshot = machine.snapshot.evolve(
        lease_owner="worker-1", lease_until=clock.now() + timedelta(seconds=30)
    )
    store.create(snapshot, machine.transitions)
    clock.advance(2 * 3600)
    reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    stored = store.get("p")
    assert stored is not None
    assert stored.status is S.LOST
    last = stored.attempts[-1]
    assert (last.number, last.status) == (1, S.LOST)
    assert last.ended_at == snapshot.lease_until
    assert last.paused_seconds == 30.0
    assert stored.elapsed(clock.now()) == 5.0
    assert stored.paused_for(clock.now()) == 30.0


def _damage(store: InMemoryTaskStore, task_id: str, **changes: object) -> object:
    """Replace the task's entry with its stored document, changed (a damaged row)."""
    current = store.get(task_id)
    assert current is not None
    document = {**current.to_dict(), **changes}
    store._tasks[task_id] = document  # type: ignore[assignment]
    return document


def test_a_row_that_cannot_be_read_is_named_and_every_other_task_reconciled() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "crashed", RUNNING)
    _put(store, clock, "victim", RUNNING)
    _put(store, clock, "waiting", ["mark_queued"])
    damaged = _damage(store, "victim", status_version="seven")
    clock.advance(60)
    report = reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    assert [s.task_id for s in report.lost] == ["crashed"]
    assert [s.task_id for s in report.adoptable] == ["waiting"]
    (row,) = report.unreadable
    assert row.task_id == "victim"
    assert row.problem == "status_version must be an integer, got 'seven'"
    stored = store.get("crashed")
    assert stored is not None
    assert stored.status is S.LOST
    assert store._tasks["victim"] is damaged  # not judged: left exactly as it was
    dry = reconcile_store(store, actor="worker-2", clock=clock, buckets=None, dry_run=True)
    assert [r.task_id for r in dry.unreadable] == ["victim"]
    mine = reconcile_store(store, actor="w", clock=clock, buckets=None, skip_task_ids={"victim"})
    assert mine.unreadable == ()  # a task held here is never judged, nor named


class _IgnoresLeaseFilter(InMemoryTaskStore):
    """Answers a query for expired leases with every task of the statuses asked for (as a
    store whose lease column disagrees with its record would)."""

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        if query is not None:
            query = dataclasses.replace(query, lease_expired_before=None)
        return super().query(query)


def test_a_task_whose_record_shows_a_live_lease_is_never_marked_lost() -> None:
    clock = FakeClock()
    store = _IgnoresLeaseFilter()
    _put(store, clock, "alive", RUNNING, lease_seconds=3600)
    _put(store, clock, "gone", RUNNING, lease_seconds=-1)
    report = reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    assert [s.task_id for s in report.lost] == ["gone"]
    alive = store.get("alive")
    assert alive is not None
    assert alive.status is S.RUNNING


def test_a_durable_task_no_worker_claimed_yet_is_work_for_the_fleet_not_an_orphan() -> None:
    """An enqueued task has never had a holder: any worker that serves its name claims it,
    so reconcile neither touches it nor reports it to be resubmitted. A durable task
    whose worker died while it waited holding nothing is reported, as any other."""
    clock = FakeClock()
    store = InMemoryTaskStore()
    for task_id in ("enqueued", "enqueued-paused"):
        machine = StateMachine.create(task_id, "job", clock=clock, durable=True)
        machine.mark_queued()
        if task_id == "enqueued-paused":
            machine.mark_paused()
        store.create(machine.snapshot, machine.transitions)
    _put(store, clock, "held-then-orphaned", ["mark_queued"], lease_seconds=-1)
    orphan = store.get("held-then-orphaned")
    assert orphan is not None
    store.save(orphan.evolve(durable=True), expect_version=orphan.status_version)
    clock.advance(60)
    report = reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    assert [s.task_id for s in report.adoptable] == ["held-then-orphaned"]
    assert report.lost == ()
    for task_id, status in (("enqueued", S.QUEUED), ("enqueued-paused", S.PAUSED)):
        stored = store.get(task_id)
        assert stored is not None
        assert (stored.status, stored.status_version) == (status, 1 if status is S.QUEUED else 2)


def test_waiting_nodes_of_a_pipeline_whose_supervisor_is_gone_are_cancelled() -> None:
    """A pipeline cannot go on after its process ended (guide §8.12): its running node is
    lost, and the nodes waiting for it (blocked), for a slot (queued) or for a retry are
    cancelled, since nothing will ever release or start them and they never ran. A plain
    queued task stays adoptable (§8.11), and a node whose lease runs is not judged."""
    clock = FakeClock()
    store = InMemoryTaskStore()
    _put(store, clock, "p:extract", RUNNING, pipeline_id="p")
    _put(store, clock, "p:load", ["mark_blocked"], pipeline_id="p")
    _put(store, clock, "p:audit", ["mark_queued"], pipeline_id="p")
    _put(store, clock, "plain", ["mark_queued"])
    _put(store, clock, "q:alive", ["mark_blocked"], pipeline_id="q", lease_seconds=60)
    dry = reconcile_store(store, actor="worker-2", clock=clock, buckets=None, dry_run=True)
    assert sorted(s.task_id for s in dry.cancelled) == ["p:audit", "p:load"]
    assert store.get("p:load").status is S.BLOCKED  # type: ignore[union-attr]
    assert not dry.changed
    report = reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    assert report.changed
    assert sorted(s.task_id for s in report.cancelled) == ["p:audit", "p:load"]
    found = {s.task_id: s.status for s in report.cancelled}
    assert found == {"p:load": S.BLOCKED, "p:audit": S.QUEUED}  # as they were found
    assert [s.task_id for s in report.lost] == ["p:extract"]
    assert [s.task_id for s in report.adoptable] == ["plain"]
    for task_id, before in (("p:load", S.BLOCKED), ("p:audit", S.QUEUED)):
        stored = store.get(task_id)
        assert stored is not None
        assert stored.status is S.CANCELLED
        assert stored.failure is not None
        assert stored.failure.kind is FailureKind.CANCELLED
        assert not stored.failure.retryable
        assert "worker-1" in stored.failure.message
        assert "submit the pipeline again" in stored.failure.message
        last = store.history(task_id)[-1]
        assert (last.from_status, last.to_status, last.actor) == (before, S.CANCELLED, "worker-2")
    alive = store.get("q:alive")
    assert alive is not None
    assert alive.status is S.BLOCKED
    again = reconcile_store(store, actor="worker-2", clock=clock, buckets=None)
    assert not again.cancelled
    assert not again.lost
