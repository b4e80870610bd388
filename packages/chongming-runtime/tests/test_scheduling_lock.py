"""SchedulingLock: a thread that finds the controller's lock taken posts its work instead of
waiting; the holder runs it before letting go, and every new holder runs it first."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from chongming_core import InMemoryTaskStore, TaskStatus
from chongming_runtime._controller import Controller
from chongming_runtime._scheduling_lock import SchedulingLock, Work

WAIT = 10.0


class Holder:
    """Holds a lock on a thread of its own until told to let go."""

    def __init__(self, lock: SchedulingLock, inside: Callable[[], None] | None = None) -> None:
        self.lock = lock
        self.inside = inside
        self.holding = threading.Event()
        self.let_go = threading.Event()
        self.thread = threading.Thread(target=self._hold)
        self.thread.start()
        assert self.holding.wait(WAIT)

    def _hold(self) -> None:
        with self.lock:
            self.holding.set()
            assert self.let_go.wait(WAIT)
            if self.inside is not None:
                self.inside()

    def release(self) -> None:
        self.let_go.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


@pytest.fixture
def started() -> list[tuple[list[Any], bool]]:
    return []


def doing(effect: Callable[[], object], runs: list[Any] | None = None) -> Work:
    """Work that does `effect` and returns `runs` (strings stand for runs here)."""

    def work() -> list[Any]:
        effect()
        return list(runs or [])

    return work


def _lock(started: list[tuple[list[Any], bool]]) -> SchedulingLock:
    lock: SchedulingLock

    def start(runs: list[Any]) -> None:  # records whether the lock was still held then
        started.append((runs, lock._lock._is_owned()))  # type: ignore[attr-defined]

    lock = SchedulingLock(start)
    return lock


def test_free_lock_runs_the_work_now_and_returns_its_runs(started: list[Any]) -> None:
    lock = _lock(started)
    ran_on: list[threading.Thread] = []

    work = doing(lambda: ran_on.append(threading.current_thread()), ["r1"])
    assert lock.run_or_post(work) == ["r1"]  # type: ignore[comparison-overlap]  # the caller starts them itself
    assert ran_on == [threading.current_thread()]
    assert started == []


def test_taken_lock_leaves_the_work_to_the_holder(started: list[Any]) -> None:
    lock = _lock(started)
    holder = Holder(lock)
    ran_on: list[threading.Thread] = []

    def work() -> list[Any]:
        ran_on.append(threading.current_thread())
        return ["r1", "r2"]

    assert lock.run_or_post(work) is None  # at once: the caller did not wait
    assert ran_on == []
    holder.release()
    assert ran_on == [holder.thread]  # run by the holder before it let go
    assert started == [(["r1", "r2"], False)]  # and started once the lock was free


def test_a_new_holder_runs_posted_work_before_its_own_section(started: list[Any]) -> None:
    lock = _lock(started)
    order: list[str] = []
    posted = threading.Event()

    def post() -> None:
        lock.run_or_post(doing(lambda: order.append("posted")))
        posted.set()

    # the holder posts through another thread, then lets go (running it), then a third
    # thread takes the lock: what it reads already includes the posted work
    holder = Holder(lock, inside=lambda: None)
    poster = threading.Thread(target=post)
    poster.start()
    assert posted.wait(WAIT)
    poster.join(WAIT)
    holder.release()
    with lock:
        order.append("section")
    assert order == ["posted", "section"]


def test_work_posted_before_a_blocking_acquire_runs_first(started: list[Any]) -> None:
    lock = _lock(started)
    order: list[str] = []
    lock._posted.append(doing(lambda: order.append("posted"), ["r"]))  # left by a thread that lost
    with lock:
        order.append("section")
        assert started == []  # runs it made startable wait for the release
    assert order == ["posted", "section"]
    assert started == [(["r"], False)]


def test_a_nested_section_never_runs_posted_work_in_the_middle_of_the_outer_one(
    started: list[Any],
) -> None:
    lock = _lock(started)
    ran = threading.Event()
    posted = threading.Event()
    seen_inside: list[bool] = []

    def inside() -> None:
        assert posted.wait(WAIT)
        with lock:  # nested: another thread's work must not run in here
            pass
        seen_inside.append(ran.is_set())

    holder = Holder(lock, inside=inside)

    def post() -> None:
        lock.run_or_post(doing(ran.set))
        posted.set()

    poster = threading.Thread(target=post)
    poster.start()
    poster.join(WAIT)
    holder.release()
    assert seen_inside == [False]
    assert ran.is_set()  # run at the outermost release


def test_failing_work_is_logged_and_the_rest_still_runs(
    started: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    lock = _lock(started)
    ran: list[str] = []

    def boom() -> list[Any]:
        raise RuntimeError("broken accounting")

    holder = Holder(lock)
    assert lock.run_or_post(boom) is None
    assert lock.run_or_post(doing(lambda: ran.append("second"), ["r"])) is None
    with caplog.at_level(logging.ERROR, logger="chongming_task.controller"):
        holder.release()
    assert ran == ["second"]
    assert started == [(["r"], False)]
    assert "scheduling work failed" in caplog.text


def test_it_is_still_a_lock_for_other_threads(started: list[Any]) -> None:
    lock = _lock(started)
    holder = Holder(lock)
    got: list[bool] = []
    probe = threading.Thread(target=lambda: got.append(lock.acquire(blocking=False)))
    probe.start()
    probe.join(WAIT)
    assert got == [False]
    holder.release()
    assert lock.acquire(blocking=False)
    lock.release()


# ---------------------------------------------------------------- in the controller
def test_a_finishing_task_never_waits_for_the_controllers_lock() -> None:
    controller = Controller(store=InMemoryTaskStore(), max_parallel=1)
    try:
        controller.register("noop", lambda ctx: "done")
        held = threading.Event()
        let_go = threading.Event()

        def hold() -> None:
            with controller._lock:
                held.set()
                assert let_go.wait(WAIT)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(WAIT)
        # submit would take the lock: the first run is made while nobody holds it
        let_go.set()
        holder.join(WAIT)
        first = controller.submit("noop")
        assert first.wait(WAIT).status is TaskStatus.SUCCEEDED
        # now hold the lock while a task finishes: it must finish (and be done) anyway
        held.clear()
        let_go.clear()
        gate = threading.Event()
        controller.register("gated", lambda ctx: gate.wait(WAIT) and "done")
        second = controller.submit("gated")
        third = controller.submit("noop")  # queued behind it (max_parallel=1)
        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(WAIT)
        gate.set()
        assert second.wait(WAIT).status is TaskStatus.SUCCEEDED  # done while the lock is held
        assert third.status is TaskStatus.QUEUED  # its slot is given when the holder lets go
        let_go.set()
        holder.join(WAIT)
        assert third.wait(WAIT).status is TaskStatus.SUCCEEDED
        assert [t.to_status for t in third.transitions] == [
            TaskStatus.QUEUED,
            TaskStatus.STARTING,
            TaskStatus.RUNNING,
            TaskStatus.SUCCEEDED,
        ]
        assert controller.active_count == 0
    finally:
        controller.close(timeout=WAIT)
