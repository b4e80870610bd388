"""Controller: registration, submit, queries, concurrency, controls and close (guide §8.1–§8.5)."""

from __future__ import annotations

import re
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    ConcurrencyPolicy,
    ConfigurationError,
    FailureKind,
    InMemoryTaskStore,
    RetryPolicy,
    TaskStatus,
    task,
)
from chongming_runtime._table import render_table
from chongming_runtime.controller._controller import Controller
from chongming_runtime.executors.process import ProcessExecutor
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.testing import Closer, Gate, wait_until

S = TaskStatus
WAIT = 10.0


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate(timeout=WAIT)
    yield g
    g.release()


@pytest.fixture
def make_controller(closer: Closer) -> Callable[..., Controller]:
    def make(**kwargs: Any) -> Controller:
        kwargs.setdefault("graceful_stop", 2.0)
        return closer.controller(**kwargs)

    return make


def _statuses(run: TaskRun) -> list[TaskStatus]:
    return [t.to_status for t in run.transitions]


# ---------------------------------------------------------------- registration


def test_register_and_refuse_unknown_and_duplicate_names(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller()
    controller.register("extract", lambda ctx: 1, tags={"io"})
    with pytest.raises(ConfigurationError, match="already registered"):
        controller.register("extract", lambda ctx: 2)
    with pytest.raises(ConfigurationError) as unknown:
        controller.submit("load")
    assert "unknown task name 'load'" in str(unknown.value)
    assert "'extract'" in str(unknown.value)
    assert controller.task_names == ["extract"]
    assert controller.registered("extract").tags == frozenset({"io"})


def test_a_body_that_cannot_take_the_context_is_refused_when_registered(
    make_controller: Callable[..., Controller],
) -> None:
    """Every attempt calls the body as ``fn(ctx, *args, **kwargs)``: one that takes no
    positional parameter would fail each time it ran, so it is refused at once."""
    controller = make_controller()

    def report() -> int:
        return 1

    @task
    def nightly(*, day: str) -> str:
        return day

    with pytest.raises(ConfigurationError) as refused:
        controller.register("report", report)
    message = str(refused.value)
    assert "task 'report'" in message
    assert "report()" in message
    assert "write it as def report(ctx, ...)" in message
    assert "\n" not in message
    nightly_refused = r"nightly\(\*, day: .str.\) takes.*def nightly\(ctx"
    with pytest.raises(ConfigurationError, match=nightly_refused):
        controller.register_all(nightly)
    with pytest.raises(ConfigurationError, match=re.escape("lambda ctx, ...: ...")):
        controller.register("inline", lambda: None)
    assert controller.task_names == []
    # a context under any name, a catch-all, or a callable whose signature is unknown is taken
    controller.register("named", lambda context, n: n)
    controller.register("catch-all", lambda *args: args)
    controller.register("builtin", print)
    assert controller.task_names == ["builtin", "catch-all", "named"]
    assert controller.submit("named", 3).wait(WAIT).value == 3


def test_register_module_and_register_all_use_task_specs(
    make_controller: Callable[..., Controller],
) -> None:
    @task(tags={"io"}, retry=RetryPolicy(max_attempts=2))
    def fetch(ctx: Any) -> int:
        """Fetch the rows."""
        return 1

    @task
    def load(ctx: Any) -> int:
        return 2

    module = types.ModuleType("fake_tasks")
    module.fetch = fetch  # type: ignore[attr-defined]
    module.helper = lambda: None  # type: ignore[attr-defined]
    controller = make_controller()
    assert controller.register_module(module) == ["fetch"]
    assert controller.register_all(load) == ["load"]
    definition = controller.registered("fetch")
    assert definition.description == "Fetch the rows."
    assert definition.retry is not None
    assert definition.retry.max_attempts == 2
    with pytest.raises(ConfigurationError, match="not decorated with @task"):
        controller.register_all(lambda ctx: 0)
    with pytest.raises(ConfigurationError, match="no @task functions"):
        controller.register_module(types.ModuleType("empty"))
    run = controller.submit("fetch")
    assert run.wait(WAIT).value == 1
    assert run.snapshot.max_attempts == 2
    assert run.snapshot.tags == frozenset({"io"})


def test_inline_executor_is_refused(closer: Closer) -> None:
    from chongming_runtime.executors.inline import InlineExecutor

    with pytest.raises(ConfigurationError, match="InlineExecutor"):
        closer.controller(executor=InlineExecutor())


@pytest.mark.parametrize("value", [0, float("inf"), float("nan")])
def test_a_pause_timeout_that_is_no_window_is_refused_at_once(value: float, closer: Closer) -> None:
    # refused here, not at the first submit: no pause() could return within it
    with pytest.raises(ConfigurationError, match="pause_timeout must be > 0 seconds and finite"):
        closer.controller(pause_timeout=value)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"lease_ttl": float("nan")}, "lease_ttl must be > 0 seconds and finite, got nan"),
        ({"lease_ttl": float("inf")}, "lease_ttl must be > 0 seconds and finite, got inf"),
        ({"executor": "process"}, "executor must be an executor such as ThreadExecutor()"),
        ({"artifact_dir": 5}, "artifact_dir must be a folder's path"),
        ({"graceful_stop": -1}, "graceful_stop must be >= 0 seconds, got -1"),
        ({"graceful_stop": float("nan")}, "graceful_stop must be a number of seconds"),
        ({"owner": "a\nb"}, "holds a control character"),
    ],
)
def test_bad_settings_are_refused_when_the_controller_is_made(
    settings: dict[str, object], said: str, closer: Closer
) -> None:
    """Refused in one line at construction, not by a raw Python error or at the first
    submit (a worker that would have started serving first)."""
    with pytest.raises(ConfigurationError) as info:
        closer.controller(**settings)
    assert said in str(info.value)


def test_an_executor_class_is_refused_with_how_to_make_one(closer: Closer) -> None:
    with pytest.raises(ConfigurationError, match=r"write executor=ProcessExecutor\(\)"):
        closer.controller(executor=ProcessExecutor)


# ---------------------------------------------------------------- submit and queries


def test_max_parallel_queues_the_rest_and_the_table_shows_it(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=2)
    controller.register("transform", gate.body)
    runs = [
        controller.submit("transform", f"t{i}", task_id=f"t{i}", label=f"转换-{i + 1}")
        for i in range(4)
    ]
    gate.wait_started(2)
    assert controller.active_count == 2
    assert controller.queued_count == 2
    assert [r.status for r in runs[2:]] == [S.QUEUED, S.QUEUED]
    table = render_table(controller.list_tasks()).splitlines()
    assert table[0].split()[:5] == ["TASK_ID", "NAME", "STATUS", "ATTEMPT", "ELAPSED"]
    queued_row = next(line for line in table if line.startswith("t2"))
    # the label, then the registered name it hides (D87)
    assert queued_row.split()[1:6] == ["转换-3", "(transform)", "queued", "0/1", "-"]
    stats = controller.stats()
    assert stats.running == 2
    assert stats.queued == 2
    assert stats.unfinished == 4
    gate.open.set()
    outcomes = controller.wait_all(timeout=WAIT)
    assert [o.value for o in outcomes] == ["t0", "t1", "t2", "t3"]
    for run in runs:
        assert _statuses(run) == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert controller.stats().succeeded == 4
    assert controller.active_count == 0


def test_wait_all_lists_outcomes_in_submission_order_whatever_order_they_finish(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=3)
    gates = {name: threading.Event() for name in ("a", "b", "c")}
    finished: list[str] = []

    def body(ctx: Any, name: str) -> str:
        assert gates[name].wait(WAIT)
        finished.append(name)
        return name

    controller.register("body", body)
    runs = [controller.submit("body", name, task_id=name) for name in ("a", "b", "c")]
    gates["c"].set()  # the last one finishes first, the first one last
    assert runs[2].wait(WAIT).value == "c"
    gates["b"].set()
    assert runs[1].wait(WAIT).value == "b"
    with pytest.raises(
        TimeoutError, match=r"1 of 3 tasks still unfinished after 0.05s: 'a' \(running\)"
    ):
        controller.wait_all(timeout=0.05)  # one is unfinished: a timeout, nothing changed
    assert runs[0].status is S.RUNNING
    gates["a"].set()
    outcomes = controller.wait_all(timeout=WAIT)
    assert finished == ["c", "b", "a"]
    assert [(o.task_id, o.value) for o in outcomes] == [("a", "a"), ("b", "b"), ("c", "c")]


def test_results_are_durable_in_the_store_before_wait_returns(
    make_controller: Callable[..., Controller],
) -> None:
    store = InMemoryTaskStore()
    controller = make_controller(store=store)
    controller.register("double", lambda ctx, x: x * 2)
    run = controller.submit("double", 21, task_id="d1")
    outcome = run.wait(WAIT)
    stored = store.get("d1")
    assert stored is not None
    assert stored.status is S.SUCCEEDED
    assert stored.outcome == 42
    assert outcome.value == 42
    assert [t.to_status for t in store.history("d1")] == _statuses(run)
    assert [t.status_version for t in store.history("d1")] == [1, 2, 3, 4]
    assert stored.lease_owner == controller.owner


def test_priority_orders_the_ready_queue(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=1)
    controller.register("job", gate.body)
    controller.submit("job", "blocker")
    gate.wait_started()
    controller.submit("job", "low-1")
    controller.submit("job", "urgent", priority=10)
    controller.submit("job", "low-2")
    gate.open.set()
    controller.wait_all(timeout=WAIT)
    assert gate.started == ["blocker", "urgent", "low-1", "low-2"]


def test_named_resources_limit_across_tags(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(concurrency=ConcurrencyPolicy(max_parallel=20, limits={"db": 1}))
    controller.register("sync", gate.body)
    a = controller.submit("sync", "tenant-A", tags=["db"])
    b = controller.submit("sync", "tenant-B", tags=["db"])
    c = controller.submit("sync", "plain", tags=["io"])
    gate.wait_started(2)
    assert {a.status, c.status} <= {S.STARTING, S.RUNNING}
    assert b.status is S.QUEUED
    gate.open.set()
    controller.wait_all(timeout=WAIT)
    assert b.snapshot.status is S.SUCCEEDED


def test_one_finish_that_frees_two_resources_starts_both_waiting_tasks(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(
        concurrency=ConcurrencyPolicy(max_parallel=20, limits={"db": 1, "gpu": 1})
    )
    release = {name: threading.Event() for name in ("both", "db", "gpu")}
    started: list[str] = []

    def body(ctx: Any, name: str) -> None:
        started.append(name)
        assert release[name].wait(WAIT)

    controller.register("body", body)
    both = controller.submit("body", "both", tags=["db", "gpu"])
    db = controller.submit("body", "db", tags=["db"])
    gpu = controller.submit("body", "gpu", tags=["gpu"])
    assert both.status in {S.STARTING, S.RUNNING}  # holds one unit of each resource
    assert [db.status, gpu.status] == [S.QUEUED, S.QUEUED]  # each waits for one resource
    release["db"].set()
    release["gpu"].set()
    release["both"].set()  # its finish gives back both units: both waiting tasks start
    outcomes = controller.wait_all(timeout=WAIT)
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * 3
    assert started[0] == "both"
    assert sorted(started[1:]) == ["db", "gpu"]
    for run in (db, gpu):
        assert _statuses(run) == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert controller.active_count == 0


class _Gated:
    """Task bodies held at a gate each, counting how many run at once."""

    def __init__(self, names: str) -> None:
        self.gates = {name: threading.Event() for name in names}
        self.running: set[str] = set()
        self.peak = 0
        self.guard = threading.Lock()

    def body(self, ctx: Any, name: str) -> None:
        with self.guard:
            self.running.add(name)
            self.peak = max(self.peak, len(self.running))
        assert self.gates[name].wait(WAIT)
        with self.guard:
            self.running.discard(name)


def test_a_pause_between_admission_and_start_gives_the_slot_and_the_admission_back(
    make_controller: Callable[..., Controller], monkeypatch: pytest.MonkeyPatch
) -> None:
    controller = make_controller(max_parallel=1)
    gated = _Gated("ABC")
    gates = gated.gates
    controller.register("t", gated.body)
    original = TaskRun.kick
    paused_in_window: list[bool] = []

    def kick(run: TaskRun) -> None:
        if run.task_id == "B" and not paused_in_window:  # B was admitted and given the slot
            paused_in_window.append(controller.pause("B"))
        original(run)

    monkeypatch.setattr(TaskRun, "kick", kick)
    runs = {name: controller.submit("t", name, task_id=name) for name in "ABC"}
    gates["A"].set()  # A's finish admits B; B is paused before it starts; C gets the slot
    wait_until(lambda: runs["C"].status is S.RUNNING, "C running")
    assert paused_in_window == [True]
    assert runs["B"].status is S.PAUSED
    assert controller.resume("B")
    assert (
        _statuses(runs["B"])[-1] is S.QUEUED
    )  # behind C: the old admission did not survive the pause
    gates["C"].set()
    gates["B"].set()
    outcomes = controller.wait_all(timeout=WAIT)
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * 3
    assert gated.peak == 1  # never two bodies at once under max_parallel=1
    assert _statuses(runs["B"]) == [
        S.QUEUED,
        S.PAUSED,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]


class _HoldsPaused:
    """A run listener that keeps the pausing thread inside its `paused` notification."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_transition(self, run: TaskRun, transition: Any, snapshot: Any) -> None:
        if transition.to_status is S.PAUSED:
            self.entered.set()
            assert self.release.wait(WAIT)

    def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
        """Not needed here."""


def test_a_late_paused_event_neither_frees_the_slot_of_a_restarted_run_nor_unqueues_it(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=1)
    gated = _Gated("ABD")
    gates = gated.gates
    controller.register("t", gated.body)
    a = controller.submit("t", "A", task_id="A")
    b = controller.submit("t", "B", task_id="B")
    wait_until(lambda: a.status is S.RUNNING, "A running")
    slow = _HoldsPaused()
    b.add_listener(slow)
    pausing = threading.Thread(target=controller.pause, args=("B",), daemon=True)
    pausing.start()
    assert slow.entered.wait(WAIT)  # B is paused; the pausing thread is still telling it
    assert controller.resume("B")  # B is queued again; its events wait behind the pause's
    gates["A"].set()  # A's finish gives B the slot
    wait_until(lambda: b.status is S.RUNNING, "B running")
    d = controller.submit("t", "D", task_id="D")
    slow.release.set()  # the late `paused` and `queued` of B reach the controller now
    pausing.join(WAIT)
    assert d.status is S.QUEUED  # B keeps its slot: D waits for it
    assert controller.active_count == 1
    gates["B"].set()
    gates["D"].set()
    outcomes = controller.wait_all(timeout=WAIT)
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * 3
    assert gated.peak == 1
    assert _statuses(b) == [S.QUEUED, S.PAUSED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_a_late_paused_event_does_not_take_a_requeued_run_out_of_the_queue(
    closer: Closer,
) -> None:
    slow = _HoldsPaused()

    class SlowToHear(Controller):
        """The pausing thread is held before the controller hears of the pause."""

        def on_transition(self, run: TaskRun, transition: Any, snapshot: Any) -> None:
            slow.on_transition(run, transition, snapshot)
            super().on_transition(run, transition, snapshot)

    controller = closer.add(SlowToHear(max_parallel=1, graceful_stop=2.0))
    gate = threading.Event()
    controller.register("t", lambda ctx, name: gate.wait(WAIT) and name)
    a = controller.submit("t", "A", task_id="A")
    b = controller.submit("t", "B", task_id="B")
    wait_until(lambda: a.status is S.RUNNING, "A running")
    pausing = threading.Thread(target=controller.pause, args=("B",), daemon=True)
    pausing.start()
    assert slow.entered.wait(WAIT)
    assert controller.resume("B")  # queued again, waiting for A's slot
    slow.release.set()  # the controller hears of the pause only now, B waiting in the queue
    pausing.join(WAIT)
    assert b.status is S.QUEUED
    gate.set()
    assert b.wait(WAIT).value == "B"  # A's finish still found it in the queue
    controller.close(timeout=WAIT)


def test_submit_never_asks_the_pipelines_under_the_controller_lock(
    make_controller: Callable[..., Controller], monkeypatch: pytest.MonkeyPatch
) -> None:
    controller = make_controller()
    coordinator = type(controller._pipelines)
    original = coordinator.holds
    lock_held: list[bool] = []

    def holds(self: Any, task_id: str) -> bool:  # a pipeline's lock is taken in here
        lock_held.append(not _free_for_another_thread(controller))
        return original(self, task_id)

    monkeypatch.setattr(coordinator, "holds", holds)
    controller.register("x", lambda ctx: 1)
    assert controller.submit("x", task_id="explicit").wait(WAIT).value == 1
    assert lock_held == [False]  # node releases take the two locks the other way round


def test_bucket_limit_scans_past_a_blocked_head(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=10, max_parallel_per_bucket=1)
    controller.register("sync", gate.body)
    a0 = controller.submit("sync", "a0", task_id="a0", bucket_key="tenant-A")
    a1 = controller.submit("sync", "a1", task_id="a1", bucket_key="tenant-A")
    b0 = controller.submit("sync", "b0", task_id="b0", bucket_key="tenant-B")
    gate.wait_started(2)
    assert a1.status is S.QUEUED
    assert b0.status in {S.STARTING, S.RUNNING}
    bucket_a = controller.bucket_policy.bucket_for("tenant-A")
    assert a0.snapshot.bucket == bucket_a
    assert a0.snapshot.bucket_key == "tenant-A"
    assert controller.active_in_bucket(bucket_a) == 1
    assert controller.bucket_counts()[bucket_a] == 2
    assert [s.task_id for s in controller.list_tasks(bucket=bucket_a)] == ["a0", "a1"]
    gate.open.set()
    controller.wait_all(timeout=WAIT)


def test_list_tasks_filters(make_controller: Callable[..., Controller]) -> None:
    controller = make_controller()
    controller.register("extract", lambda ctx: 1, tags={"io"})
    controller.register("transform", lambda ctx: 2)
    controller.submit("extract", task_id="e1")
    controller.submit("transform", task_id="t1", label="转换-1")
    controller.wait_all(timeout=WAIT)
    assert [s.task_id for s in controller.list_tasks(tag="io")] == ["e1"]
    assert [s.task_id for s in controller.list_tasks(name_prefix="trans")] == ["t1"]
    assert [s.task_id for s in controller.list_tasks(status="succeeded", limit=1)] == ["e1"]
    assert controller.list_tasks(status=[S.FAILED]) == []
    assert [s.task_id for s in controller.list_tasks(search="转换")] == ["t1"]
    with pytest.raises(ConfigurationError, match="statuses are"):
        controller.list_tasks(status="done")
    assert controller.get("nope") is None


def test_duplicate_task_ids_are_refused(make_controller: Callable[..., Controller]) -> None:
    store = InMemoryTaskStore()
    controller = make_controller(store=store)
    controller.register("noop", lambda ctx: None)
    controller.submit("noop", task_id="same").wait(WAIT)
    with pytest.raises(ConfigurationError, match="never reused"):
        controller.submit("noop", task_id="same")
    other = make_controller(store=store)
    other.register("noop", lambda ctx: None)
    with pytest.raises(ConfigurationError, match="already exists"):
        other.submit("noop", task_id="same")


def test_bad_tags_are_refused_at_submit(make_controller: Callable[..., Controller]) -> None:
    controller = make_controller()
    controller.register("noop", lambda ctx: None)
    with pytest.raises(ConfigurationError, match="tags"):
        controller.submit("noop", tags=[1])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="single string"):
        controller.submit("noop", tags="io")


# ---------------------------------------------------------------- controls


def test_pause_keeps_the_slot_and_resume_continues(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=1)
    controller.register("job", gate.body)
    first = controller.submit("job", "first", task_id="first")
    second = controller.submit("job", "second", task_id="second")
    gate.wait_started()
    assert controller.pause("first", timeout=WAIT) is True
    assert first.status is S.PAUSED
    assert controller.active_count == 1
    assert second.status is S.QUEUED
    assert controller.resume("first") is True
    gate.open.set()
    controller.wait_all(timeout=WAIT)
    assert _statuses(first) == [
        S.QUEUED, S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip
    assert second.snapshot.status is S.SUCCEEDED


def test_stop_of_a_queued_task_is_immediate_and_its_body_never_runs(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=1)
    controller.register("job", gate.body)
    controller.submit("job", "running")
    queued = controller.submit("job", "queued", task_id="q")
    gate.wait_started()
    assert controller.stop("q", reason="手工干预") is True
    assert _statuses(queued) == [S.QUEUED, S.STOPPED]
    assert queued.snapshot.failure is not None
    assert queued.snapshot.failure.kind is FailureKind.CANCELLED
    assert controller.stop("q") is False
    assert controller.stop("missing") is False
    gate.open.set()
    controller.wait_all(timeout=WAIT)
    assert "queued" not in gate.started


def test_stop_all_counts_requests_and_close_stops_queued_without_running_them(
    gate: Gate, closer: Closer
) -> None:
    controller = closer.controller(max_parallel=1, graceful_stop=2.0)
    controller.register("job", gate.body)
    running = controller.submit("job", "running")
    waiting = [controller.submit("job", f"w{i}") for i in range(3)]
    gate.wait_started()
    outcomes = controller.close(reason="shutdown", timeout=WAIT)
    assert len(outcomes) == 4
    assert running.status is S.STOPPED
    assert _statuses(running)[-2:] == [S.STOPPING, S.STOPPED]
    for run in waiting:
        assert _statuses(run) == [S.QUEUED, S.STOPPED]
    assert gate.started == ["running"]
    with pytest.raises(ConfigurationError, match="closed"):
        controller.submit("job", "late")


def test_stop_all_returns_the_number_of_requests(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=1)
    controller.register("job", gate.body)
    controller.submit("job", "a")
    controller.submit("job", "b")
    gate.wait_started()
    assert controller.stop_all(reason="drain") == 2
    controller.wait_all(timeout=WAIT)
    assert controller.stop_all() == 0
    assert controller.stats().stopped == 2


def test_retry_reruns_a_stopped_task_under_the_same_id(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=1)
    calls: list[int] = []

    def flaky(ctx: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return len(calls)

    controller.register("flaky", flaky)
    run = controller.submit("flaky", task_id="f")
    assert run.wait(WAIT).status is S.FAILED
    again = controller.retry("f", reason="operator retry")
    outcome = again.wait(WAIT)
    assert outcome.value == 2
    assert outcome.snapshot.attempt == 2
    assert [a.status for a in outcome.attempts] == [S.FAILED, S.SUCCEEDED]
    history = controller.history("f")
    assert [t.to_status for t in history] == [
        S.QUEUED, S.STARTING, S.RUNNING, S.FAILED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip
    assert history[4].trigger == "control:retry"
    with pytest.raises(ConfigurationError, match="not held by this process"):
        controller.retry("elsewhere")


def test_retry_of_a_task_not_held_here_says_whether_it_exists(
    make_controller: Callable[..., Controller],
) -> None:
    """The refusal tells "no such task" apart from "held by another process"."""
    store = InMemoryTaskStore()
    elsewhere = make_controller(store=store, owner="elsewhere")
    elsewhere.register("one", lambda ctx: 1)
    assert elsewhere.submit("one", task_id="theirs").wait(WAIT).ok
    assert elsewhere.flush()
    here = make_controller(store=store, owner="here")
    with pytest.raises(ConfigurationError) as unknown:
        here.retry("never-submitted")
    assert "(no such task)" in str(unknown.value)
    assert "found" not in str(unknown.value)
    with pytest.raises(ConfigurationError) as theirs:
        here.retry("theirs")
    assert "(it is in the store)" in str(theirs.value)
    assert "resubmit it under a new task id" in str(theirs.value)


def test_artifact_folders_of_controller_tasks(
    make_controller: Callable[..., Controller], tmp_path: Path, closer: Closer
) -> None:
    """A controller task gets a folder per attempt from Controller(artifact_dir=...), and
    without one the failure names the Controller as a place to give it."""

    def write(ctx: Any) -> str:
        folder = ctx.artifact_dir
        (folder / "part-0.txt").write_text("rows")
        return str(folder)

    without = make_controller()
    without.register("write", write)
    outcome = without.submit("write", task_id="no-folder").wait(WAIT)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert "has no artifact folder" in outcome.failure.message
    assert "Controller(...)" in outcome.failure.message

    with_folder = make_controller(artifact_dir=tmp_path)
    with_folder.register("write", write)
    outcome = with_folder.submit("write", task_id="with-folder").wait(WAIT)
    assert outcome.value == str(tmp_path / "with-folder" / "attempt-1")
    assert (tmp_path / "with-folder" / "attempt-1" / "part-0.txt").read_text() == "rows"


def test_wait_times_out_without_changing_anything(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller()
    controller.register("job", gate.body)
    run = controller.submit("job", task_id="j")
    gate.wait_started()
    with pytest.raises(TimeoutError):
        controller.wait("j", timeout=0.05)
    assert run.status is S.RUNNING
    gate.open.set()
    assert controller.wait("j", timeout=WAIT).ok


@pytest.mark.parametrize("field", ["task_id", "label", "bucket_key", "tags"])
@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("a\x00b", "NUL byte"),
        # a lone surrogate (bytes that were not UTF-8, decoded leniently: a shell argument, a
        # file name) has no UTF-8 form: no store keeps it, so the task would run unrecorded
        ("caf\udce9", "not valid Unicode"),
    ],
)
def test_text_no_store_can_keep_is_refused_at_submit(
    make_controller: Callable[..., Controller], field: str, bad: str, why: str
) -> None:
    controller = make_controller()
    controller.register("noop", lambda ctx: None)
    value: Any = {bad} if field == "tags" else bad
    with pytest.raises(ConfigurationError, match=why):
        controller.submit("noop", **{field: value})
    assert controller.stats().total == 0
    with pytest.raises(ConfigurationError, match=why):
        controller.register(f"name{bad}", lambda ctx: None)
    with pytest.raises(ConfigurationError, match=why):
        controller.stop("anything", reason=bad)


@pytest.mark.parametrize("priority", [2**63, -(2**63) - 1, 10**30])
def test_a_priority_no_store_can_keep_is_refused_at_submit(
    make_controller: Callable[..., Controller], priority: int
) -> None:
    controller = make_controller()
    controller.register("noop", lambda ctx: None)
    with pytest.raises(ConfigurationError, match="64-bit integer"):
        controller.submit("noop", priority=priority)
    assert controller.stats().total == 0
    assert controller.submit("noop", priority=2**63 - 1).wait(WAIT).ok


def test_prune_forgets_dropped_tasks_and_reads_the_store_outside_the_lock(
    make_controller: Callable[..., Controller],
) -> None:
    store = InMemoryTaskStore()
    controller = make_controller(store=store, max_parallel=2)
    gate = Gate()
    controller.register("quick", lambda ctx, n: n)
    controller.register("held", gate.body)
    for i in range(5):  # one after the other: q3 and q4 finish last
        assert controller.submit("quick", i, task_id=f"q{i}").wait(WAIT).value == i
    held = controller.submit("held", "h", task_id="held")
    gate.wait_started(1)
    lock_free: list[bool] = []
    original_get = store.get

    def get(task_id: str) -> Any:
        lock_free.append(_free_for_another_thread(controller))
        return original_get(task_id)

    store.get = get  # type: ignore[method-assign]
    assert controller.prune(keep_terminal=2) == 3
    assert len(lock_free) == 5  # the five finished tasks were looked up ...
    assert all(lock_free)  # ... while another thread could schedule
    assert sorted(r.task_id for r in controller.runs()) == ["held", "q3", "q4"]
    assert controller.get("q0") is None
    assert held.status is S.RUNNING
    gate.open.set()
    assert held.wait(WAIT).status is S.SUCCEEDED


def _free_for_another_thread(controller: Controller) -> bool:
    """Whether another thread could take the controller's lock right now."""
    free: list[bool] = []

    def probe() -> None:
        got = controller._lock.acquire(blocking=False)
        free.append(got)
        if got:
            controller._lock.release()

    prober = threading.Thread(target=probe)
    prober.start()
    prober.join(WAIT)
    return free[0]


def test_a_second_run_under_a_taken_id_loses_the_race_instead_of_orphaning_one(
    make_controller: Callable[..., Controller],
) -> None:
    store = InMemoryTaskStore()
    controller = make_controller(store=store)
    controller.register("x", lambda ctx: "ran")
    original_get = store.get
    inner: list[TaskRun] = []
    overtaken: list[bool] = []

    def get(task_id: str) -> Any:  # the id check of the outer submit: another gets in first
        if task_id == "dup" and not overtaken:
            overtaken.append(True)
            inner.append(controller.submit("x", task_id="dup"))
        return None if task_id == "dup" else original_get(task_id)

    store.get = get  # type: ignore[method-assign]
    with pytest.raises(ConfigurationError, match="'dup' is already taken"):
        controller.submit("x", task_id="dup")
    assert inner[0].wait(WAIT).value == "ran"
    assert [r.task_id for r in controller.runs()] == ["dup"]
    assert controller.runs()[0] is inner[0]


def test_two_retries_of_one_run_start_it_once(
    make_controller: Callable[..., Controller], monkeypatch: pytest.MonkeyPatch
) -> None:
    controller = make_controller()
    controller.register("x", _fails_once())
    first = controller.submit("x", task_id="once")
    assert first.wait(WAIT).status is S.FAILED
    original = TaskRun.recipe
    inner: list[TaskRun] = []

    def recipe(run: TaskRun) -> Any:  # the outer retry is overtaken by another one
        if not inner:
            inner.append(run)  # a placeholder while the inner retry runs
            inner[0] = controller.retry("once")
        return original(run)

    monkeypatch.setattr(TaskRun, "recipe", recipe)
    with pytest.raises(ConfigurationError, match="'once' was retried already"):
        controller.retry("once")
    assert inner[0].wait(WAIT).value == "ran"
    assert controller.runs() == [inner[0]]
    assert [t.to_status for t in inner[0].transitions].count(S.STARTING) == 2  # one rerun


def test_prune_never_forgets_a_run_retried_while_it_reads_the_store(
    make_controller: Callable[..., Controller],
) -> None:
    store = InMemoryTaskStore()
    controller = make_controller(store=store)
    controller.register("x", _fails_once())
    old = controller.submit("x", task_id="old")
    assert old.wait(WAIT).status is S.FAILED
    assert controller.submit("x", task_id="new").wait(WAIT).value == "ran"
    original_get = store.get
    revived: list[TaskRun] = []
    retried: list[bool] = []

    def get(task_id: str) -> Any:  # prune has listed "old" as finished; it is retried now
        if task_id == "old" and not retried:
            retried.append(True)
            revived.append(controller.retry("old"))
        return original_get(task_id)

    store.get = get  # type: ignore[method-assign]
    assert controller.prune(keep_terminal=1) == 1  # "old" left the store
    assert revived[0].wait(WAIT).value == "ran"
    assert controller.run("old") is revived[0]  # the retried run is still held here


def _fails_once() -> Callable[[Any], str]:
    calls: list[int] = []

    def body(ctx: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("the first run fails")
        return "ran"

    return body


def test_a_submit_that_races_close_is_refused_not_left_behind(
    monkeypatch: pytest.MonkeyPatch,
    closer: Closer,
) -> None:
    """close() snapshots the runs it stops and waits for; a submit that checked "not closing"
    just before must not slip a run in after that snapshot (close would neither wait for it
    nor keep the store open for its writes)."""
    controller = closer.controller(store=InMemoryTaskStore(), max_parallel=2)
    controller.register("noop", lambda ctx: "ok")
    closed: list[list[Any]] = []
    real_new_id = controller._new_task_id

    def closing_meanwhile(name: str, task_id: str | None) -> str:
        chosen = real_new_id(name, task_id)
        closer = threading.Thread(target=lambda: closed.append(controller.close(timeout=WAIT)))
        closer.start()
        closer.join(WAIT)  # close() ran to its end between the check and the run's making
        return chosen

    monkeypatch.setattr(controller, "_new_task_id", closing_meanwhile)
    with pytest.raises(ConfigurationError, match="closed"):
        controller.submit("noop")
    assert closed == [[]]
    assert controller.runs() == []


def test_an_interrupted_dispatch_still_starts_the_other_runs_it_had_taken(
    monkeypatch: pytest.MonkeyPatch,
    closer: Closer,
) -> None:
    """A Ctrl-C while the main thread starts runs that each hold a slot: the runs after the
    interrupted one are started elsewhere, never left admitted, unstarted and holding slots."""
    controller = closer.controller(store=InMemoryTaskStore(), max_parallel=2)
    try:
        controller.register("noop", lambda ctx: "ok")
        taken: list[TaskRun] = []
        with monkeypatch.context() as patch:
            patch.setattr(controller._scheduler, "dispatch", taken.extend)
            first = controller.submit("noop")
            second = controller.submit("noop")
        assert taken == [first, second]  # admitted with their slots, not started yet
        real_kick = TaskRun.kick

        def interrupted_after(run: TaskRun) -> None:
            real_kick(run)
            if run is first:
                raise KeyboardInterrupt  # as a listener on the main thread would (D43)

        monkeypatch.setattr(TaskRun, "kick", interrupted_after)
        with pytest.raises(KeyboardInterrupt):
            controller._scheduler.dispatch(taken)
        assert first.wait(WAIT).status is S.SUCCEEDED
        assert second.wait(WAIT).status is S.SUCCEEDED
        assert controller.active_count == 0
    finally:
        controller.close(timeout=WAIT)


def test_retry_of_a_running_task_says_to_wait_for_it(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=1)
    controller.register("gated", gate.body)
    run = controller.submit("gated", task_id="busy")
    gate.wait_started()
    with pytest.raises(ConfigurationError, match=r"cannot be retried yet: it is still running"):
        controller.retry("busy")
    gate.open.set()
    assert run.wait(WAIT).status is S.SUCCEEDED


class StoppedWhileMade(Controller):
    """Stops every run the moment it is registered, before submit()/retry() start it: what a
    stop_all() or a stop by id on another thread can do in that window."""

    def _make_run(self, *args: Any, **kwargs: Any) -> TaskRun:
        run = super()._make_run(*args, **kwargs)
        assert self.stop(run.task_id, reason="racing") is True
        return run


def _one(ctx: Any) -> int:
    return 1


def test_a_task_stopped_before_submit_started_it_is_returned_stopped(closer: Closer) -> None:
    controller = closer.add(StoppedWhileMade(max_parallel=1))
    controller.register("job", _one)
    run = controller.submit("job")  # it raised "already stopped; it cannot be started"
    outcome = run.wait(WAIT)
    assert outcome.status is S.STOPPED
    assert [t.to_status for t in run.transitions] == [S.STOPPED]
    assert controller.get(run.task_id).status is S.STOPPED  # type: ignore[union-attr]
    controller.close()


def test_a_retry_stopped_before_it_started_is_returned_stopped(closer: Closer) -> None:
    controller = closer.add(StoppedWhileMade(max_parallel=1))
    controller.register("job", _one)
    assert controller.submit("job", task_id="t").wait(WAIT).status is S.STOPPED
    again = controller.retry("t")  # it raised "already stopped; it cannot be started"
    assert again.wait(WAIT).status is S.STOPPED
    assert [t.to_status for t in again.transitions][-2:] == [S.QUEUED, S.STOPPED]
    controller.close()


def test_waits_that_run_out_of_time_say_how_many_and_which_tasks_are_unfinished(
    make_controller: Callable[..., Controller], gate: Gate
) -> None:
    controller = make_controller(max_parallel=1)
    controller.register("job", gate.body)
    controller.submit("job", "a", task_id="a")
    controller.submit("job", "b", task_id="b")
    gate.wait_started()
    with pytest.raises(TimeoutError) as waited:
        controller.wait_all(timeout=0.05)
    message = str(waited.value)
    # not the last run's own message with what was left of the timeout ("0.0499831s")
    assert message.startswith("2 of 2 tasks still unfinished after 0.05s: ")
    assert "'a' (running)" in message
    assert "'b' (queued)" in message
    assert message.endswith("wait_all() changed nothing")
    controller.stop("a")  # a stop request its body has not heard yet: not "call stop()"
    with pytest.raises(TimeoutError, match="its stop was requested; the body has not unwound"):
        controller.run("a").wait(0)  # type: ignore[union-attr]
    gate.open.set()
    assert [o.status for o in controller.wait_all(timeout=WAIT)] == [S.STOPPED, S.SUCCEEDED]


def test_close_that_runs_out_of_time_says_which_tasks_are_unfinished(closer: Closer) -> None:
    release, entered = threading.Event(), threading.Event()

    def deaf(ctx: Any) -> None:
        entered.set()
        release.wait(WAIT)  # never calls checkpoint()

    controller = closer.controller(max_parallel=2, graceful_stop=WAIT)
    controller.register("deaf", deaf)
    controller.submit("deaf", task_id="d")
    assert entered.wait(WAIT)
    try:
        with pytest.raises(TimeoutError) as closing:
            controller.close(timeout=0.05)
        message = str(closing.value)
        assert message.startswith("1 of 1 tasks still unfinished after 0.05s: 'd' (stopping)")
        assert message.endswith("each was asked to stop, and the controller is closed")
    finally:
        release.set()
    assert controller.wait("d", timeout=WAIT).status is S.SUCCEEDED  # stopping -> succeeded


def test_a_reason_that_is_not_text_is_refused_before_anything_is_written(
    make_controller: Callable[..., Controller],
) -> None:
    """Each store would keep another thing (SQLite its text, PostgreSQL an error from its
    driver): a reason is a str or None, checked before the control acts."""
    controller = make_controller(max_parallel=1)
    gate = threading.Event()
    controller.register("held", lambda ctx: gate.wait(WAIT))
    run = controller.submit("held")
    queued = controller.submit("held")
    wait_until(lambda: run.status is S.RUNNING, "the first task to run")
    for bad in (5, ["a"], b"bytes"):
        said = re.escape(f"reason must be a str or None, got {bad!r}")
        with pytest.raises(ConfigurationError, match=said):
            controller.stop(queued.task_id, reason=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=said):
            run.stop(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=said):
            run.cancel(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=said):
            controller.stop_all(reason=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=said):
            controller.retry(run.task_id, reason=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=said):
            controller.close(reason=bad)  # type: ignore[arg-type]
    assert run.status is S.RUNNING  # nothing acted
    assert queued.status is S.QUEUED
    gate.set()
    assert controller.stop(queued.task_id, reason="not needed") is True
    assert run.wait(WAIT).status is S.SUCCEEDED
    assert queued.wait(WAIT).status is S.STOPPED


def test_task_names_with_control_characters_are_refused(
    make_controller: Callable[..., Controller],
) -> None:
    """Every view shows them escaped: such a name could never be typed back into a command.
    A task id may hold any text a store keeps (the hostile-input round trips); only the
    console refuses such a ``--task-id``, which it must read back from a terminal."""
    controller = make_controller()
    controller.register("ok", lambda ctx: 1)
    for bad in ("a\nb", "tab\there", "esc\x1b[31m"):
        with pytest.raises(ConfigurationError, match="holds the control character"):
            controller.register(bad, lambda ctx: 1)
    assert controller.task_names == ["ok"]
    assert controller.submit("ok", task_id="line\nbreak").wait(WAIT).value == 1
