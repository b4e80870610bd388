"""A thread body abandoned after its graceful window still runs: it keeps its slot.

The task is `lost` at once (guide §4.1: a thread cannot be killed, the outcome is
unknown), but its body goes on executing on its thread. Until that body returns
it still uses what its slot and named-resource units stand for (a connection, a
GPU), so the controller counts them as held (`active_count` is "really holding
an execution slot", §8.2) and starts nothing in their place (design D54).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from chongming_core import (
    Clock,
    ConcurrencyPolicy,
    FailureKind,
    FakeClock,
    InMemoryTaskStore,
    TaskStatus,
)
from chongming_runtime import Controller, TaskContext
from chongming_runtime._attempt import Attempt
from chongming_runtime.executors import ThreadExecutor
from chongming_runtime.executors._base import AttemptHandle
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


def _controller(clock: FakeClock, **kwargs: Any) -> Controller:
    controller = Controller(store=InMemoryTaskStore(), clock=clock, graceful_stop=1.0, **kwargs)
    return controller


@pytest.mark.parametrize(
    "policy",
    [
        {"max_parallel": 1},
        {"concurrency": ConcurrencyPolicy(max_parallel=4, limits={"gpu": 1})},
    ],
    ids=["slot", "named-resource"],
)
def test_an_abandoned_body_keeps_its_slot_until_it_returns(
    bodies: Bodies, policy: dict[str, Any]
) -> None:
    clock = FakeClock()
    controller = _controller(clock, **policy)
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
    bodies: Bodies,
) -> None:
    clock = FakeClock()
    controller = _controller(clock, max_parallel=1)
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


class LateThreads:
    """A thread executor whose threads are late to start (a loaded machine): each attempt
    is carried only once the test lets its thread go."""

    name = "thread"
    inline = False
    supports_pause = True

    def __init__(self) -> None:
        self.threads = ThreadExecutor()
        self.held: list[Attempt] = []

    def validate(self, fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        self.threads.validate(fn, args, kwargs)

    def launch(self, attempt: Attempt) -> AttemptHandle:
        self.held.append(attempt)
        return _LateHandle()

    def let_go(self) -> None:
        held, self.held = self.held, []
        for attempt in held:
            self.threads.launch(attempt)


class _LateHandle:
    def force_stop(self, clock: Clock) -> bool:
        return False  # a thread cannot be ended


@pytest.mark.parametrize("how", ["stop", "cancel"])
def test_a_stop_before_the_thread_began_the_body_ends_the_task_and_frees_its_slot(
    how: str,
) -> None:
    clock = FakeClock()
    late = LateThreads()
    controller = _controller(clock, max_parallel=1, executor=late)
    ran: list[str] = []

    def work(ctx: TaskContext, key: str) -> str:
        ran.append(key)
        return key

    controller.register("work", work)
    try:
        first = controller.submit("work", "a")
        assert st(first) is S.STARTING  # its thread has not begun the body
        assert late.held
        if how == "stop":
            assert controller.stop(first.task_id, reason="deploy")
        else:  # a pipeline's fail_fast gives up on a released node
            assert first.cancel("fail_fast: node 'x' ended failed")
        clock.advance(1.0)  # the graceful window passes before the thread begins
        outcome = first.wait(WAIT)
        # nothing executes, nor ever will: the body never began, and a thread that begins
        # now is refused; the task did not end "lost, may still be running"
        assert outcome.status is (S.STOPPED if how == "stop" else S.CANCELLED)
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.CANCELLED
        assert controller.active_count == 0
        late.let_go()
        second = controller.submit("work", "b")
        late.let_go()
        assert second.wait(WAIT).status is S.SUCCEEDED, "the slot of the first was never freed"
        assert ran == ["b"]
    finally:
        late.let_go()
        controller.close(timeout=WAIT)
