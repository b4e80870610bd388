"""SchedulingLock: a thread that finds the controller's lock taken posts its work instead of
waiting; the holder runs it before letting go, and every new holder runs it first."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from chongming_core import InMemoryTaskStore, TaskStatus
from chongming_runtime.controller._controller import Controller
from chongming_runtime.controller._scheduling_lock import SchedulingLock, Then, Work

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


def _lock(started: list[tuple[Any, ...]]) -> SchedulingLock:
    """A lock whose start functions record (runs, still held?, where, callbacks told)."""
    lock: SchedulingLock

    def starter(where: str) -> Callable[[list[Any], list[Then]], None]:
        def start(runs: list[Any], then: list[Then]) -> None:
            held = lock._lock._is_owned()  # type: ignore[attr-defined]
            for told in then:
                told()
            started.append((runs, held, where))

        return start

    lock = SchedulingLock(starter("here"), starter("elsewhere"))
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
    # started once the lock was free, on another thread: the holder only held the lock
    assert started == [(["r1", "r2"], False, "elsewhere")]


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
    lock._posted.append((doing(lambda: order.append("posted"), ["r"]), None))  # left over
    with lock:
        order.append("section")
        assert started == []  # runs it made startable wait for the release
    assert order == ["posted", "section"]
    assert started == [(["r"], False, "elsewhere")]


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
    assert started == [(["r"], False, "elsewhere")]
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
def test_a_finishing_task_never_waits_for_the_controllers_lock(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(store=InMemoryTaskStore(), max_parallel=1)
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
        body_threads: list[threading.Thread] = []

        def gated(ctx: object) -> str:
            body_threads.append(threading.current_thread())
            assert gate.wait(WAIT)
            return "done"

        controller.register("gated", gated)
        second = controller.submit("gated")
        third = controller.submit("noop")  # queued behind it (max_parallel=1)
        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(WAIT)
        gate.set()
        # the finishing thread reports, leaves its accounting to the holder and parks
        for _ in range(2000):
            if body_threads and body_threads[0].name == "chongming-task-idle":
                break
            threading.Event().wait(0.005)
        assert body_threads[0].name == "chongming-task-idle"
        assert second.status is TaskStatus.SUCCEEDED
        assert third.status is TaskStatus.QUEUED  # its slot is given when the holder lets go
        assert not second.done  # wait() waits until the slot was passed on
        let_go.set()
        holder.join(WAIT)
        assert second.wait(WAIT).status is TaskStatus.SUCCEEDED
        # started before second's wait() returned
        assert third.snapshot.status is not TaskStatus.QUEUED
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


def test_work_posted_by_a_reporting_thread_is_started_by_the_reporter_that_ran_it(
    started: list[Any],
) -> None:
    lock = _lock(started)
    told: list[str] = []
    posted = threading.Event()

    def inside() -> None:  # the holder is itself a reporting thread (run_or_post)
        assert posted.wait(WAIT)

    holder_done = threading.Event()

    def holder_work() -> list[Any]:
        inside()
        return []

    def report() -> None:
        lock.run_or_post(holder_work)
        holder_done.set()

    holder = threading.Thread(target=report)
    holder.start()
    for _ in range(1000):  # until the holder is inside its work
        if lock._depth:
            break
        threading.Event().wait(0.001)
    result = lock.run_or_post(doing(lambda: None, ["r"]), lambda: lambda: told.append("then"))
    assert result is None
    posted.set()
    assert holder_done.wait(WAIT)
    holder.join(WAIT)
    assert started == [(["r"], False, "here")]
    assert told == ["then"]  # called after the runs were started


def test_work_posted_just_as_the_holder_lets_go_is_not_stranded(started: list[Any]) -> None:
    """The poster's failed try and its append are two steps: if the holder lets go (and finds
    nothing posted) in between, the poster must run the work itself."""
    lock = _lock(started)
    failed_try = threading.Event()
    holder_left = threading.Event()

    class Hooked(deque[tuple[Work, Then | None]]):
        armed = True

        def append(self, item: tuple[Work, Then | None]) -> None:
            if Hooked.armed:  # as if the GIL switched right after the failed try
                Hooked.armed = False
                failed_try.set()
                assert holder_left.wait(WAIT)
            super().append(item)

    lock._posted = Hooked()
    ran: list[str] = []
    holder = Holder(lock)
    poster = threading.Thread(target=lambda: lock.run_or_post(doing(lambda: ran.append("w"))))
    poster.start()
    assert failed_try.wait(WAIT)
    holder.release()  # lets go with nothing posted yet
    holder_left.set()
    poster.join(WAIT)
    assert ran == ["w"]  # run by the poster once it found the lock free
    assert not lock._posted


def test_a_base_exception_in_posted_work_never_leaves_the_lock_held(started: list[Any]) -> None:
    lock = _lock(started)

    def interrupted() -> list[Any]:
        raise KeyboardInterrupt

    lock._posted.append((interrupted, None))
    with pytest.raises(KeyboardInterrupt):
        lock.acquire()
    got: list[bool] = []
    probe = threading.Thread(target=lambda: got.append(lock.acquire(blocking=False)))
    probe.start()
    probe.join(WAIT)
    assert got == [True]  # another thread could take it: it was let go


def test_runs_released_under_a_query_start_here_when_no_thread_can_be_started(
    monkeypatch: pytest.MonkeyPatch,
    make_controller: Callable[..., Controller],
) -> None:
    import chongming_runtime.controller._scheduler as flow

    controller = make_controller(store=InMemoryTaskStore(), max_parallel=1)
    try:
        gate = threading.Event()

        def gated(ctx: object) -> str:
            assert gate.wait(WAIT)
            return "ok"

        controller.register("gated", gated)
        controller.register("noop", lambda ctx: "ok")
        first = controller.submit("gated")
        second = controller.submit("noop")  # queued behind it
        attempts: list[str] = []

        def no_thread(call: Callable[[], None], name: str) -> None:
            attempts.append(name)
            raise RuntimeError("can't start new thread")  # a process limit, say

        monkeypatch.setattr(flow, "run_elsewhere", no_thread)
        with controller._lock:  # a query holds the lock while the first task finishes
            gate.set()
            for _ in range(2000):  # until its report posted the slot accounting
                if controller._lock._posted:
                    break
                threading.Event().wait(0.005)
            assert controller._lock._posted
        # the release could not hand the released run to a new thread: it started it here
        assert attempts == ["chongming-scheduler"]
        assert first.wait(WAIT).status is TaskStatus.SUCCEEDED
        assert second.wait(WAIT).status is TaskStatus.SUCCEEDED
        assert controller.active_count == 0
    finally:
        controller.close(timeout=WAIT)
