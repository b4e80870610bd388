"""Pipelines through the controller: joins, blocked nodes, fail_fast, skipped/cancelled/stopped."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from chongming_core import (
    AggregationPolicy,
    CircularDependency,
    ConfigurationError,
    FailureKind,
    FakeClock,
    FixedBackoff,
    InMemoryTaskStore,
    JoinMode,
    RetryPolicy,
    TaskStatus,
    Timeout,
)
from chongming_runtime.controller._controller import Controller
from chongming_runtime.persistence._commands import new_command
from chongming_runtime.pipeline._coordinator import PipelineCoordinator, PipelineRun
from chongming_runtime.pipeline._definition import Pipeline
from chongming_runtime.testing import Closer, checkpoint_until, wait_until

S = TaskStatus
WAIT = 10.0


@pytest.fixture
def controller(make_controller: Callable[..., Controller]) -> Controller:
    return make_controller(max_parallel=4, graceful_stop=2.0, store=InMemoryTaskStore())


def _register_etl(controller: Controller, seen: dict[str, Any]) -> threading.Event:
    release = threading.Event()

    def fetch(ctx: Any, day: str) -> list[int]:
        checkpoint_until(ctx, release)
        return [1, 2, 3]

    def transform(ctx: Any, index: int) -> int:
        rows = ctx.input("fetch", [])
        seen[f"shard{index}"] = dict(ctx.upstream)
        if index == 2:
            raise ValueError("bad shard")
        return int(sum(rows)) * (index + 1)

    def load(ctx: Any) -> int:
        seen["load"] = dict(ctx.upstream)
        return len(ctx.upstream)

    def audit(ctx: Any) -> str:
        seen["audit"] = dict(ctx.upstream)
        return "audited"

    controller.register("fetch", fetch)
    controller.register("transform", transform)
    controller.register("load", load)
    controller.register("audit", audit)
    return release


def _etl(aggregation: AggregationPolicy) -> Pipeline:
    pipeline = Pipeline("nightly-etl", aggregation=aggregation)
    fetch = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node("transform", index, node_id=f"shard{index}", depends_on=[fetch])
        for index in range(3)
    ]
    load = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[load], join=JoinMode.ALL_SETTLED)
    return pipeline


def test_waiting_nodes_are_blocked_take_no_slot_and_are_not_queued(controller: Controller) -> None:
    seen: dict[str, Any] = {}
    release = _register_etl(controller, seen)
    run = controller.submit_pipeline(_etl(AggregationPolicy.all_settled()))
    threading.Event().wait(0.05)
    assert controller.active_count == 1  # only the root holds a slot
    assert controller.queued_count == 0  # downstream nodes are blocked, not queued
    snapshots = run.snapshots()
    assert {n: s.status for n, s in snapshots.items() if n != "fetch"} == {
        "shard0": S.BLOCKED, "shard1": S.BLOCKED, "shard2": S.BLOCKED,
        "load": S.BLOCKED, "audit": S.BLOCKED,
    }  # fmt: skip
    blocked = controller.list_tasks(status="blocked")
    assert len(blocked) == 5
    assert {s.pipeline_id for s in blocked} == {run.pipeline_id}
    release.set()
    outcome = run.wait(timeout=WAIT)
    assert outcome.status is S.FAILED  # shard2 failed
    assert not outcome.ok
    statuses = {n: o.status for n, o in outcome.nodes.items()}
    assert list(outcome.nodes) == ["fetch", "shard0", "shard1", "shard2", "load", "audit"]
    assert statuses == {
        "fetch": S.SUCCEEDED, "shard0": S.SUCCEEDED, "shard1": S.SUCCEEDED,
        "shard2": S.FAILED, "load": S.SKIPPED, "audit": S.SUCCEEDED,
    }  # fmt: skip
    assert outcome.nodes["shard1"].value == 12
    assert seen["shard0"] == {"fetch": [1, 2, 3]}
    # only succeeded upstream values reach ctx.upstream: load was skipped, so audit has none
    assert seen["audit"] == {}
    load = outcome.nodes["load"]
    assert load.failure is not None
    assert load.failure.kind is FailureKind.DEPENDENCY_FAILED
    assert "shard2 failed" in load.failure.message
    load_history = controller.history(run.task_ids["load"])
    assert [t.to_status for t in load_history] == [S.BLOCKED, S.SKIPPED]


def test_fail_fast_cancels_released_nodes_and_skips_the_rest(controller: Controller) -> None:
    gate = threading.Event()
    started = threading.Event()

    def slow(ctx: Any) -> str:
        started.set()
        checkpoint_until(ctx, gate)
        return "slow"

    def boom(ctx: Any) -> None:
        started.wait(WAIT)
        raise RuntimeError("boom")

    controller.register("slow", slow)
    controller.register("boom", boom)
    controller.register("after", lambda ctx: "after")
    pipeline = Pipeline("ff")
    a = pipeline.node("slow", node_id="slow")
    b = pipeline.node("boom", node_id="boom")
    pipeline.node("after", node_id="after", depends_on=[a, b])
    outcome = controller.submit_pipeline(pipeline).wait(timeout=WAIT)
    statuses = {n: o.status for n, o in outcome.nodes.items()}
    assert statuses == {"slow": S.CANCELLED, "boom": S.FAILED, "after": S.SKIPPED}
    assert outcome.status is S.FAILED
    cancelled = outcome.nodes["slow"].failure
    assert cancelled is not None
    assert cancelled.kind is FailureKind.CANCELLED
    assert not cancelled.retryable
    assert "fail_fast" in cancelled.message


def test_any_succeeded_releases_on_the_first_success(controller: Controller) -> None:
    controller.register("ok", lambda ctx: "primary")
    controller.register("bad", lambda ctx: 1 / 0)
    controller.register("use", lambda ctx: dict(ctx.upstream))
    pipeline = Pipeline("redundant", aggregation=AggregationPolicy.all_settled())
    primary = pipeline.node("ok", node_id="primary")
    mirror = pipeline.node("bad", node_id="mirror")
    pipeline.node("use", node_id="use", depends_on=[primary, mirror], join=JoinMode.ANY_SUCCEEDED)
    outcome = controller.submit_pipeline(pipeline).wait(timeout=WAIT)
    assert outcome.nodes["use"].status is S.SUCCEEDED
    assert outcome.nodes["use"].value in ({"primary": "primary"},)


def test_an_operator_stop_is_stopped_not_cancelled(controller: Controller) -> None:
    gate = threading.Event()

    def wait_forever(ctx: Any) -> None:
        checkpoint_until(ctx, gate)

    controller.register("wait", wait_forever)
    controller.register("next", lambda ctx: 1)
    pipeline = Pipeline("manual")
    first = pipeline.node("wait", node_id="first")
    pipeline.node("next", node_id="second", depends_on=[first])
    run = controller.submit_pipeline(pipeline)
    first_id = run.task_ids["first"]
    second_id = run.task_ids["second"]
    assert controller.stop(first_id, reason="值班手动停止") is True
    outcome = run.wait(timeout=WAIT)
    assert outcome.status is S.STOPPED
    assert outcome.nodes["first"].status is S.STOPPED
    assert outcome.nodes["second"].status is S.SKIPPED
    assert controller.get(second_id).status is S.SKIPPED  # type: ignore[union-attr]


def test_a_blocked_node_can_be_stopped_directly(controller: Controller) -> None:
    gate = threading.Event()

    def hold(ctx: Any) -> int:
        checkpoint_until(ctx, gate)
        return 1

    controller.register("hold", hold)
    controller.register("next", lambda ctx: 2)
    pipeline = Pipeline("p", aggregation=AggregationPolicy.all_settled())
    root = pipeline.node("hold", node_id="root")
    pipeline.node("next", node_id="child", depends_on=[root])
    run = controller.submit_pipeline(pipeline)
    child_id = run.task_ids["child"]
    assert controller.get(child_id).status is S.BLOCKED  # type: ignore[union-attr]
    assert controller.stop(child_id, reason="not needed") is True
    assert controller.get(child_id).status is S.STOPPED  # type: ignore[union-attr]
    gate.set()
    outcome = run.wait(timeout=WAIT)
    assert outcome.nodes["root"].status is S.SUCCEEDED
    assert outcome.nodes["child"].status is S.STOPPED
    assert outcome.status is S.STOPPED


def test_invalid_pipelines_are_refused_before_anything_runs(controller: Controller) -> None:
    controller.register("a", lambda ctx: 1)
    cyclic = Pipeline("cyclic")
    cyclic.node("a", node_id="x", depends_on=["y"])
    cyclic.node("a", node_id="y", depends_on=["x"])
    with pytest.raises(CircularDependency):
        controller.submit_pipeline(cyclic)
    unknown = Pipeline("unknown")
    unknown.node("a")
    unknown.node("not-registered")
    with pytest.raises(ConfigurationError, match="unknown task name 'not-registered'"):
        controller.submit_pipeline(unknown)
    assert controller.list_tasks() == []
    assert controller.stats().total == 0


def test_a_node_is_released_only_once_every_upstream_end_is_durable(
    make_controller: Callable[..., Controller],
) -> None:
    held = threading.Event()
    release = threading.Event()

    class SlowToWrite(InMemoryTaskStore):
        """Holds the write of upstream "b"'s end, whichever flush makes it."""

        def save_many(self, writes: Any, *args: Any, **kwargs: Any) -> Any:
            if any(w.snapshot.node_id == "b" and w.snapshot.is_terminal for w in writes):
                held.set()
                assert release.wait(WAIT)
            return super().save_many(writes, *args, **kwargs)

    store = SlowToWrite()
    controller = make_controller(max_parallel=4, graceful_stop=2.0, store=store)
    a_may_end = threading.Event()
    b_may_end = threading.Event()  # b ends once the submission returned: off this thread
    prun = _submit_join(controller, "durable-order", a_waits_for=a_may_end, b_waits_for=b_may_end)
    b_may_end.set()
    assert held.wait(WAIT)  # b ended, its end is not written yet
    a_may_end.set()  # a ends and settles meanwhile
    wait_until(lambda: prun.snapshots()["a"].status is S.SUCCEEDED)
    join_id = prun.task_ids["join"]
    join_now = controller.get(join_id)
    assert join_now is not None
    assert join_now.status is S.BLOCKED  # b's end is not durable yet: no release
    stored_b = store.get(prun.task_ids["b"])  # an in-memory store has no start gate: its
    assert stored_b is None or not stored_b.is_terminal  # first write may be its end
    release.set()
    outcome = prun.wait(timeout=WAIT)
    assert outcome.nodes["join"].value == ["a", "b"]
    controller.close(timeout=WAIT)


def test_a_node_stopped_between_its_release_and_its_start_does_not_hold_back_its_siblings(
    closer: Closer,
) -> None:
    class StopsInBetween(Controller):
        def _make_run(self, *args: Any, **kwargs: Any) -> Any:
            run = super()._make_run(*args, **kwargs)
            if run.task_id.endswith(":d1"):  # an operator's stop lands in the window
                self.stop(run.task_id, reason="operator")
            return run

    controller = closer.add(
        StopsInBetween(max_parallel=4, graceful_stop=2.0, store=InMemoryTaskStore())
    )
    for name in ("u", "d1", "d2"):
        controller.register(name, lambda ctx, name=name: name)
    pipeline = Pipeline("race")
    u = pipeline.node("u", node_id="u")
    pipeline.node("d1", node_id="d1", depends_on=[u])
    pipeline.node("d2", node_id="d2", depends_on=[u])
    outcome = controller.submit_pipeline(pipeline).wait(timeout=WAIT)
    assert {n: o.status for n, o in outcome.nodes.items()} == {
        "u": S.SUCCEEDED,
        "d1": S.STOPPED,
        "d2": S.SUCCEEDED,
    }
    assert outcome.status is S.STOPPED
    controller.close(timeout=WAIT)


def test_a_node_released_while_the_controller_closes_ends_stopped_without_running(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=4, graceful_stop=2.0, store=InMemoryTaskStore())
    go = threading.Event()
    ran: list[str] = []
    controller.register("a", lambda ctx: go.wait(WAIT) and "a")
    controller.register("b", lambda ctx: ran.append("b"))
    pipeline = Pipeline("closing")
    a = pipeline.node("a", node_id="a")
    pipeline.node("b", node_id="b", depends_on=[a])
    prun = controller.submit_pipeline(pipeline)
    coordinator = controller._pipelines
    settled_a = threading.Event()
    settle, stop_all = coordinator.node_settled, coordinator.stop_all

    def node_settled(snapshot: Any) -> None:
        settle(snapshot)
        if snapshot.node_id == "a":
            settled_a.set()

    def late_stop_all(reason: str | None) -> int:
        go.set()  # a ends right after close() began, and releases b
        assert settled_a.wait(WAIT)
        return stop_all(reason)

    coordinator.node_settled = node_settled  # type: ignore[method-assign]
    coordinator.stop_all = late_stop_all  # type: ignore[method-assign]
    controller.close(timeout=WAIT)
    outcome = prun.wait(timeout=WAIT)
    assert outcome.nodes["a"].status is S.SUCCEEDED
    assert outcome.nodes["b"].status is S.STOPPED  # R4: it never ran
    assert ran == []


def test_a_store_bug_on_an_upstream_end_does_not_hang_the_join(
    make_controller: Callable[..., Controller],
) -> None:
    class BuggyOnce(InMemoryTaskStore):
        armed = True

        def save_many(self, writes: Any) -> Any:
            writes = list(writes)
            ends_a = any(w.snapshot.node_id == "a" and w.snapshot.is_terminal for w in writes)
            if self.armed and ends_a:
                self.armed = False
                raise RuntimeError("a driver bug, not a StoreError")
            return super().save_many(writes)

    store = BuggyOnce()
    controller = make_controller(max_parallel=4, graceful_stop=2.0, store=store)
    b_go = threading.Event()
    prun = _submit_join(controller, "buggy", b_waits_for=b_go)
    wait_until(lambda: prun.snapshots()["a"].status is S.SUCCEEDED)
    b_go.set()
    outcome = prun.wait(timeout=WAIT)
    assert outcome.nodes["join"].value == ["a", "b"]
    assert not store.armed  # the bug did hit a's end
    controller.flush()
    stored_a = store.get(prun.task_ids["a"])
    assert stored_a is not None
    assert stored_a.status is S.SUCCEEDED  # written after all (on its own, or later)
    controller.close(timeout=WAIT)


def _submit_join(
    controller: Controller,
    name: str,
    *,
    a_waits_for: threading.Event | None = None,
    b_waits_for: threading.Event | None = None,
) -> Any:
    """Nodes "a" and "b" (each may wait for an event first) joined into "join"."""

    def body(gate: threading.Event | None, value: str) -> Any:
        return lambda ctx: (gate is None or gate.wait(WAIT)) and value

    controller.register("a", body(a_waits_for, "a"))
    controller.register("b", body(b_waits_for, "b"))
    controller.register("join", lambda ctx: sorted(ctx.upstream))
    pipeline = Pipeline(name)
    a = pipeline.node("a", node_id="a")
    b = pipeline.node("b", node_id="b")
    pipeline.node("join", node_id="join", depends_on=[a, b])
    return controller.submit_pipeline(pipeline)


def test_a_pipeline_node_is_not_retried_alone(controller: Controller) -> None:
    """Its downstream nodes were settled by its first end: a node re-run alone would turn a
    failed pipeline's outcome into something nobody ran. The pipeline is submitted again."""
    calls: list[int] = []

    def flaky(ctx: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return 1

    controller.register("flaky", flaky)
    controller.register("after", lambda ctx: ctx.input("flaky"))
    pipeline = Pipeline("p")
    first = pipeline.node("flaky")
    pipeline.node("after", depends_on=[first])
    prun = controller.submit_pipeline(pipeline)
    outcome = prun.wait(WAIT)
    assert outcome.status is S.FAILED
    node_id = outcome.nodes["flaky"].snapshot.task_id
    with pytest.raises(ConfigurationError, match="submit the pipeline again"):
        controller.retry(node_id)
    assert calls == [1]  # not run again
    assert prun.wait(WAIT).status is S.FAILED  # the pipeline's outcome is unchanged
    stored = controller.get(node_id)
    assert stored is not None
    assert stored.status is S.FAILED
    again = controller.submit_pipeline(pipeline)
    assert again.wait(WAIT).status is S.SUCCEEDED


def test_a_pipeline_submitted_while_close_runs_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    make_controller: Callable[..., Controller],
) -> None:
    """A submit_pipeline() that passed the "not closing" check just before close() stopped
    the pipelines must not register one close() never stops or waits for (D45)."""
    controller = make_controller(max_parallel=2, graceful_stop=2.0, store=InMemoryTaskStore())
    controller.register("noop", lambda ctx: "ok")
    pipeline = Pipeline("p")
    pipeline.node("noop")
    closed: list[list[Any]] = []
    real_downstream = Pipeline.downstream

    def close_meanwhile(self: Pipeline) -> Any:
        closer = threading.Thread(target=lambda: closed.append(controller.close(timeout=WAIT)))
        closer.start()
        closer.join(WAIT)  # close() ran to its end after the checks, before registration
        return real_downstream(self)

    monkeypatch.setattr(Pipeline, "downstream", close_meanwhile)
    with pytest.raises(ConfigurationError, match="closed"):
        controller.submit_pipeline(pipeline)
    assert closed == [[]]
    assert controller.runs() == []


def test_node_options_override_the_task_spec_like_submit(controller: Controller) -> None:
    """R12: retry=, timeout= and executor= of a node are options, never task arguments."""
    calls: list[dict[str, Any]] = []

    def flaky(ctx: Any, **kwargs: Any) -> int:
        calls.append(kwargs)
        if len(calls) < 3:
            raise RuntimeError("not yet")
        return len(calls)

    controller.register("flaky", flaky)
    pipeline = Pipeline("p")
    pipeline.node(
        "flaky",
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
        timeout=Timeout(per_attempt=30),
        size=1,
    )
    outcome = controller.submit_pipeline(pipeline).wait(WAIT)
    assert outcome.status is S.SUCCEEDED
    assert outcome.nodes["flaky"].value == 3
    assert calls == [{"size": 1}] * 3  # the options never reach the body
    bad = Pipeline("bad")
    bad.node("flaky", retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="retry must be a RetryPolicy"):
        controller.submit_pipeline(bad)


def _second_blocked_behind_first(
    controller: Controller, release: threading.Event
) -> tuple[PipelineRun, str]:
    """A pipeline whose node "second" is blocked until "first" ends (once `release` is
    set); returns its run and the blocked node's task id."""
    controller.register("first", lambda ctx: checkpoint_until(ctx, release))
    controller.register("second", lambda ctx: ctx.input("first"))
    pipeline = Pipeline("p")
    head = pipeline.node("first")
    pipeline.node("second", depends_on=[head])
    prun = controller.submit_pipeline(pipeline)
    return prun, prun.task_ids["second"]


def test_a_blocked_node_is_not_paused_now_or_later(controller: Controller) -> None:
    """A blocked node has no pause (§9.2): pause() says False and nothing lands on it once
    it is released; a pause command from another process is completed, not retried."""
    release = threading.Event()
    prun, blocked = _second_blocked_behind_first(controller, release)
    assert controller._writer.flush()  # the blocked node is in the store, as for a console
    assert controller.pause(blocked) is False
    assert controller.store.commands(task_id=blocked) == []  # nothing sent
    command = new_command(
        task_id=blocked, action="pause", issued_by="console", clock=controller.clock
    )
    verdict = controller._controls.handle_command(command)
    assert verdict is not None
    assert verdict.startswith("ignored: the task is a pipeline node waiting")
    release.set()
    outcome = prun.wait(WAIT)
    assert outcome.status is S.SUCCEEDED
    assert [t.to_status for t in controller.history(blocked)] == [
        S.BLOCKED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip


def test_a_blocked_node_stopped_by_command_names_who_asked(controller: Controller) -> None:
    """A stop command from another process ends a blocked node as it ends a running one:
    its transition's actor is the command's issuer, ``(command)``, not this holder."""
    release = threading.Event()
    prun, blocked = _second_blocked_behind_first(controller, release)
    command = new_command(
        task_id=blocked, action="stop", issued_by="ops", reason="no audit", clock=controller.clock
    )
    assert controller._controls.handle_command(command) == "applied"
    last = controller.history(blocked)[-1]
    assert (last.to_status, last.actor, last.reason) == (S.STOPPED, "ops (command)", "no audit")
    release.set()
    prun.wait(WAIT)


def test_a_start_timeout_counts_blocked_time(make_controller: Callable[..., Controller]) -> None:
    """R1: a node's start timeout expires while it is blocked (-> cancelled, timeout_start),
    and a node released late has only what is left of it."""
    clock = FakeClock()
    controller = make_controller(
        max_parallel=1, graceful_stop=2.0, store=InMemoryTaskStore(), clock=clock
    )
    release = threading.Event()
    hold = threading.Event()
    try:
        controller.register("slow", lambda ctx: checkpoint_until(ctx, release))
        controller.register("holding", lambda ctx: checkpoint_until(ctx, hold))
        controller.register("quick", lambda ctx: "ok")
        pipeline = Pipeline("p")
        head = pipeline.node("slow")
        pipeline.node("quick", node_id="waits", depends_on=[head], timeout=Timeout(start=5))
        pipeline.node("quick", node_id="late", depends_on=[head], timeout=Timeout(start=9))
        prun = controller.submit_pipeline(pipeline)
        clock.advance(6)  # 'waits' is still blocked behind 'slow'
        waits = controller.get(prun.task_ids["waits"])
        assert waits is not None
        assert waits.status is S.CANCELLED
        assert waits.failure is not None
        assert waits.failure.kind is FailureKind.TIMEOUT_START
        blocker = controller.submit("holding")  # takes the one slot once 'slow' is done
        release.set()
        late_id = prun.task_ids["late"]
        # released now, queued behind the blocker
        wait_until(lambda: controller.get(late_id).status is S.QUEUED)  # type: ignore[union-attr]
        clock.advance(4)  # 10 s since the submission: past its 9 s, though released just now
        hold.set()
        outcome = prun.wait(WAIT)
        assert outcome.nodes["late"].status is S.CANCELLED
        assert outcome.nodes["late"].failure is not None
        assert outcome.nodes["late"].failure.kind is FailureKind.TIMEOUT_START
        assert blocker.wait(WAIT).status is S.SUCCEEDED
    finally:
        release.set()
        hold.set()
        controller.close(timeout=WAIT)


def test_fail_fast_never_runs_a_node_released_as_another_failed(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R16: A succeeds while B fails; A's thread decided to release D (its only upstream
    succeeded) but the failure's pass is first to decide D's fate: D never runs."""
    ran: list[str] = []
    a_released = threading.Event()
    released = threading.Event()
    real_release = PipelineCoordinator._release
    real_skip = PipelineCoordinator._skip

    def release(self: PipelineCoordinator, prun: PipelineRun, node_id: str) -> None:
        if node_id == "d":
            a_released.set()
            wait_until(lambda: prun._failing is not None)  # b failed
            real_release(self, prun, node_id)
            released.set()
            return
        real_release(self, prun, node_id)

    def skip(self: PipelineCoordinator, prun: PipelineRun, node_id: str, failure: Any) -> None:
        if node_id == "d":  # the failure's pass acts after the release went through
            assert released.wait(WAIT)
        real_skip(self, prun, node_id, failure)

    monkeypatch.setattr(PipelineCoordinator, "_release", release)
    monkeypatch.setattr(PipelineCoordinator, "_skip", skip)

    def fails(ctx: Any) -> None:
        assert a_released.wait(WAIT)
        raise RuntimeError("b fails")

    controller.register("ok", lambda ctx: "a")
    controller.register("fails", fails)
    controller.register("after", lambda ctx: ran.append("d"))
    pipeline = Pipeline("p")
    a = pipeline.node("ok", node_id="a")
    pipeline.node("fails", node_id="b")
    pipeline.node("after", node_id="d", depends_on=[a])
    outcome = controller.submit_pipeline(pipeline).wait(WAIT)
    assert outcome.status is S.FAILED
    assert outcome.nodes["d"].status is S.SKIPPED
    assert ran == []


def test_close_waits_while_a_pipeline_is_registered_written_and_timed(
    make_controller: Callable[..., Controller],
) -> None:
    """close() on another thread between a submit's registration and its first writes and
    start timers: it waits for them, so it never stops nodes whose creation is then written
    after their end (into a closed writer) or timed after they settled (D45)."""
    clock = FakeClock()
    controller = make_controller(store=InMemoryTaskStore(), clock=clock, max_parallel=1)
    controller.register("a", lambda ctx: 1)
    pipeline = Pipeline("p")
    head = pipeline.node("a", node_id="h")
    pipeline.node("a", node_id="d", depends_on=[head], timeout=Timeout(start=30))
    real_record = controller._writer.record
    closers: list[threading.Thread] = []

    def record(snapshot: Any, transitions: Any = (), **kwargs: Any) -> None:
        if not closers and not kwargs:  # the submit's first (creation) write
            closer = threading.Thread(target=lambda: controller.close(timeout=WAIT))
            closers.append(closer)
            closer.start()
            closer.join(0.2)  # blocked on the pipelines' lock (or done, if it was not)
        real_record(snapshot, transitions, **kwargs)

    controller._writer.record = record  # type: ignore[method-assign]
    try:
        prun = controller.submit_pipeline(pipeline)
    except ConfigurationError:  # close() came first after all: refused, nothing made
        prun = None
    closers[0].join(WAIT)
    assert not closers[0].is_alive()
    if prun is not None:
        assert prun.done
        assert prun.outcome().status is S.STOPPED
        # written in order, from its creation: stopped by close(), or skipped once close()
        # stopped its upstream first, or stopped when released while closing (R4)
        trail = [t.to_status for t in controller.history(prun.task_ids["d"])]
        assert trail in (
            [S.BLOCKED, S.STOPPED],
            [S.BLOCKED, S.SKIPPED],
            [S.BLOCKED, S.QUEUED, S.STOPPED],
        )
    assert clock.pending_timers == 0  # no timer armed for a settled node
    assert controller._writer.pending_count == 0  # nothing left that no flush will take


def test_a_finished_pipeline_is_not_kept_alive_by_the_controller(
    make_controller: Callable[..., Controller],
) -> None:
    """A long-lived controller running pipelines all day must not hold every one it ran."""
    controller = make_controller(max_parallel=2)
    controller.register("ok", _ok_task)
    pipeline = Pipeline("daily")
    pipeline.node("ok")
    pipeline.node("ok", depends_on=["ok"])
    handle = controller.submit_pipeline(pipeline)
    outcome = handle.wait(10)
    assert outcome.ok
    task_ids = list(handle.task_ids.values())
    gone = weakref.ref(handle)
    del handle
    assert controller.prune(keep_terminal=0) == 2  # its nodes leave the controller's memory
    gc.collect()
    assert gone() is None
    assert all(controller.get(t) is None for t in task_ids)
    # pipelines submitted later are waited for as before
    later = Pipeline("later")
    later.node("ok")
    again = controller.submit_pipeline(later)
    controller.wait_all(timeout=10)
    assert again.done
    assert again.outcome().ok
    controller.close()


def _ok_task(ctx: Any) -> str:
    return "ok"
