"""Durable work in one process: enqueue by name and JSON, workers that claim and run it."""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    ConcurrencyPolicy,
    ConfigurationError,
    FakeClock,
    InMemoryTaskStore,
    TaskStatus,
    TaskStore,
    WorkerRecord,
)
from chongming_runtime import Controller, Job
from chongming_runtime.controller._serving import CLAIM_COOLDOWN
from chongming_runtime.testing import Closer, wait_until
from chongming_store_sqlite import SqliteTaskStore

S = TaskStatus
WAIT = 15.0


class Ledger:
    """What the bodies did: every (task id, worker) that ran, and the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ran: list[tuple[str, str]] = []
        self.now = 0
        self.most = 0

    def body(self, pause: float = 0.0) -> Callable[..., Any]:
        def run(ctx: Any, value: int, *, worker: str = "", scale: int = 1) -> int:
            with self.lock:
                self.ran.append((ctx.task_id, worker))
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                deadline = time.monotonic() + pause
                while time.monotonic() < deadline:
                    ctx.checkpoint()
                    time.sleep(0.001)
            finally:
                with self.lock:
                    self.now -= 1
            return value * scale

        return run


@pytest.fixture(params=["memory", "sqlite"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], TaskStore]]:
    """Stores that several controllers share: one in-memory store, or one SQLite file
    opened once per controller (as separate processes would)."""
    if request.param == "memory":
        memory = InMemoryTaskStore()
        yield lambda: memory
        return
    opened: list[SqliteTaskStore] = []

    def open_file() -> TaskStore:
        store = SqliteTaskStore(tmp_path / "work.db")
        opened.append(store)
        return store

    yield open_file
    for store in opened:
        store.close()


def failing_once(attempts: list[tuple[str, int]]) -> Callable[[Any], str]:
    """A body whose first attempt fails and second returns "second time"; notes each
    (task id, attempt) in `attempts`."""

    def flaky(ctx: Any) -> str:
        attempts.append((ctx.task_id, ctx.attempt))
        if ctx.attempt == 1:
            raise ConnectionError("first fails")
        return "second time"

    return flaky


def serving(controller: Controller) -> bool:
    return controller.serving


def make(closer: Closer, store: TaskStore, **kwargs: Any) -> Controller:
    kwargs.setdefault("poll_interval", 0.01)
    kwargs.setdefault("graceful_stop", 2.0)
    return closer.controller(store=store, **kwargs)


def one_claim(worker: Controller, name: str, **changes: Any) -> Any:
    """The `ClaimRequest` of one task of `name` by `worker` (as its serving loop makes it)."""
    from chongming_core import ClaimRequest

    now = worker.clock.now()
    return ClaimRequest(
        owner=worker.owner,
        names=frozenset({name}),
        buckets=None,
        limit=1,
        now=now,
        lease_until=now + timedelta(seconds=30),
        **changes,
    )


def test_enqueue_writes_a_durable_task_by_name_without_any_task_code(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    feeder = make(closer, shared(), owner="web")  # registers nothing
    task_id = feeder.enqueue("report", 7, "日报", limit=3, task_id="r-1", priority=5)
    snapshot = feeder.get(task_id)
    assert snapshot is not None
    assert (snapshot.status, snapshot.durable, snapshot.lease_owner) == (S.QUEUED, True, None)
    assert snapshot.arguments == {"args": [7, "日报"], "kwargs": {"limit": 3}}
    assert snapshot.priority == 5
    assert [(t.from_status, t.to_status) for t in feeder.history(task_id)] == [
        (S.PENDING, S.QUEUED)
    ]
    assert feeder.runs() == []  # nothing of it runs here


def test_a_parameter_called_name_is_the_tasks_not_the_calls(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """`submit` and `enqueue` take the task's name positionally only, so a task whose
    parameter is called ``name`` gets it as a keyword argument."""

    def greet(ctx: Any, name: str) -> str:
        return f"hello {name}"

    here = make(closer, shared(), owner="here")
    here.register("greet", greet)
    run = here.submit("greet", name="ann")
    assert run.wait(timeout=WAIT).value == "hello ann"
    task_id = here.enqueue("greet", name="bob")
    stored = here.get(task_id)
    assert stored is not None
    assert stored.arguments == {"args": [], "kwargs": {"name": "bob"}}
    here.serve()
    assert here.wait(task_id, timeout=WAIT).value == "hello bob"


def test_arguments_that_are_not_json_are_refused_and_nothing_is_written(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    feeder = make(closer, shared(), owner="web")
    with pytest.raises(ConfigurationError, match=r"argument 'path' of type PosixPath"):
        feeder.enqueue("load", path=Path("/tmp/x"), task_id="bad")
    with pytest.raises(ConfigurationError, match=r"item 1 of enqueue_many\(\)"):
        feeder.enqueue_many("load", [(1,), 2])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"^item 1 of enqueue_many\(\): argument 0"):
        feeder.enqueue_many("load", [(1,), (object(),)])
    assert feeder.store.query() == []
    feeder.enqueue("load", 1, task_id="taken")
    with pytest.raises(ConfigurationError, match="already exists"):
        feeder.enqueue("load", 2, task_id="taken")
    with pytest.raises(ConfigurationError, match="delay or run_at"):
        feeder.enqueue("load", 1, delay=1, run_at=feeder.clock.now())
    for delay in (1e15, timedelta(days=999_999_999)):  # past the last time a store keeps
        with pytest.raises(ConfigurationError, match="past the year 9999"):
            feeder.enqueue("load", 1, delay=delay, task_id="far")
    assert feeder.store.get("far") is None
    for run_at in (  # times whose UTC no store keeps (years 1 to 9999): refused at the call
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
    ):
        with pytest.raises(ConfigurationError, match="outside the years 1 to 9999 in UTC"):
            feeder.enqueue("load", 1, run_at=run_at, task_id="far")
    assert feeder.store.get("far") is None


def test_enqueue_many_with_a_taken_id_says_which_tasks_it_wrote(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """The other tasks of the call are written and will run: the error lists their ids
    (`written`), generated ones included, so the caller can follow them."""
    from chongming_runtime import Job

    feeder = make(closer, shared(), owner="web")
    feeder.enqueue("load", 0, task_id="taken")
    with pytest.raises(ConfigurationError, match="the other 2 tasks of this call were") as err:
        feeder.enqueue_many("load", [(1,), Job(2, task_id="taken"), Job(3, task_id="mine")])
    written = err.value.written  # type: ignore[attr-defined]
    assert err.value.taken == ("taken",)  # type: ignore[attr-defined]
    assert len(written) == 2
    assert written[1] == "mine"
    for task_id in written:
        stored = feeder.store.get(task_id)
        assert stored is not None
        assert stored.status is S.QUEUED
    taken = feeder.store.get("taken")
    assert taken is not None
    assert taken.arguments == {"args": [0], "kwargs": {}}  # left as it was
    for bad in ("a\nb", "esc\x1b[31m"):  # no worker could register such a name
        with pytest.raises(ConfigurationError, match="holds the control character"):
            feeder.enqueue(bad)
    for items in (5, None, "abc"):
        with pytest.raises(ConfigurationError, match="takes an iterable of items"):
            feeder.enqueue_many("load", items)  # type: ignore[arg-type]


def test_two_workers_share_the_work_and_each_task_runs_exactly_once(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    ids = feeder.enqueue_many(
        "scale", [Job(i, worker="?", scale=2) if i % 2 else (i,) for i in range(40)]
    )
    workers = []
    for name in ("w1", "w2"):
        worker = make(closer, shared(), owner=name, max_parallel=2)
        worker.register("scale", ledger.body(pause=0.003))
        worker.serve()
        workers.append(worker)
    outcomes = [feeder.wait(task_id, timeout=WAIT) for task_id in ids]
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * 40
    assert [o.value for o in outcomes] == [i * 2 if i % 2 else i for i in range(40)]
    assert sorted(task_id for task_id, _ in ledger.ran) == sorted(ids)  # once each
    holders = {feeder.get(task_id).lease_owner for task_id in ids}  # type: ignore[union-attr]
    assert holders == {"w1", "w2"}  # shared
    for task_id in ids[:3]:
        trail = [t.to_status for t in feeder.history(task_id)]
        assert trail == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert ledger.most <= 4


def test_a_worker_claims_only_names_it_registered_and_leaves_the_rest_queued(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    stranger = feeder.enqueue("nobody_serves_this", 1)
    mine = feeder.enqueue("scale", 1)
    worker = make(closer, shared(), owner="w1")
    worker.register("scale", ledger.body())
    worker.serve()
    assert feeder.wait(mine, timeout=WAIT).status is S.SUCCEEDED
    time.sleep(0.05)  # several more claim rounds
    snapshot = feeder.get(stranger)
    assert snapshot is not None
    assert (snapshot.status, snapshot.lease_owner) == (S.QUEUED, None)
    assert feeder.store.served_names(feeder.clock.now()) == frozenset({"scale"})


def test_higher_priority_is_claimed_first(closer: Closer, shared: Callable[[], TaskStore]) -> None:
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    low = feeder.enqueue_many("scale", [(i,) for i in range(3)])
    high = feeder.enqueue("scale", 99, priority=10)
    worker = make(closer, shared(), owner="w1", max_parallel=1)
    worker.register("scale", ledger.body())
    worker.serve()
    for task_id in [*low, high]:
        feeder.wait(task_id, timeout=WAIT)
    assert [task_id for task_id, _ in ledger.ran] == [high, *low]


def test_a_delayed_task_is_not_claimed_before_its_time(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    clock = FakeClock()
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web", clock=clock)
    later = feeder.enqueue("scale", 1, delay=timedelta(minutes=5))
    assert feeder.get(later).run_at == clock.now() + timedelta(minutes=5)  # type: ignore[union-attr]
    worker = make(closer, shared(), owner="w1", clock=clock)
    worker.register("scale", ledger.body())
    worker.serve()
    time.sleep(0.1)  # several claim rounds
    assert ledger.ran == []
    clock.advance(301)
    assert feeder.wait(later, timeout=WAIT).status is S.SUCCEEDED


def test_a_stop_from_the_feeding_process_reaches_the_task_on_its_worker(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    task_id = feeder.enqueue("scale", 1)
    worker = make(closer, shared(), owner="w1")
    worker.register("scale", ledger.body(pause=60))
    worker.serve()
    wait_until(lambda: feeder.get(task_id).status is S.RUNNING, "the task to run")  # type: ignore[union-attr]
    assert feeder.stop(task_id, reason="operator")
    outcome = feeder.wait(task_id, timeout=WAIT)
    assert outcome.status is S.STOPPED
    trail = [t.to_status for t in feeder.history(task_id)]
    assert trail[-2:] == [S.STOPPING, S.STOPPED]


def test_fleet_limits_hold_across_workers_and_local_limits_within_one(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    ids = feeder.enqueue_many("scale", [(i,) for i in range(12)], tags=["gpu"])
    for name in ("w1", "w2", "w3"):
        worker = make(
            closer,
            shared(),
            owner=name,
            concurrency=ConcurrencyPolicy(max_parallel=3, limits={"gpu": 2}),
            fleet_limits={"gpu": 2},
        )
        worker.register("scale", ledger.body(pause=0.02))
        worker.serve()
    for task_id in ids:
        assert feeder.wait(task_id, timeout=WAIT).status is S.SUCCEEDED
    assert ledger.most == 2  # reached, never passed: three workers of room 2 each


def test_a_fleet_limit_holds_for_a_worker_started_without_it(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """A fleet limit belongs to the store: a worker started with no `fleet_limits` holds to
    the one a live worker declares, and one declared smaller elsewhere wins."""
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    ids = feeder.enqueue_many("scale", [(i,) for i in range(8)], tags=["gpu"])
    declaring = make(closer, shared(), owner="w1", max_parallel=1, fleet_limits={"gpu": 3})
    declaring.register("other", ledger.body())  # serves none of these tasks
    declaring.serve()
    stricter = make(closer, shared(), owner="w2", max_parallel=1, fleet_limits={"gpu": 1})
    stricter.register("other", ledger.body())
    stricter.serve()
    unaware = make(closer, shared(), owner="w3", max_parallel=4)  # no fleet_limits
    unaware.register("scale", ledger.body(pause=0.03))
    unaware.serve()
    for task_id in ids:
        assert feeder.wait(task_id, timeout=WAIT).status is S.SUCCEEDED
    assert ledger.most == 1  # the smallest limit a live worker declares, never passed
    (row,) = [r for r in unaware.store.workers() if r.owner == "w3"]
    assert row.capacity["fleet_limits"] == {}  # its row says what it declares: nothing


def test_a_worker_refuses_an_owner_name_a_live_worker_of_another_process_serves_under(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """Two workers under one name would write one row and hold tasks under one name: the
    second is refused while the first is live. A row left by a process of this host that
    is gone (a worker restarted after a crash) is taken over; so is this process's own."""
    import socket
    import subprocess
    import sys

    store = shared()
    now = datetime.now(UTC)

    def row(owner: str, host: str, pid: int) -> WorkerRecord:
        return WorkerRecord(
            owner=owner, host=host, pid=pid, buckets=None, names=("scale",), capacity={},
            started_at=now, last_seen=now, lease_until=now + timedelta(minutes=5),
        )  # fmt: skip

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    store.register_worker(row("w-far", "another-host", 4242))
    store.register_worker(row("w-gone", socket.gethostname(), int(gone.stdout)))
    store.register_worker(row("w-here", socket.gethostname(), os.getpid()))
    far = make(closer, store, owner="w-far")
    far.register("scale", Ledger().body())
    said = r"'w-far' already serves this store from host 'another-host' \(pid 4242\), live"
    with pytest.raises(ConfigurationError, match=said):
        far.serve()
    assert not serving(far)
    for owner in ("w-gone", "w-here"):
        worker = make(closer, store, owner=owner)
        worker.register("scale", Ledger().body())
        worker.serve()
        assert serving(worker)
        (taken,) = [r for r in store.workers() if r.owner == owner]
        assert taken.pid == os.getpid()


def test_workers_are_visible_live_then_expired_after_close(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    worker = make(closer, shared(), owner="w1", max_parallel=3, serve=False)
    worker.register("scale", Ledger().body())
    worker.serve()
    assert serving(worker)
    rows = worker.store.workers()
    assert [(r.owner, r.names, r.capacity["max_parallel"]) for r in rows] == [("w1", ("scale",), 3)]
    assert rows[0].is_live(worker.clock.now())
    worker.close()
    assert not serving(worker)
    (row,) = worker.store.workers()
    assert not row.is_live(worker.clock.now())


def test_a_worker_that_starts_forgets_workers_gone_for_more_than_a_day(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    store = shared()
    now = datetime.now(UTC)
    for owner, ended in (("long-gone", timedelta(days=2)), ("just-left", timedelta(hours=1))):
        left = now - ended
        row = WorkerRecord(
            owner=owner,
            host="h",
            pid=1,
            buckets=None,
            names=("scale",),
            capacity={},
            started_at=left,
            last_seen=left,
            lease_until=left,
        )
        store.register_worker(row)
    worker = make(closer, store, owner="w1")
    worker.register("scale", Ledger().body())
    worker.serve()
    wait_until(
        lambda: [r.owner for r in store.workers()] == ["just-left", "w1"],
        "the row of the worker gone for two days to be forgotten",
    )


def test_serve_needs_a_store_that_keeps_durable_tasks(closer: Closer) -> None:
    class NoDurable(InMemoryTaskStore):
        pass

    NoDurable.supports_durable_work = False  # a store of another backend, say
    controller = make(closer, NoDurable())
    with pytest.raises(ConfigurationError, match="does not keep durable tasks"):
        controller.serve()
    with pytest.raises(ConfigurationError, match="does not keep durable tasks"):
        controller.enqueue("x")


def test_a_waiting_task_is_stopped_paused_and_resumed_in_the_store_by_any_process(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    feeder = make(closer, shared(), owner="web")
    stopped = feeder.enqueue("scale", 1)
    paused = feeder.enqueue("scale", 2)
    assert feeder.stop(stopped, reason="not needed")
    assert feeder.pause(paused)  # paused before its start: nobody runs it, nothing to confirm
    assert feeder.get(paused).status is S.PAUSED  # type: ignore[union-attr]
    ledger = Ledger()
    worker = make(closer, shared(), owner="w1")
    worker.register("scale", ledger.body())
    worker.serve()
    time.sleep(0.1)  # several claim rounds: neither is claimable
    assert ledger.ran == []
    assert feeder.get(stopped).status is S.STOPPED  # type: ignore[union-attr]
    assert feeder.resume(paused)
    assert feeder.wait(paused, timeout=WAIT).value == 2
    assert [task_id for task_id, _ in ledger.ran] == [paused]
    trail = [(t.to_status, t.actor) for t in feeder.history(stopped)]
    assert trail == [(S.QUEUED, "web"), (S.STOPPED, "web")]


def test_a_stop_that_wins_against_a_claim_keeps_the_body_from_running(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """The worker claimed the task, then the feeder stopped it before the worker's start
    was written: the store keeps the stop, and the worker never runs the body."""
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    task_id = feeder.enqueue("scale", 1)
    worker = make(closer, shared(), owner="w1")
    worker.register("scale", ledger.body())
    (claimed,) = worker.store.claim_tasks(one_claim(worker, "scale"))
    assert feeder.stop(task_id, reason="changed my mind")
    worker._take_claimed(claimed)  # what the serving loop does with a claim
    run = worker.run(task_id)
    assert run is not None
    assert run.wait(WAIT).status is S.STOPPED
    assert ledger.ran == []
    stored = feeder.get(task_id)
    assert stored is not None
    assert (stored.status, stored.attempt) == (S.STOPPED, 0)  # the feeder's stop stands
    assert [t.actor for t in feeder.history(task_id)] == ["web", "web"]


def test_a_claimed_task_runs_under_the_whole_runtime(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """The worker's registration decides: its retry policy retries a failing durable task,
    its timeout ends a stuck one, its process executor carries a body in a child, and a
    pause from the feeding process reaches a claimed task (through a command)."""
    import runtime_proc_tasks
    from chongming_core import FailureKind, FixedBackoff, RetryPolicy, Timeout
    from chongming_runtime import ProcessExecutor

    feeder = make(closer, shared(), owner="web")
    attempts: list[int] = []

    def flaky(ctx: Any) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("upstream busy")
        return "third time"

    def stuck(ctx: Any) -> None:
        while True:
            ctx.checkpoint()
            time.sleep(0.005)

    retried = feeder.enqueue("flaky")
    timed_out = feeder.enqueue("stuck")
    in_child = feeder.enqueue("square", 7)
    paused = feeder.enqueue("loop", 0.002)
    worker = make(closer, shared(), owner="w1", max_parallel=4)
    worker.register("flaky", flaky, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0.01)))
    worker.register("stuck", stuck, timeout=Timeout(per_attempt=0.2))
    worker.register("loop", runtime_proc_tasks.loop_forever)
    # a second worker on the same store carries its bodies in child processes
    children = make(closer, shared(), owner="w2", executor=ProcessExecutor())
    children.register("square", runtime_proc_tasks.square)
    worker.serve()
    children.serve()
    outcome = feeder.wait(retried, timeout=WAIT)
    assert (outcome.status, outcome.value, attempts) == (S.SUCCEEDED, "third time", [1, 2, 3])
    ended = feeder.wait(timed_out, timeout=WAIT)
    assert ended.status is S.FAILED
    assert ended.failure is not None
    assert ended.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    squared = feeder.wait(in_child, timeout=WAIT)
    assert squared.value["value"] == 49
    assert squared.value["pid"] != os.getpid()  # carried by a child process
    assert feeder.get(in_child).executor == "process"  # type: ignore[union-attr]
    wait_until(lambda: feeder.get(paused).status is S.RUNNING, "the loop to run")  # type: ignore[union-attr]
    feeder.pause(paused)  # not confirmed across processes (guide §8.9)
    wait_until(lambda: feeder.get(paused).status is S.PAUSED, "the pause to land")  # type: ignore[union-attr]
    assert feeder.resume(paused)
    wait_until(lambda: feeder.get(paused).status is S.RUNNING, "the resume to land")  # type: ignore[union-attr]
    assert feeder.stop(paused)
    assert feeder.wait(paused, timeout=WAIT).status is S.STOPPED


def test_stop_serving_claims_nothing_more_and_lets_held_tasks_finish(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    release = threading.Event()
    feeder = make(closer, shared(), owner="web")
    first = feeder.enqueue("held")
    worker = make(closer, shared(), owner="w1", max_parallel=2)
    worker.register("held", lambda ctx: release.wait(WAIT) and "done")
    worker.serve()
    wait_until(lambda: feeder.get(first).status is S.RUNNING, "the first task to run")  # type: ignore[union-attr]
    worker.stop_serving()
    assert not serving(worker)
    (row,) = worker.store.workers()
    assert not row.is_live(worker.clock.now())  # gone at once
    later = feeder.enqueue("held")
    time.sleep(0.1)  # several claim rounds would have taken it
    assert feeder.get(later).status is S.QUEUED  # type: ignore[union-attr]
    release.set()
    assert feeder.wait(first, timeout=WAIT).value == "done"  # held work goes on
    with pytest.raises(ConfigurationError, match="stopped serving"):
        worker.serve()


class CountedClaims:
    """Wraps a store's `claim_tasks`: when each claim began and ended, its limit, what it found."""

    def __init__(self, store: TaskStore) -> None:
        self.calls: list[tuple[float, float, int, int]] = []
        inner = store.claim_tasks

        def claim_tasks(request: Any) -> Any:
            began = time.monotonic()
            found = inner(request)
            self.calls.append((began, time.monotonic(), request.limit, len(found)))
            return found

        store.claim_tasks = claim_tasks  # type: ignore[method-assign]


def test_while_work_flows_slots_freed_one_at_a_time_are_claimed_together(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    ledger = Ledger()
    feeder = make(closer, shared(), owner="web")
    ids = feeder.enqueue_many("noop", [(n,) for n in range(120)])
    store = shared()
    claims = CountedClaims(store)
    worker = make(closer, store, owner="w1", max_parallel=4)
    worker.register("noop", ledger.body())
    worker.serve()
    for task_id in ids:
        assert feeder.wait(task_id, timeout=WAIT).status is S.SUCCEEDED
    assert sorted(task_id for task_id, _ in ledger.ran) == sorted(ids)  # each ran once
    found = [c for c in claims.calls if c[3] > 0]
    assert sum(c[3] for c in found) == len(ids)
    # a claim within the cooldown of one that found work is made only for three free
    # slots or more (three quarters of max_parallel=4): never one statement per freed slot
    for (_, ended, _, got), (began, _, limit, _) in itertools.pairwise(claims.calls):
        if got and began - ended < CLAIM_COOLDOWN:
            assert limit >= 3, claims.calls


class StartsSeen:
    """Wraps a store: the status of every task its claims returned, and every `starting`
    transition its saves wrote."""

    def __init__(self, store: TaskStore) -> None:
        self.claimed: list[tuple[str, TaskStatus]] = []
        self.saved_starts: list[str] = []
        claim_tasks, save_many = store.claim_tasks, store.save_many

        def claim(request: Any) -> Any:
            found = claim_tasks(request)
            self.claimed.extend((s.task_id, s.status) for s in found)
            return found

        def save(writes: Any) -> Any:
            for write in writes:
                self.saved_starts.extend(
                    t.task_id for t in write.transitions if t.to_status is S.STARTING
                )
            return save_many(writes)

        store.claim_tasks = claim  # type: ignore[method-assign]
        store.save_many = save  # type: ignore[method-assign]


def test_a_worker_claims_and_starts_a_task_in_one_write(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """The claim writes the task's `starting` (D165): the body begins once the claim
    returns, with the start already in the store, and no save writes it again."""
    feeder = make(closer, shared(), owner="web")
    ids = feeder.enqueue_many("seen", [(n,) for n in range(6)])
    seen_in_store: dict[str, TaskStatus] = {}
    store = shared()
    starts = StartsSeen(store)

    def seen(ctx: Any, n: int) -> int:
        found = feeder.get(ctx.task_id)
        assert found is not None
        seen_in_store[ctx.task_id] = found.status
        return n

    worker = make(closer, store, owner="w1", max_parallel=2)
    worker.register("seen", seen)
    worker.serve()
    for task_id in ids:
        assert feeder.wait(task_id, timeout=WAIT).status is S.SUCCEEDED
    assert sorted(starts.claimed) == sorted((task_id, S.STARTING) for task_id in ids)
    assert starts.saved_starts == []
    for task_id in ids:
        assert seen_in_store[task_id] in {S.STARTING, S.RUNNING}  # durable before the body
        moves = [(t.to_status, t.actor) for t in feeder.history(task_id)]
        assert moves == [
            (S.QUEUED, "web"),
            (S.STARTING, "w1"),
            (S.RUNNING, "w1"),
            (S.SUCCEEDED, "w1"),
        ]
    assert worker._scheduler.active == 0  # every slot the claims took was given back


class LeasingOnly(InMemoryTaskStore):
    """A store that leases what it claims and ignores `ClaimRequest.start` (as a store
    written before it did)."""

    def claim_tasks(self, request: Any) -> list[Any]:
        return super().claim_tasks(dataclasses.replace(request, start=None))


def test_a_store_that_only_leases_still_has_its_claims_started_once(closer: Closer) -> None:
    store = LeasingOnly()
    feeder = make(closer, store, owner="web")
    ids = feeder.enqueue_many("double", [(n,) for n in range(5)])
    worker = make(closer, store, owner="w1", max_parallel=2)
    worker.register("double", lambda ctx, n: n * 2)
    worker.serve()
    assert [feeder.wait(t, timeout=WAIT).value for t in ids] == [0, 2, 4, 6, 8]
    for task_id in ids:
        moves = [t.to_status for t in feeder.history(task_id)]
        assert moves == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_a_started_task_this_controller_did_not_start_is_refused_not_left_starting(
    closer: Closer,
) -> None:
    """A claim that hands back a task `starting` under another holder's lease, or in a
    status no claim leaves, is refused at the take (the serving loop notes it, and its
    lease runs out for `reconcile()`), never made a run here."""
    from chongming_core import SnapshotWrite, StateMachine

    store = InMemoryTaskStore()
    feeder = make(closer, store, owner="web")
    task_id = feeder.enqueue("double", 2)
    worker = make(closer, store, owner="w1")
    worker.register("double", lambda ctx, n: n * 2)

    def foreign(leased: Any) -> SnapshotWrite:
        machine = StateMachine(leased)
        transition = machine.mark_starting(executor="thread", actor="w1")
        return SnapshotWrite(machine.snapshot, leased.status_version, (transition,))

    (started,) = store.claim_tasks(one_claim(worker, "double", start=foreign))
    for handed in (
        started.evolve(lease_owner="w2"),
        started.evolve(status=S.RUNNING, status_version=started.status_version + 1),
    ):
        with pytest.raises(ConfigurationError, match="not as this controller starts it"):
            worker._take_claimed(handed)
        assert worker.run(task_id) is None
        assert worker._scheduler.active == 0


def test_a_finished_durable_task_is_queued_again_by_any_process_and_run_once_more(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    attempts: list[str] = []
    allowed = threading.Event()

    def flaky(ctx: Any, value: int) -> int:
        attempts.append(ctx.task_id)
        if not allowed.is_set():
            raise ConnectionError("upstream down")
        return value

    feeder = make(closer, shared(), owner="web")  # registers nothing
    worker = make(closer, shared(), owner="w1")
    worker.register("flaky", flaky)
    worker.serve()
    task_id = feeder.enqueue("flaky", 7)
    assert feeder.wait(task_id, timeout=WAIT).status is S.FAILED
    with pytest.raises(ConfigurationError, match=r"controller\.requeue\("):
        feeder.retry(task_id)  # the local retry says where to go
    allowed.set()
    queued = feeder.requeue(task_id, reason="upstream is back")
    assert (queued.status, queued.lease_owner, queued.max_attempts) == (S.QUEUED, None, 2)
    # the worker that ran it before claims it again (its finished run is replaced)
    outcome = feeder.wait(task_id, timeout=WAIT)
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, 7)
    assert attempts == [task_id, task_id]
    trail = [(t.to_status, t.trigger, t.actor) for t in feeder.history(task_id)]
    assert trail[:5] == [
        (S.QUEUED, "scheduler:queued", "web"),
        (S.STARTING, "scheduler:dispatched", "w1"),
        (S.RUNNING, "executor:launched", "w1"),
        (S.FAILED, "executor:failed", "w1"),
        (S.QUEUED, "control:retry", "web"),
    ]
    assert [status for status, _, _ in trail[5:]] == [S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert feeder.history(task_id)[4].reason == "upstream is back"
    assert worker.get(task_id).attempt == 2  # type: ignore[union-attr]


def test_only_a_finished_durable_task_is_queued_again(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    feeder = make(closer, shared(), owner="web")
    with pytest.raises(ConfigurationError, match="no task 'ghost'"):
        feeder.requeue("ghost")
    waiting = feeder.enqueue("scale", 1)
    with pytest.raises(ConfigurationError, match="is still queued; only a failed, stopped"):
        feeder.requeue(waiting)
    assert feeder.stop(waiting)  # stopped in the store: nobody held it (D144)
    assert feeder.requeue(waiting).status is S.QUEUED
    feeder.register("noop", _noop)
    local = feeder.submit("noop")
    local.wait(timeout=WAIT)
    with pytest.raises(ConfigurationError, match="is not a durable task"):
        feeder.requeue(local.task_id)
    worker = make(closer, shared(), owner="w1")
    worker.register("scale", Ledger().body())
    worker.serve()
    assert feeder.wait(waiting, timeout=WAIT).status is S.SUCCEEDED
    with pytest.raises(ConfigurationError, match="is succeeded; only a failed, stopped"):
        feeder.requeue(waiting)
    assert [t.to_status for t in feeder.history(waiting)][-3:] == [
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]


def _noop(ctx: Any) -> None:
    """A task run here, by `submit`."""


def _running_elsewhere(store: TaskStore, task_id: str, holder: str, until: datetime) -> None:
    """A durable task running under `holder`'s lease, as a worker of another process wrote
    it (nothing here applies its commands)."""
    from chongming_core import StateMachine

    m = StateMachine.create(task_id, "scale", durable=True, arguments={"args": [1], "kwargs": {}})
    m.mark_queued(actor="web")
    m.mark_starting(executor="thread", actor=holder)
    m.mark_running(actor=holder)
    store.create(m.snapshot.evolve(lease_owner=holder, lease_until=until), m.transitions)


def test_a_second_stop_of_a_task_held_elsewhere_sends_no_second_command(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    store = shared()
    _running_elsewhere(store, "t1", "node-x", datetime.now(UTC) + timedelta(days=1))
    feeder = make(closer, store, owner="web")
    assert feeder.pending_command("t1", "stop") is None
    assert feeder.stop("t1", reason="first")
    first = feeder.pending_command("t1", "stop")
    assert first is not None
    assert (first.issued_by, first.reason) == ("web", "first")
    assert feeder.stop("t1", reason="second")  # the first one stands
    assert feeder.pending_command("t1", "pause") is None
    commands = store.commands(task_id="t1")
    assert [(c.action, c.reason) for c in commands] == [("stop", "first")]
    with pytest.raises(ConfigurationError, match="one of stop, pause, resume; got 'halt'"):
        feeder.pending_command("t1", "halt")


def test_a_task_queued_again_is_not_stopped_by_a_stop_sent_to_the_run_that_ended(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    # its holder died before it applied the stop; reconcile marked the task lost
    store = shared()
    long_ago = datetime(2020, 1, 1, tzinfo=UTC)
    _running_elsewhere(store, "t1", "node-dead", long_ago)
    feeder = make(closer, store, owner="web")
    assert feeder.stop("t1", reason="stuck")
    assert feeder.pause("t1") is False  # sent, not confirmed
    assert [r.task_id for r in feeder.reconcile().lost] == ["t1"]
    assert feeder.requeue("t1", reason="try again").status is S.QUEUED
    closed = store.commands(task_id="t1")
    assert [(c.action, c.is_complete) for c in closed] == [("stop", True), ("pause", True)]
    assert all(
        c.result is not None and c.result.startswith("ignored: the task ended lost before")
        for c in closed
    )
    worker = make(closer, shared(), owner="w1")
    worker.register("scale", Ledger().body())
    worker.serve()
    outcome = feeder.wait("t1", timeout=WAIT)
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, 1)
    trail = [t.to_status for t in feeder.history("t1")]
    assert trail[-4:] == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_a_worker_process_is_known_gone_only_on_its_own_host() -> None:
    import socket
    import subprocess
    import sys

    from chongming_runtime import worker_process_gone

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    now = datetime.now(UTC)

    def row(host: str, pid: int) -> WorkerRecord:
        return WorkerRecord(
            owner="w", host=host, pid=pid, buckets=None, names=(), capacity={},
            started_at=now, last_seen=now, lease_until=now + timedelta(minutes=5),
        )  # fmt: skip

    here = socket.gethostname()
    assert worker_process_gone(row(here, int(gone.stdout)))
    assert not worker_process_gone(row(here, os.getpid()))
    assert not worker_process_gone(row("another-host", int(gone.stdout)))


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads Linux's /proc")
def test_a_worker_killed_and_not_yet_reaped_is_gone() -> None:
    """A process killed with SIGKILL whose parent has not waited for it yet (a zombie) still
    answers a signal, but runs no more."""
    import signal
    import socket
    import subprocess
    import sys

    from chongming_runtime import worker_process_gone

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        now = datetime.now(UTC)
        record = WorkerRecord(
            owner="w", host=socket.gethostname(), pid=child.pid, buckets=None, names=(),
            capacity={}, started_at=now, last_seen=now, lease_until=now + timedelta(minutes=5),
        )  # fmt: skip
        assert not worker_process_gone(record)
        os.kill(child.pid, signal.SIGKILL)
        wait_until(lambda: _state_of(child.pid) == "Z", "the child to be a zombie")
        os.kill(child.pid, 0)  # it still answers a signal
        assert worker_process_gone(record)
    finally:
        child.kill()
        child.wait(timeout=60)


def _state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0]


def test_a_task_paused_while_its_worker_waits_to_retry_it_is_resumed_by_that_worker(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """Paused during its backoff, the task is still held: its worker's run is paused before
    its next attempt, under a live lease. A resume from another process is a command to that
    worker, never a write of its own: written in the store, it made the task claimable while
    the paused run held it, the worker claimed it a second time and never ran it, and a
    later stop of the paused run took the row back to an older version."""
    from chongming_core import FixedBackoff, RetryPolicy

    feeder = make(closer, shared(), owner="web")
    ops = make(closer, shared(), owner="ops")
    attempts: list[int] = []

    def flaky(ctx: Any) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("first fails")
        return "second time"

    worker = make(closer, shared(), owner="w1", max_parallel=2)
    worker.register("flaky", flaky, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(30)))
    task_id = feeder.enqueue("flaky")
    worker.serve()

    def status() -> S:
        found = feeder.get(task_id)
        assert found is not None
        return found.status

    wait_until(lambda: status() is S.RETRY_WAIT, "the first attempt to fail")
    ops.pause(task_id)  # a command: its worker holds it
    wait_until(lambda: status() is S.PAUSED, "the pause to land")
    stored = feeder.get(task_id)
    assert stored is not None
    assert stored.lease_owner == "w1"  # still held, paused before its next attempt
    assert ops.resume(task_id)  # sent to w1, which queues and runs it
    assert feeder.wait(task_id, timeout=WAIT).value == "second time"
    assert attempts == [1, 2]
    trail = [(t.status_version, t.to_status, t.actor) for t in feeder.history(task_id)]
    assert [v for v, _, _ in trail] == list(range(1, len(trail) + 1))
    resumed = [(status, actor) for _, status, actor in trail if status is S.QUEUED]
    assert resumed[-1] == (S.QUEUED, "ops (command)")  # applied by the holder
    final = feeder.get(task_id)
    assert final is not None
    assert final.status_version == trail[-1][0]


def test_a_task_waiting_to_retry_whose_worker_died_is_queued_again_by_reconcile(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """Its worker is gone while it waits for its backoff: nobody would ever start its next
    attempt, and neither `retry` (it is not finished) nor a new worker (it is not queued)
    could. `reconcile` queues it again, due at its retry time, and any worker that serves
    it claims its next attempt then; the history says so."""
    from chongming_core import FakeClock, FixedBackoff, RetryPolicy

    feeder = make(closer, shared(), owner="web")
    attempts: list[tuple[str, int]] = []
    flaky = failing_once(attempts)

    policy = RetryPolicy(max_attempts=2, backoff=FixedBackoff(30))
    frozen_clock = FakeClock()  # never advanced: its lease is never renewed, its backoff never ends
    dead = make(closer, shared(), owner="w-dead", clock=frozen_clock, lease_ttl=10)
    dead.register("flaky", flaky, retry=policy)
    task_id = feeder.enqueue("flaky")
    dead.serve()
    wait_until(lambda: feeder.get(task_id).status is S.RETRY_WAIT, "the first attempt to fail")  # type: ignore[union-attr]
    dead.stop_serving()
    waiting = feeder.get(task_id)
    assert waiting is not None
    assert waiting.retry_at is not None
    clock = FakeClock()
    clock.advance(11)  # past w-dead's lease, before the retry is due
    survivor = make(closer, shared(), owner="w2", clock=clock)
    survivor.register("flaky", flaky, retry=policy)
    preview = survivor.reconcile(dry_run=True)
    assert [s.task_id for s in preview.requeued] == [task_id]
    assert preview.adoptable == ()
    report = survivor.reconcile()
    assert [s.task_id for s in report.requeued] == [task_id]
    assert report.changed
    queued = feeder.get(task_id)
    assert queued is not None
    assert (queued.status, queued.lease_owner, queued.run_at) == (S.QUEUED, None, waiting.retry_at)
    assert (queued.attempt, queued.retry_at) == (1, None)
    survivor.serve()
    time.sleep(0.1)  # several claim rounds: not due yet on the survivor's clock
    assert feeder.get(task_id).status is S.QUEUED  # type: ignore[union-attr]
    clock.advance(20)  # the retry is due
    assert feeder.wait(task_id, timeout=WAIT).value == "second time"
    assert attempts == [(task_id, 1), (task_id, 2)]
    trail = [(t.to_status, t.actor) for t in feeder.history(task_id)]
    assert trail[-4:] == [
        (S.QUEUED, "w2"),
        (S.STARTING, "w2"),
        (S.RUNNING, "w2"),
        (S.SUCCEEDED, "w2"),
    ]
    assert trail[-5][0] is S.RETRY_WAIT


def test_a_closing_worker_hands_a_task_waiting_to_retry_back_to_the_queue(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """A worker that leaves (a deploy, a scale-down) does not stop the tasks it holds between
    two attempts: each goes back to the queue, due at its retry time, and another worker
    runs its next attempt then (D207). The history says who handed it back and why."""
    from chongming_core import FakeClock, FixedBackoff, RetryPolicy

    feeder = make(closer, shared(), owner="web")
    attempts: list[tuple[str, int]] = []
    flaky = failing_once(attempts)

    policy = RetryPolicy(max_attempts=2, backoff=FixedBackoff(30))
    leaving = make(closer, shared(), owner="w1", clock=FakeClock())  # its backoff never ends
    leaving.register("flaky", flaky, retry=policy)
    task_id = feeder.enqueue("flaky")
    leaving.serve()
    wait_until(lambda: feeder.get(task_id).status is S.RETRY_WAIT, "the first attempt to fail")  # type: ignore[union-attr]
    waiting = feeder.get(task_id)
    assert waiting is not None
    assert waiting.retry_at is not None

    outcomes = leaving.close(reason="deploy", timeout=WAIT)

    # reported as the store holds it: queued, not stopped
    assert [(o.task_id, o.status) for o in outcomes] == [(task_id, S.QUEUED)]
    assert leaving.persist_failures == []  # its own hand-back is no conflict
    queued = feeder.get(task_id)
    assert queued is not None
    assert (queued.status, queued.lease_owner, queued.lease_until) == (S.QUEUED, None, None)
    assert (queued.run_at, queued.retry_at, queued.attempt) == (waiting.retry_at, None, 1)
    trail = feeder.history(task_id)
    assert [t.to_status for t in trail] == [
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.QUEUED,
    ]
    assert trail[-1].actor == "w1"
    assert trail[-1].reason is not None
    assert "handed back" in trail[-1].reason
    assert "deploy" in trail[-1].reason

    clock = FakeClock()
    staying = make(closer, shared(), owner="w2", clock=clock)
    staying.register("flaky", flaky, retry=policy)
    staying.serve()
    time.sleep(0.1)  # several claim rounds: not due yet
    assert feeder.get(task_id).status is S.QUEUED  # type: ignore[union-attr]
    clock.advance(31)  # the retry is due
    assert feeder.wait(task_id, timeout=WAIT).value == "second time"
    assert attempts == [(task_id, 1), (task_id, 2)]
    assert [(t.to_status, t.actor) for t in feeder.history(task_id)][-5:] == [
        (S.RETRY_WAIT, "w1"),
        (S.QUEUED, "w1"),  # handed back
        (S.STARTING, "w2"),
        (S.RUNNING, "w2"),
        (S.SUCCEEDED, "w2"),
    ]


def test_a_closing_worker_gives_back_a_retry_that_came_due_and_waits_for_a_slot(
    closer: Closer, shared: Callable[[], TaskStore]
) -> None:
    """The retry came due while another task held the worker's only slot: the task is
    ``queued`` under the worker's lease, waiting for the slot. Closing frees the claim (the
    task stays queued, now any worker's) and stops only the task that was running."""
    from chongming_core import FakeClock, FixedBackoff, RetryPolicy
    from chongming_runtime.testing import Gate

    feeder = make(closer, shared(), owner="web")
    gate = Gate(timeout=WAIT)

    flaky = failing_once([])

    clock = FakeClock()
    worker = make(closer, shared(), owner="w1", clock=clock, max_parallel=1)
    worker.register("flaky", flaky, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(30)))
    worker.register("hold", gate.body)
    flaky_id = feeder.enqueue("flaky")
    worker.serve()
    wait_until(lambda: feeder.get(flaky_id).status is S.RETRY_WAIT, "the first attempt to fail")  # type: ignore[union-attr]
    hold_id = feeder.enqueue("hold")
    gate.wait_started()  # the only slot is taken
    clock.advance(31)  # the retry is due: queued here, waiting for the slot
    wait_until(lambda: feeder.get(flaky_id).status is S.QUEUED, "the retry to come due")  # type: ignore[union-attr]
    assert feeder.get(flaky_id).lease_owner == "w1"  # type: ignore[union-attr]

    outcomes = {o.task_id: o.status for o in worker.close(reason="deploy", timeout=WAIT)}

    assert outcomes == {flaky_id: S.QUEUED, hold_id: S.STOPPED}
    assert worker.persist_failures == []
    given_back = feeder.get(flaky_id)
    assert given_back is not None
    assert (given_back.status, given_back.lease_owner, given_back.attempt) == (S.QUEUED, None, 1)
    assert [t.to_status for t in feeder.history(flaky_id)][-2:] == [S.RETRY_WAIT, S.QUEUED]


def test_hand_back_writes_only_a_task_this_worker_holds_and_no_attempt_runs() -> None:
    """`hand_back` reads the row and writes it only when it waits to retry, or is queued,
    under the closing worker's own lease; anything else is left as the store holds it."""
    from chongming_core import ClaimRequest, Failure, FailureKind, FakeClock, StateMachine
    from chongming_runtime.controller._hand_back import hand_back

    clock = FakeClock()
    store = InMemoryTaskStore()

    def leased(task_id: str, owner: str, *moves: str) -> None:
        machine = StateMachine.create(task_id, "job", clock=clock, durable=True, max_attempts=3)
        machine.mark_queued()
        for move in moves:
            if move == "start":
                machine.mark_starting()
                machine.mark_running()
            else:
                machine.mark_retry_wait(
                    Failure.of(FailureKind.EXCEPTION, "down"),
                    retry_at=clock.now() + timedelta(seconds=30),
                )
        snapshot = machine.snapshot.evolve(
            lease_owner=owner, lease_until=clock.now() + timedelta(seconds=30)
        )
        store.create(snapshot, machine.transitions)

    leased("waits", "w1", "start", "retry")
    leased("elsewhere", "w2", "start", "retry")
    leased("runs", "w1", "start")
    leased("claimed", "w1")
    before = {t: store.get(t) for t in ("elsewhere", "runs")}

    queued = hand_back(store, "waits", owner="w1", reason="deploy", clock=clock)
    assert queued is not None
    assert store.get("waits") == queued
    assert (queued.status, queued.lease_owner, queued.run_at) == (
        S.QUEUED,
        None,
        clock.now() + timedelta(seconds=30),
    )
    released = hand_back(store, "claimed", owner="w1", reason="deploy", clock=clock)
    assert released is not None
    assert (released.status, released.lease_owner) == (S.QUEUED, None)
    for task_id in ("elsewhere", "runs", "nosuch"):
        assert hand_back(store, task_id, owner="w1", reason="deploy", clock=clock) is None
    assert {t: store.get(t) for t in ("elsewhere", "runs")} == before
    request = ClaimRequest(
        owner="w3", names=frozenset({"job"}), buckets=None, limit=5, now=clock.now(),
        lease_until=clock.now() + timedelta(seconds=30),
    )  # fmt: skip
    assert [s.task_id for s in store.claim_tasks(request)] == ["claimed"]  # "waits" is not due
