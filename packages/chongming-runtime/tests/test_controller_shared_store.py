"""Controllers sharing a store: write-through, commands, ownership, leases, reconcile (§8.9+)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming_core import (
    ConfigurationError,
    FailureKind,
    FakeClock,
    InMemoryTaskStore,
    StateMachine,
    TaskStatus,
)
from chongming_runtime.controller._controller import Controller
from chongming_runtime.testing import Closer, wait_until
from store_helpers import FlakyStore

S = TaskStatus
WAIT = 10.0


def worker_body(ctx: Any, tenant: str) -> None:
    """Runs until stopped: the checkpoint raises TaskCancelled, so it ends stopped."""
    processed = 0
    while True:
        ctx.checkpoint()
        processed += 1
        ctx.progress(processed, unit="batch")
        threading.Event().wait(0.002)


@pytest.fixture
def controllers(closer: Closer) -> Callable[..., Controller]:
    def make(**kwargs: Any) -> Controller:
        kwargs.setdefault("graceful_stop", 2.0)
        kwargs.setdefault("poll_interval", 0.01)
        return closer.controller(**kwargs)

    return make


def test_a_console_sees_and_controls_the_workers_task(
    controllers: Callable[..., Controller],
) -> None:
    store = InMemoryTaskStore()
    worker = controllers(store=store, owner="worker-1", max_parallel=2)
    worker.register("sync", worker_body)
    run = worker.submit("sync", "租户A", task_id="job-1", bucket_key="tenant-A")
    wait_until(lambda: run.status is S.RUNNING, "the task to run")

    console = controllers(store=store, owner="ops-console")
    # the worker batches non-terminal writes: they reach the store within milliseconds
    wait_until(lambda: [s.task_id for s in console.list_tasks()] == ["job-1"], "the task to show")
    snapshot = console.get("job-1")
    assert snapshot is not None
    assert snapshot.lease_owner == "worker-1"
    assert snapshot.bucket_key == "tenant-A"

    assert console.pause("job-1") is False  # not confirmed: there is no receipt channel
    wait_until(lambda: run.status is S.PAUSED, "the cross-process pause to land")
    wait_until(lambda: console.get("job-1").status is S.PAUSED, "the store to show it")  # type: ignore[union-attr]
    assert console.resume("job-1") is True
    wait_until(lambda: run.status is S.RUNNING, "the cross-process resume to land")
    assert console.stop("job-1", reason="运维停止") is True
    outcome = console.wait("job-1", timeout=WAIT)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    commands = store.commands(task_id="job-1")
    assert [c.action for c in commands] == ["pause", "resume", "stop"]
    assert all(c.issued_by == "ops-console" for c in commands)
    assert all(c.is_complete for c in commands)
    history = store.history("job-1")
    stop = next(t for t in history if t.to_status is S.STOPPING)
    assert stop.reason == "运维停止"
    assert "ops-console" in stop.actor


def test_a_pure_query_client_never_polls(controllers: Callable[..., Controller]) -> None:
    store = InMemoryTaskStore()
    console = controllers(store=store, owner="ops")
    assert not console._poller.running
    console.list_tasks()
    console.stats()
    assert not console._poller.running


def test_forged_commands_are_rejected_and_recorded(controllers: Callable[..., Controller]) -> None:
    from chongming_runtime.persistence._commands import new_command

    store = InMemoryTaskStore()
    worker = controllers(store=store, owner="w")
    worker.register("sync", worker_body)
    worker.submit("sync", "x", task_id="job-1")
    clock = FakeClock()
    forged = [
        new_command(task_id="job-1", action="exec", issued_by="mallory", clock=clock),
        new_command(task_id="ghost", action="stop", issued_by="mallory", clock=clock),
    ]
    for command in forged:
        store.submit_command(command)
    wait_until(
        lambda: all(c.is_complete for c in store.commands()), "the forged rows to be handled"
    )
    results = {c.task_id + "/" + c.action: c.result for c in store.commands()}
    assert results["job-1/exec"] == "rejected: unknown action 'exec'"
    assert results["ghost/stop"] == "rejected: no task 'ghost' in the store"
    assert worker.get("job-1").status is S.RUNNING  # type: ignore[union-attr]


def test_owned_buckets_refuse_foreign_submits_and_poll_from_the_start(
    controllers: Callable[..., Controller], make_controller: Callable[..., Controller]
) -> None:
    store = InMemoryTaskStore()
    node = controllers(store=store, owner="node-a", num_buckets=64, owned_buckets=range(16))
    assert node._poller.running
    assert not node.owns_all_buckets
    assert node.owns_bucket(3)
    assert not node.owns_bucket(40)
    node.register("sync", lambda ctx: None)
    foreign = next(
        k for k in (f"tenant-{i}" for i in range(500)) if node.bucket_policy.bucket_for(k) >= 16
    )
    with pytest.raises(ConfigurationError, match="does not belong to this node"):
        node.submit("sync", bucket_key=foreign)
    with pytest.raises(ConfigurationError, match="bucket_key is required"):
        node.submit("sync")
    with pytest.raises(ConfigurationError, match="out of range"):
        make_controller(num_buckets=8, owned_buckets=[9])
    everything = controllers(num_buckets=4, owned_buckets=range(4))
    assert everything.owns_all_buckets
    everything.register("sync", lambda ctx: 7)
    assert everything.submit("sync").wait(WAIT).value == 7


def test_reconcile_marks_a_dead_workers_tasks_lost(
    controllers: Callable[..., Controller], closer: Closer
) -> None:
    store = InMemoryTaskStore()
    dead_clock = FakeClock()
    dead = closer.controller(store=store, owner="worker-1", clock=dead_clock, lease_ttl=30)
    dead.register("sync", worker_body)
    dead.register("noop", lambda ctx: "done")
    run = dead.submit("sync", "x", task_id="in-flight")
    finished = dead.submit("noop", task_id="finished")
    finished.wait(WAIT)
    wait_until(lambda: run.status is S.RUNNING, "the in-flight task to run")
    dead.flush()
    # worker-1 "dies": it never renews its lease again (its clock never moves)
    clock = FakeClock()
    clock.advance(31)
    survivor = controllers(store=store, owner="worker-2", clock=clock)
    preview = survivor.reconcile(dry_run=True)
    assert [s.task_id for s in preview.lost] == ["in-flight"]
    assert store.get("in-flight").status is S.RUNNING  # type: ignore[union-attr]
    report = survivor.reconcile()
    assert [s.task_id for s in report.lost] == ["in-flight"]
    lost = store.get("in-flight")
    assert lost is not None
    assert lost.status is S.LOST
    assert lost.failure is not None
    assert lost.failure.kind is FailureKind.LOST
    assert store.get("finished").status is S.SUCCEEDED  # type: ignore[union-attr]
    assert store.get("finished").outcome == "done"  # type: ignore[union-attr]
    versions = [t.status_version for t in store.history("in-flight")]
    assert versions == list(range(1, len(versions) + 1))
    # the old supervisor's later writes do not overwrite the verdict
    run.stop()
    run.wait(WAIT)
    dead.flush()
    assert store.get("in-flight").status is S.LOST  # type: ignore[union-attr]
    assert any("ConcurrencyConflict" in f.error for f in dead.persist_failures)
    dead.close(timeout=WAIT)


def _frozen_node(closer: Closer) -> tuple[InMemoryTaskStore, FakeClock, Controller]:
    """Node worker-1 on a fake clock (lease 30 s, touched every 1 s) that does not move
    unless the test moves it: frozen, as a SIGSTOP would freeze it."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    node = closer.controller(
        store=store, owner="worker-1", clock=clock, lease_ttl=30, touch_interval=1
    )
    node.register("sync", worker_body)
    return store, clock, node


def _marked_lost_by_a_survivor(
    controllers: Callable[..., Controller], store: InMemoryTaskStore
) -> list[Any]:
    """worker-2, 31 s later, reconciles: task "in-flight" is marked lost. Its history then."""
    clock = FakeClock()
    clock.advance(31)
    survivor = controllers(store=store, owner="worker-2", clock=clock)
    assert [s.task_id for s in survivor.reconcile().lost] == ["in-flight"]
    return store.history("in-flight")


def test_a_node_that_wakes_to_find_its_task_lost_stops_the_body_there(
    controllers: Callable[..., Controller], closer: Closer
) -> None:
    """A node frozen past its lease (SIGSTOP, a paused VM) wakes after `reconcile` marked
    its running task lost: the store's record stands, and the body here is stopped at its
    next checkpoint instead of running on as a second copy (D177)."""
    store, frozen_clock, frozen = _frozen_node(closer)
    run = frozen.submit("sync", "x", task_id="in-flight")
    wait_until(lambda: run.status is S.RUNNING, "the task to run")
    assert frozen.flush()
    verdict = _marked_lost_by_a_survivor(controllers, store)
    # worker-1 wakes: its next tick renews the lease of a task that moved on meanwhile
    frozen_clock.advance(11)
    frozen.flush()
    outcome = run.wait(WAIT)
    assert outcome.status is S.STOPPED
    trail = [(t.to_status, t.reason) for t in run.transitions]
    assert [status for status, _ in trail[-3:]] == [S.RUNNING, S.STOPPING, S.STOPPED]
    assert "another process wrote this task" in (trail[-2][1] or "")
    frozen.flush()
    stored = store.get("in-flight")
    assert stored is not None
    assert stored.status is S.LOST  # the verdict stands
    assert store.history("in-flight") == verdict
    frozen.close(timeout=WAIT)


def test_a_node_whose_task_was_marked_lost_reports_it_as_the_store_holds_it(
    controllers: Callable[..., Controller], closer: Closer
) -> None:
    """After waking to find its task lost, the node stops its body (D177), and its own
    queries, waits and close report the task as the store holds it: `lost`, never the
    `stopped` of the run here, which no other view shows."""
    store, frozen_clock, frozen = _frozen_node(closer)
    frozen.register("noop", lambda ctx: "done")
    run = frozen.submit("sync", "x", task_id="in-flight")
    other = frozen.submit("noop", task_id="other")
    wait_until(lambda: run.status is S.RUNNING, "the task to run")
    other.wait(WAIT)
    assert frozen.flush()
    verdict = _marked_lost_by_a_survivor(controllers, store)
    frozen_clock.advance(11)  # wakes: its next tick finds the task moved on
    frozen.flush()
    assert run.wait(WAIT).status is S.STOPPED  # the run here: its body was stopped
    got = frozen.get("in-flight")
    assert got is not None
    assert got.status is S.LOST
    assert frozen.wait("in-flight", timeout=WAIT).status is S.LOST
    assert {s.task_id: s.status for s in frozen.list_tasks()} == {
        "in-flight": S.LOST,
        "other": S.SUCCEEDED,
    }
    assert frozen.history("in-flight") == verdict
    assert [o.status for o in frozen.wait_all(timeout=WAIT)] == [S.LOST, S.SUCCEEDED]
    assert sorted(o.status for o in frozen.close(timeout=WAIT)) == [S.LOST, S.SUCCEEDED]


def test_a_wait_timeout_is_checked_before_waiting(
    controllers: Callable[..., Controller],
) -> None:
    """The store's wait (a task held by another process) checks its timeout as a run's
    does: nan waited for ever, a text raised a bare TypeError. ``inf`` is no limit."""
    store = InMemoryTaskStore()
    feeder = controllers(store=store, owner="web")
    later = feeder.enqueue("sync", delay=3600)  # no worker: it waits in the store
    for bad, said in ((float("nan"), "got nan"), ("1", "got '1'"), (-1, ">= 0 seconds")):
        with pytest.raises(ConfigurationError, match=re.escape(said)):
            feeder.wait(later, timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=re.escape(said)):
            feeder.wait_all(timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError, match="still queued"):
        feeder.wait(later, timeout=0.01)
    worker = controllers(store=InMemoryTaskStore(), owner="w")
    worker.register("noop", lambda ctx: "done")
    run = worker.submit("noop")
    assert run.wait(float("inf")).value == "done"
    assert worker.wait(run.task_id, timeout=float("inf")).value == "done"
    with pytest.raises(ConfigurationError, match="close timeout must be a number"):
        worker.close(timeout=float("nan"))
    assert worker.submit("noop").wait(WAIT).value == "done"  # nothing was closed


def _worker_running(
    controllers: Callable[..., Controller], task_id: str, *, lease_ttl: float
) -> tuple[InMemoryTaskStore, FakeClock, Controller]:
    """A worker (touch_interval 1 s, on a fake clock) whose task `task_id` is running."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    worker = controllers(store=store, owner="w", clock=clock, lease_ttl=lease_ttl, touch_interval=1)
    worker.register("sync", worker_body)
    run = worker.submit("sync", "x", task_id=task_id)
    wait_until(lambda: run.status is S.RUNNING, "the task to run")
    return store, clock, worker


def test_leases_are_renewed_on_the_touch_timer(controllers: Callable[..., Controller]) -> None:
    store, clock, worker = _worker_running(controllers, "j", lease_ttl=30)
    worker.flush()
    first = store.get("j")
    assert first is not None
    assert first.lease_until is not None
    clock.advance(11)  # past lease_ttl / 3: the tick renews
    worker.flush()
    renewed = store.get("j")
    assert renewed is not None
    assert renewed.lease_until is not None
    assert renewed.lease_until > first.lease_until
    assert renewed.status_version == first.status_version
    assert renewed.progress is not None  # progress went through touch, not a version bump
    clock.advance(25)
    survivor = controllers(store=store, owner="w2", clock=clock)
    assert survivor.reconcile(dry_run=True).lost == ()


def test_a_node_idle_past_its_lease_submits_with_a_fresh_one(
    controllers: Callable[..., Controller],
) -> None:
    """The lease was computed at construction; a node that first submits after lease_ttl
    must not write an expired lease (reconcile would call its live task lost)."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    worker = controllers(store=store, owner="w", clock=clock, lease_ttl=30, touch_interval=1)
    worker.register("sync", worker_body)
    clock.advance(45)  # idle, longer than lease_ttl
    run = worker.submit("sync", "x", task_id="late")
    wait_until(lambda: run.status is S.RUNNING, "the task to run")
    assert worker.flush()
    stored = store.get("late")
    assert stored is not None
    assert stored.lease_until is not None
    assert stored.lease_until > clock.now()
    console = controllers(store=store, owner="console", clock=clock)
    assert console.reconcile(dry_run=True).lost == ()


@pytest.mark.parametrize(("lease_ttl", "touch_interval"), [(0.5, 1.0), (2.0, 1.0), (1.0, 0.5)])
def test_a_lease_the_touch_timer_cannot_renew_in_time_is_refused(
    lease_ttl: float, touch_interval: float, make_controller: Callable[..., Controller]
) -> None:
    with pytest.raises(ConfigurationError, match="at least 3 x touch_interval"):
        make_controller(
            store=InMemoryTaskStore(), lease_ttl=lease_ttl, touch_interval=touch_interval
        )
    make_controller(
        store=InMemoryTaskStore(), lease_ttl=3 * touch_interval, touch_interval=touch_interval
    )


@pytest.mark.parametrize("lease_ttl", [0.3, 1, 2, 3, 10, 60])
def test_any_lease_ttl_alone_is_accepted_and_its_lease_renewed_in_time(
    controllers: Callable[..., Controller], lease_ttl: float
) -> None:
    """The guide names only lease_ttl: the default touch interval (1 s) follows a shorter
    lease (a third of it), so no lease_ttl alone is refused, and the lease in the store is
    renewed before it expires, over several lease periods (D85)."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    worker = controllers(store=store, owner="w", clock=clock, lease_ttl=lease_ttl)
    assert worker.touch_interval == min(1.0, lease_ttl / 3)
    worker.register("sync", worker_body)
    run = worker.submit("sync", "x", task_id="held")
    wait_until(lambda: run.status is S.RUNNING, "the task to run")
    console = controllers(store=store, owner="console", clock=clock)
    step = lease_ttl / 7
    for _ in range(3 * 7):
        clock.advance(step)  # fires every touch tick that falls due (R23)
        assert worker.flush()
        stored = store.get("held")
        assert stored is not None
        assert stored.lease_until is not None
        assert stored.lease_until > clock.now(), "the lease expired while its holder lived"
        assert console.reconcile(dry_run=True).lost == ()


def test_a_touch_interval_given_too_long_says_why_and_what_would_do(
    make_controller: Callable[..., Controller],
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make_controller(store=InMemoryTaskStore(), lease_ttl=1, touch_interval=1)
    message = str(caught.value)
    assert "lease_ttl (1 s) must be at least 3 x touch_interval (1 s)" in message
    assert "renewed on the touch timer" in message
    assert "at most 0.333333 s" in message
    assert "leave touch_interval out" in message


def test_a_failing_store_never_fails_a_task_and_catches_up(
    controllers: Callable[..., Controller],
) -> None:
    store = FlakyStore()
    controller = controllers(store=store, owner="w")
    controller.register("double", lambda ctx, x: x * 2)
    store.down = True
    outcome = controller.submit("double", 4, task_id="d").wait(WAIT)
    assert outcome.ok
    assert outcome.value == 8
    assert controller.persist_failures
    assert "unreachable" in controller.persist_failures[-1].error
    assert store.get("d") is None
    store.down = False
    assert controller.flush()
    stored = store.get("d")
    assert stored is not None
    assert stored.status is S.SUCCEEDED
    assert stored.outcome == 8
    assert [t.status_version for t in store.history("d")] == [1, 2, 3, 4]


def _orphan(store: InMemoryTaskStore, clock: FakeClock, task_id: str, *, running: bool) -> None:
    """A task left by a holder that died a minute ago (its lease expired)."""
    machine = StateMachine.create(task_id, "sync", clock=clock)
    machine.mark_queued()
    if running:
        machine.mark_starting(executor="thread")
        machine.mark_running()
    snapshot = machine.snapshot.evolve(
        lease_owner="dead-node", lease_until=clock.now() - timedelta(seconds=60)
    )
    store.create(snapshot, machine.transitions)


def test_commands_for_tasks_whose_holder_is_gone_are_settled_not_handed_back_forever(
    controllers: Callable[..., Controller],
) -> None:
    """No live process will ever claim them: a stop of a task that holds nothing is applied in
    the store; anything else is completed with what to do. Handed back at every poll, they
    crowded the oldest-first batch and kept a live task's stop from ever being claimed."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    for index in range(150):
        _orphan(store, clock, f"orphan-{index}", running=False)
    _orphan(store, clock, "orphan-running", running=True)
    worker = controllers(store=store, owner="w", clock=clock, lease_ttl=30, touch_interval=1)
    worker.register("sync", worker_body)
    live = worker.submit("sync", "x", task_id="live")
    wait_until(lambda: live.status is S.RUNNING, "the live task to run")
    assert worker.flush()
    console = controllers(store=store, owner="console", clock=clock)
    assert all(console.stop(f"orphan-{i}", reason="cleanup") for i in range(150))
    assert console.stop("orphan-running", reason="cleanup")
    assert console.pause("orphan-0") is False  # not confirmed across processes
    assert console.stop("live", reason="cleanup")
    worker._poller.poll_once()
    worker._poller.poll_once()
    assert live.wait(WAIT).status is S.STOPPED  # claimed, though behind 151 older commands
    stopped = store.get("orphan-7")
    assert stopped is not None
    assert stopped.status is S.STOPPED
    last = store.history("orphan-7")[-1]
    assert (last.to_status, last.actor, last.reason) == (S.STOPPED, "console (command)", "cleanup")
    running = store.get("orphan-running")
    assert running is not None
    assert running.status is S.RUNNING  # for reconcile() to judge, not for a stop to fake
    results = {c.task_id: c.result for c in store.commands(include_complete=True)}
    assert results["orphan-7"] is not None
    assert results["orphan-7"].startswith("applied: its holder 'dead-node' is gone")
    assert "run reconcile() to mark it lost" in (results["orphan-running"] or "")
    assert store.commands(include_complete=False) == []  # nothing left open


def test_a_row_no_node_ever_leased_is_never_changed_by_a_command(
    controllers: Callable[..., Controller],
) -> None:
    """Written by hand or forged: its commands are completed as ignored, the row untouched."""
    store = InMemoryTaskStore()
    clock = FakeClock()
    machine = StateMachine.create("hand-made", "sync", clock=clock)
    machine.mark_queued()
    store.create(machine.snapshot, machine.transitions)
    worker = controllers(store=store, owner="w", clock=clock, lease_ttl=30, touch_interval=1)
    console = controllers(store=store, owner="console", clock=clock)
    assert console.stop("hand-made", reason="cleanup")
    worker._poller.poll_once()
    row = store.get("hand-made")
    assert row is not None
    assert (row.status, row.status_version) == (S.QUEUED, machine.version)
    (command,) = store.commands(include_complete=True)
    assert command.is_complete
    assert (command.result or "").startswith("ignored: no node holds the task")


def test_a_stop_for_a_live_holder_whose_lease_only_looks_expired_reaches_the_holder(
    controllers: Callable[..., Controller],
) -> None:
    """A node whose clock runs ahead sees the holder's lease as expired: it must not settle
    the stop in the store (the holder would start the task later anyway); the holder
    applies it."""
    store = InMemoryTaskStore()
    ran: list[str] = []
    holder = controllers(store=store, owner="holder", max_parallel=1, lease_ttl=3)
    holder.register("sync", worker_body)
    holder.register("record", lambda ctx: ran.append("ran"))
    blocker = holder.submit("sync", "a", task_id="blocker")
    wait_until(lambda: blocker.status is S.RUNNING, "the blocker to run")
    queued = holder.submit("record", task_id="queued")
    assert holder.flush()
    ahead = FakeClock(datetime.now(UTC) + timedelta(seconds=10))  # 10 s ahead of the holder
    other = controllers(store=store, owner="other", clock=ahead)
    assert other.stop("queued", reason="operator: must not run")
    other._poller.poll_once()  # met first by the node that sees the lease as expired
    holder._poller.poll_once()
    assert queued.wait(WAIT).status is S.STOPPED
    holder.stop("blocker")
    assert ran == []
    stored = store.get("queued")
    assert stored is not None
    assert stored.status is S.STOPPED


def test_the_touch_timer_goes_on_after_a_tick_that_raised(
    controllers: Callable[..., Controller],
) -> None:
    store, clock, node = _worker_running(controllers, "first", lease_ttl=3)
    original = node._pipelines.renew
    calls: list[datetime] = []

    def broken(until: datetime) -> None:
        calls.append(until)
        raise RuntimeError("a transient failure inside one tick")

    node._pipelines.renew = broken  # type: ignore[method-assign]
    clock.advance(1)
    assert calls  # the tick ran and raised
    node._pipelines.renew = original  # type: ignore[method-assign]
    for _ in range(10):
        clock.advance(1)
    assert node.flush()
    stored = store.get("first")
    assert stored is not None
    assert stored.lease_until is not None
    assert stored.lease_until > clock.now()  # still renewed
