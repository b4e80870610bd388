"""chongming_runtime.testing: bounded waits, gates, looping bodies and the closer."""

from __future__ import annotations

import threading
import time

import pytest

from chongming_core import FakeClock, InMemoryTaskStore, TaskStatus
from chongming_runtime.testing import Closer, Gate, checkpoint_until, spin, wait_until

S = TaskStatus


def test_wait_until_returns_once_the_predicate_holds() -> None:
    ready = threading.Event()
    threading.Timer(0.05, ready.set).start()
    wait_until(ready.is_set, "the timer")
    assert ready.is_set()


def test_wait_until_fails_naming_what_it_waited_for_after_its_timeout() -> None:
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0.05s waiting for the moon"):
        wait_until(lambda: False, "the moon", timeout=0.05)
    assert time.monotonic() - began < 5


def test_a_gate_holds_bodies_until_released_and_a_stop_reaches_them() -> None:
    closer = Closer()
    gate = Gate(timeout=10)
    try:
        # a fake clock: the stops' grace timers start no thread that would outlive the test
        controller = closer.controller(clock=FakeClock())
        controller.register("held", gate.body)
        controller.register("spin", spin)
        held = [controller.submit("held", f"n{i}") for i in range(2)]
        spinning = controller.submit("spin")
        gate.wait_started(2)
        assert sorted(gate.started) == ["n0", "n1"]
        assert [run.status for run in held] == [S.RUNNING, S.RUNNING]
        controller.stop(held[1].task_id)
        assert held[1].wait(10).status is S.STOPPED
        gate.release()
        assert held[0].wait(10).value == "n0"
        controller.stop(spinning.task_id)
        assert spinning.wait(10).status is S.STOPPED
    finally:
        gate.release()
        closer.close()


def test_wait_started_fails_when_no_body_enters_in_time() -> None:
    with pytest.raises(AssertionError, match=r"did not start within 0.05s"):
        Gate(timeout=0.05).wait_started()


def test_checkpoint_until_returns_when_its_event_is_set() -> None:
    class Ctx:
        checkpoints = 0

        def checkpoint(self) -> None:
            self.checkpoints += 1

    ctx = Ctx()
    event = threading.Event()
    threading.Timer(0.05, event.set).start()
    checkpoint_until(ctx, event, interval=0.001)
    assert ctx.checkpoints > 1


def test_the_closer_closes_everything_last_first() -> None:
    closed: list[str] = []

    class Thing:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    closer = Closer()
    closer.add(Thing("a"))
    writer = closer.writer(InMemoryTaskStore())
    controller = closer.controller()
    closer.add(Thing("b"))
    closer.close()
    assert closed == ["b", "a"]
    assert writer._is_closed()
    assert controller._closed


def test_a_close_that_hangs_fails_within_the_bound_and_the_rest_are_still_closed() -> None:
    released = threading.Event()
    closed: list[str] = []

    class Hangs:
        def close(self) -> None:
            released.wait(30)

    class Quick:
        def close(self) -> None:
            closed.append("quick")

    closer = Closer(timeout=0.1)
    closer.add(Quick())
    closer.add(Hangs())
    began = time.monotonic()
    try:
        with pytest.raises(AssertionError, match=r"did not finish within 0.2s"):
            closer.close()
    finally:
        released.set()
    assert time.monotonic() - began < 5
    assert closed == ["quick"]


def test_a_close_that_raises_fails_with_its_error_chained() -> None:
    class Raises:
        def close(self) -> None:
            raise RuntimeError("disk on fire")

    closer = Closer()
    closer.add(Raises())
    with pytest.raises(AssertionError, match="disk on fire") as caught:
        closer.close()
    assert isinstance(caught.value.__cause__, RuntimeError)
