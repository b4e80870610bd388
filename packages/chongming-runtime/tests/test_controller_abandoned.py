"""A thread body abandoned after its graceful window still runs: it keeps its slot.

The task is `lost` at once (guide §4.1: a thread cannot be killed, the outcome is
unknown), but its body goes on executing on its thread. Until that body returns
it still uses what its slot and named-resource units stand for (a connection, a
GPU), so the controller counts them as held (`active_count` is "really holding
an execution slot", §8.2) and starts nothing in their place (design D54).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_core import ConcurrencyPolicy, FailureKind, FakeClock, InMemoryTaskStore, TaskStatus
from chongming_runtime import Controller, Pipeline, TaskContext
from chongming_runtime.executors._attempt import run_in_current_thread
from run_helpers import st

S = TaskStatus
WAIT = 10.0


class Bodies:
    """Task bodies a test holds and releases, counting how many execute at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executing: set[str] = set()
        self.peak = 0
        self.entered: dict[str, threading.Event] = {}
        self.release: dict[str, threading.Event] = {}
        self.left: dict[str, threading.Event] = {}

    def prepare(self, key: str) -> None:
        for table in (self.entered, self.release, self.left):
            table[key] = threading.Event()

    def stubborn(self, ctx: TaskContext, key: str) -> str:
        """Never calls checkpoint(): a stop cannot reach it. Uses the events prepared for
        `key` when it began (a later `prepare` is for a later body)."""
        entered, release, left = self.entered[key], self.release[key], self.left[key]
        with self.lock:
            self.executing.add(key)
            self.peak = max(self.peak, len(self.executing))
        entered.set()
        try:
            release.wait(WAIT)
            return key
        finally:
            with self.lock:
                self.executing.discard(key)
            left.set()


@pytest.fixture
def bodies() -> Iterator[Bodies]:
    found = Bodies()
    yield found
    for event in found.release.values():
        event.set()


def _controller(
    make_controller: Callable[..., Controller], clock: FakeClock, **kwargs: Any
) -> Controller:
    return make_controller(store=InMemoryTaskStore(), clock=clock, graceful_stop=1.0, **kwargs)


@pytest.mark.parametrize(
    "policy",
    [
        {"max_parallel": 1},
        {"concurrency": ConcurrencyPolicy(max_parallel=4, limits={"gpu": 1})},
    ],
    ids=["slot", "named-resource"],
)
def test_an_abandoned_body_keeps_its_slot_until_it_returns(
    bodies: Bodies, policy: dict[str, Any], make_controller: Callable[..., Controller]
) -> None:
    clock = FakeClock()
    controller = _controller(make_controller, clock, **policy)
    controller.register("stubborn", bodies.stubborn, tags=["gpu"])
    for key in ("a", "b"):
        bodies.prepare(key)
    try:
        first = controller.submit("stubborn", "a")
        assert bodies.entered["a"].wait(WAIT)
        second = controller.submit("stubborn", "b")
        assert st(second) is S.QUEUED
        assert controller.stop(first.task_id, reason="deploy")
        clock.advance(1.0)  # the graceful window passes: the thread is abandoned
        outcome = first.wait(WAIT)
        assert outcome.status is S.LOST
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.LOST
        # the body is still executing: nothing starts in its place, and it is counted
        assert not bodies.left["a"].is_set()
        assert controller.active_count == 1
        assert st(second) is S.QUEUED
        assert not bodies.entered["b"].wait(0.05)
        bodies.release["a"].set()  # the abandoned body returns at last
        assert bodies.entered["b"].wait(WAIT), "the freed slot was not passed on"
        assert st(second) in {S.STARTING, S.RUNNING}
        assert bodies.peak == 1
        # the late value of the abandoned body changed nothing
        assert st(first) is S.LOST
        assert first.snapshot.outcome is None
        assert [t.to_status for t in first.transitions][-2:] == [S.STOPPING, S.LOST]
        bodies.release["b"].set()
        assert second.wait(WAIT).status is S.SUCCEEDED
        assert controller.active_count == 0
    finally:
        for event in bodies.release.values():
            event.set()
        controller.close(timeout=WAIT)


def test_a_retry_of_the_lost_task_waits_for_the_abandoned_body_to_return(
    bodies: Bodies, make_controller: Callable[..., Controller]
) -> None:
    clock = FakeClock()
    controller = _controller(make_controller, clock, max_parallel=1)
    controller.register("stubborn", bodies.stubborn)
    bodies.prepare("a")
    try:
        first = controller.submit("stubborn", "a")
        assert bodies.entered["a"].wait(WAIT)
        controller.stop(first.task_id)
        clock.advance(1.0)
        assert first.wait(WAIT).status is S.LOST
        # lost is retryable (§4.1), but the retry must not run beside the body still going
        abandoned_release, abandoned_left = bodies.release["a"], bodies.left["a"]
        bodies.prepare("a")  # the retried attempt's own events
        again = controller.retry(first.task_id)
        assert st(again) is S.QUEUED
        assert controller.active_count == 1
        assert not bodies.entered["a"].wait(0.05)
        abandoned_release.set()  # the abandoned body returns
        assert abandoned_left.wait(WAIT)
        assert bodies.entered["a"].wait(WAIT), "the retry did not start once the body returned"
        assert st(again) in {S.STARTING, S.RUNNING}
        bodies.release["a"].set()
        assert again.wait(WAIT).status is S.SUCCEEDED
        assert bodies.peak == 1
        assert controller.active_count == 0
    finally:
        for event in bodies.release.values():
            event.set()
        controller.close(timeout=WAIT)


class LateExecutor:
    """Launches nothing by itself: the test starts each attempt's thread when it wants (a
    thread slow to start, as under load)."""

    name = "thread"
    inline = False
    supports_pause = True

    def __init__(self) -> None:
        self.attempts: list[Any] = []

    def validate(self, fn: Any, args: Any, kwargs: Any) -> None:
        return None

    def launch(self, attempt: Any) -> Any:
        self.attempts.append(attempt)
        return self

    def force_stop(self, clock: Any) -> bool:
        return False  # a thread cannot be ended


def test_a_body_that_never_began_before_its_graceful_window_passed_is_stopped_not_lost(
    make_controller: Callable[..., Controller],
) -> None:
    clock = FakeClock()
    late = LateExecutor()
    ran: list[str] = []

    def body(ctx: TaskContext) -> str:
        ran.append(ctx.task_id)
        return "ran"

    controller = make_controller(
        store=InMemoryTaskStore(), clock=clock, graceful_stop=0, max_parallel=1, executor=late
    )
    controller.register("job", body)
    try:
        first = controller.submit("job")
        second = controller.submit("job")
        assert st(first) is S.STARTING  # launched; its thread has not begun
        controller.stop(first.task_id)
        clock.advance(0)  # a window of 0 s: over at once
        outcome = first.wait(WAIT)
        # its body never ran and never will: stopped, not "abandoned, may still be running"
        assert outcome.status is S.STOPPED
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.CANCELLED
        run_in_current_thread(late.attempts[0])  # the thread begins at last: refused
        assert ran == []
        # the slot was not kept for a body that does not exist
        assert st(second) is S.STARTING
        assert controller.active_count == 1
        run_in_current_thread(late.attempts[1])
        assert second.wait(WAIT).status is S.SUCCEEDED
        assert controller.active_count == 0
    finally:
        controller.close(timeout=WAIT)


def test_a_fail_fast_cancel_of_a_node_whose_body_never_began_ends_it_cancelled_not_lost(
    make_controller: Callable[..., Controller],
) -> None:
    clock = FakeClock()
    late = LateExecutor()
    ran: list[str] = []

    def body(ctx: TaskContext, fails: bool) -> str:
        ran.append(ctx.task_id)
        if fails:
            raise RuntimeError("boom")
        return "ran"

    controller = make_controller(
        store=InMemoryTaskStore(), clock=clock, graceful_stop=0, max_parallel=2, executor=late
    )
    controller.register("job", body)
    pipeline = Pipeline("ff")  # fail_fast
    pipeline.node("job", True, node_id="boom")
    pipeline.node("job", False, node_id="slow")
    try:
        run = controller.submit_pipeline(pipeline)
        boom, slow = late.attempts
        late_node = controller.get(run.task_ids["slow"])
        assert late_node is not None
        assert late_node.status is S.STARTING  # launched; its thread has not begun
        run_in_current_thread(boom)  # fails: fail_fast cancels the released "slow"
        clock.advance(0)  # a window of 0 s: over before the thread of "slow" begins
        outcome = run.wait(WAIT)
        # its body never ran and never will: cancelled, not "abandoned, may still be running"
        cancelled = outcome.nodes["slow"]
        assert cancelled.status is S.CANCELLED
        assert cancelled.failure is not None
        assert cancelled.failure.kind is FailureKind.CANCELLED
        assert "fail_fast" in cancelled.failure.message
        assert outcome.status is S.FAILED
        run_in_current_thread(slow)  # the thread begins at last: refused
        assert ran == [run.task_ids["boom"]]
        assert controller.active_count == 0  # nothing held for a body that does not exist
    finally:
        controller.close(timeout=WAIT)
