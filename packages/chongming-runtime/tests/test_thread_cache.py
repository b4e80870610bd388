"""The thread cache behind `ThreadExecutor` (guide §7.1, §7.3): a cache, not a pool.

A thread whose job returned parks and takes the next job; a thread whose job
never returns is never handed anything; parked threads exit on their own; no
job ever waits for a thread; every thread is a daemon; each job runs in a fresh
context. And a waiting `TaskRun` holds no event, condition or log buffer.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from chongming_core import FakeClock, FixedBackoff, RetryPolicy, TaskStatus, Timeout
from chongming_runtime import Controller, TaskContext, TaskRun
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.support import _thread_cache as thread_cache
from chongming_runtime.support._thread_cache import _ThreadCache
from chongming_runtime.testing import wait_until

S = TaskStatus


def test_a_thread_whose_job_returned_parks_and_runs_the_next_job() -> None:
    cache = _ThreadCache(idle_seconds=30)
    seen: list[tuple[threading.Thread, str]] = []
    done = threading.Semaphore(0)

    def job(tag: str) -> None:
        current = threading.current_thread()
        seen.append((current, current.name))
        done.release()

    first = cache.launch(job, "a", "chongming-task-a-1")
    assert done.acquire(timeout=10)
    wait_until(lambda: cache.idle_count == 1)
    assert first.name == "chongming-task-idle"  # a parked thread carries no task's name
    second = cache.launch(job, "b", "chongming-task-b-1")
    assert done.acquire(timeout=10)
    assert second is first
    assert seen == [(first, "chongming-task-a-1"), (first, "chongming-task-b-1")]
    assert first.daemon
    cache.clear()
    assert not first.is_alive()


def test_a_job_never_waits_for_a_thread_and_a_stuck_thread_is_never_reused() -> None:
    cache = _ThreadCache(idle_seconds=30)
    release = threading.Event()
    entered = threading.Semaphore(0)

    def stuck(_: object) -> None:
        entered.release()
        release.wait(30)

    stuck_thread = cache.launch(stuck, None, "stuck")
    assert entered.acquire(timeout=10)
    others = [cache.launch(stuck, None, f"other-{i}") for i in range(3)]
    for _ in others:
        assert entered.acquire(timeout=10)  # each started at once on a thread of its own
    assert len({stuck_thread, *others}) == 4
    assert cache.idle_count == 0  # nothing that is still running is ever handed a job
    release.set()
    wait_until(lambda: cache.idle_count == 4)
    cache.clear()


def test_parked_threads_exit_after_the_idle_time_and_at_most_max_idle_are_kept() -> None:
    cache = _ThreadCache(idle_seconds=0.05, max_idle=1)
    release = threading.Event()

    def job(_: object) -> None:
        release.wait(10)

    threads = [cache.launch(job, None, f"job-{i}") for i in range(2)]
    release.set()
    for thread in threads:
        thread.join(10)  # one exits at once (max_idle), the other after the idle time
        assert not thread.is_alive()
    assert cache.idle_count == 0


def test_each_job_runs_in_a_fresh_context_as_on_a_new_thread() -> None:
    cache = _ThreadCache(idle_seconds=30)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []
    done = threading.Semaphore(0)

    def job(value: str) -> None:
        seen.append(var.get())
        var.set(value)
        done.release()

    first = cache.launch(job, "first", "job-1")
    assert done.acquire(timeout=10)
    wait_until(lambda: cache.idle_count == 1)
    assert cache.launch(job, "second", "job-2") is first
    assert done.acquire(timeout=10)
    assert seen == ["unset", "unset"]
    cache.clear()


def test_the_thread_executor_names_the_thread_after_the_attempt_while_it_runs() -> None:
    names: list[str] = []

    def body(ctx: TaskContext) -> None:
        names.append(threading.current_thread().name)

    for index in range(2):
        run = TaskRun(body, task_id=f"named-{index}")
        run.start()
        assert run.wait(10).status is S.SUCCEEDED
    assert names == ["chongming-task-named-0-1", "chongming-task-named-1-1"]


def test_a_queued_run_holds_no_event_condition_log_buffer_or_timer(
    make_controller: Callable[..., Controller],
) -> None:
    clock = FakeClock()
    release = threading.Event()
    controller = make_controller(max_parallel=1, clock=clock)
    controller.register("block", lambda ctx: release.wait(10))
    controller.register("noop", lambda ctx: None)
    controller.register("deadline", lambda ctx: None, timeout=Timeout(start=60))
    blocker = controller.submit("block")
    wait_until(lambda: blocker.status is S.RUNNING)
    timers = clock.pending_timers
    queued = controller.submit("noop")
    assert queued.status is S.QUEUED
    assert not hasattr(queued, "__dict__")  # slots only
    assert queued._finished is None
    assert queued._pauses is None  # no pause control, so no condition to hold a body
    assert queued._deadlines is None
    assert queued._rare.logs is None  # nor the part of a run few runs need (D176)
    assert queued._rare.backoff_timer is None
    with pytest.raises(AttributeError, match="never written"):  # shared by every such run
        queued._rare.stop_reason = "a write that would reach every queued run"
    assert queued.logs == ()
    assert clock.pending_timers == timers  # no timer for a queued task without a start timeout
    with_deadline = controller.submit("deadline")
    assert clock.pending_timers == timers + 1  # ... and exactly one with it
    release.set()
    outcomes = controller.wait_all(timeout=10)
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * 3
    assert queued.done
    assert with_deadline.done
    controller.close()


def test_the_module_cache_is_the_one_the_executor_uses() -> None:
    thread_cache._CACHE.clear()
    run = TaskRun(lambda ctx: None, task_id="cached")
    run.start()
    assert run.wait(10).status is S.SUCCEEDED
    wait_until(lambda: thread_cache._CACHE.idle_count >= 1)
    thread_cache._CACHE.clear()
    assert thread_cache._CACHE.idle_count == 0


def test_a_finishing_thread_keeps_the_one_job_it_released_for_itself() -> None:
    cache = _ThreadCache(idle_seconds=30)
    ran: list[tuple[str, threading.Thread, str]] = []
    done = threading.Semaphore(0)
    handed: list[threading.Thread] = []

    def follower(tag: str) -> None:
        current = threading.current_thread()
        ran.append((tag, current, current.name))
        done.release()

    def leader(tag: str) -> None:
        current = threading.current_thread()
        ran.append((tag, current, current.name))
        thread_cache.body_returned()  # the body is over: only the report is left
        thread_cache.keeping_launch(
            lambda: handed.append(cache.launch(follower, "next", "chongming-task-next-1"))
        )
        handed.append(cache.launch(follower, "other", "chongming-task-other-1"))
        ran.append(("report done", current, current.name))
        done.release()

    first = cache.launch(leader, "lead", "chongming-task-lead-1")
    for _ in range(3):
        assert done.acquire(timeout=10)
    wait_until(lambda: len(ran) == 4)
    by_tag = {tag: (thread, name) for tag, thread, name in ran}
    # the first job released while finishing runs on the same thread, after the report
    assert handed[0] is first
    assert by_tag["next"] == (first, "chongming-task-next-1")
    assert [tag for tag, thread, _ in ran if thread is first] == ["lead", "report done", "next"]
    # only the launch made through keeping_launch is kept: the other went elsewhere at once
    assert handed[1] is not first
    assert by_tag["other"][0] is handed[1]
    cache.clear()


def test_a_thread_whose_body_still_runs_never_keeps_a_job() -> None:
    cache = _ThreadCache(idle_seconds=30)
    release = threading.Event()
    started = threading.Semaphore(0)
    where: list[threading.Thread] = []

    def child(tag: str) -> None:
        where.append(threading.current_thread())
        started.release()

    def body(tag: str) -> None:  # launches while its body is still running (no body_returned)
        cache.launch(child, "child", "chongming-task-child-1")
        assert started.acquire(timeout=10)  # the child ran meanwhile, elsewhere
        release.wait(10)

    parent = cache.launch(body, "parent", "chongming-task-parent-1")
    wait_until(lambda: len(where) == 1)
    assert where[0] is not parent
    release.set()
    cache.clear()


def test_queued_tasks_follow_each_other_on_the_thread_that_freed_the_slot(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=1)
    threads: dict[str, int] = {}

    def record(ctx: TaskContext) -> None:
        threads[ctx.task_id] = threading.get_ident()

    controller.register("record", record)
    gate = threading.Event()
    controller.register("gate", lambda ctx: gate.wait(10))
    first = controller.submit("gate", task_id="gate")
    wait_until(lambda: first.status is S.RUNNING)
    runs = [controller.submit("record", task_id=f"r{i}") for i in range(5)]
    assert [r.status for r in runs] == [S.QUEUED] * 5
    gate.set()
    outcomes = controller.wait_all(timeout=10)
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * 6
    # each finishing task released the next one, which ran on the same thread
    assert len(set(threads.values())) == 1
    for run in runs:
        assert [t.to_status for t in run.transitions] == [
            S.QUEUED,
            S.STARTING,
            S.RUNNING,
            S.SUCCEEDED,
        ]
    controller.close()


def test_a_finished_run_keeps_its_trajectory_but_not_its_attempt_machinery(
    make_controller: Callable[..., Controller],
) -> None:
    import gc

    from chongming_runtime.body._context import RuntimeContext
    from chongming_runtime.executors._attempt import Attempt

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, Attempt | RuntimeContext))

    controller = make_controller(max_parallel=2)
    controller.register("chatty", lambda ctx: ctx.log("done") or 7)
    before = alive()
    runs = [controller.submit("chatty") for _ in range(50)]
    assert [o.value for o in controller.wait_all(timeout=10)] == [7] * 50
    assert alive() == before  # no attempt, context, control or closure stays behind
    for run in runs:
        assert run.logs == ("INFO done",)
        assert run.snapshot.last_heartbeat_at is not None
        assert [t.to_status for t in run.transitions][-1] is S.SUCCEEDED
    controller.close()


def test_the_log_buffer_is_made_by_the_first_line_and_shared_by_all_attempts(
    make_controller: Callable[..., Controller],
) -> None:

    controller = make_controller(max_parallel=2)
    controller.register("quiet", lambda ctx: None)
    seen: list[tuple[str, ...]] = []

    def flaky(ctx: TaskContext) -> str:
        if ctx.attempt == 1:
            ctx.log("first try")
            raise ValueError("transient")
        seen.append(ctx.logs)  # this attempt sees the lines of the earlier one
        ctx.warning("second try")
        return "ok"

    controller.register("flaky", flaky)
    quiet = controller.submit("quiet")
    retried = controller.submit("flaky", retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)))
    assert [o.status for o in controller.wait_all(timeout=10)] == [S.SUCCEEDED] * 2
    assert quiet._rare.logs is None  # it never logged: no buffer was made
    assert quiet.logs == ()
    assert seen == [("INFO first try",)]
    assert retried.logs == ("INFO first try", "WARNING second try")
    controller.close()


def test_a_report_about_to_block_passes_its_kept_attempt_on() -> None:
    cache = _ThreadCache(idle_seconds=30)
    unblock = threading.Event()
    ran: list[threading.Thread] = []
    follower_ran = threading.Event()

    def follower(tag: str) -> None:
        ran.append(threading.current_thread())
        follower_ran.set()

    def leader(tag: str) -> None:
        thread_cache.body_returned()
        thread_cache.keeping_launch(  # kept for this thread ...
            lambda: cache.launch(follower, "next", "chongming-task-next-1")
        )
        thread_cache.hand_over()  # ... until the report is about to block
        assert unblock.wait(10)

    first = cache.launch(leader, "lead", "chongming-task-lead-1")
    assert follower_ran.wait(10)  # it ran while the leader was still blocked
    assert ran[0] is not first
    unblock.set()
    cache.clear()


def test_a_durable_write_in_a_report_does_not_hold_back_the_kept_attempt(
    make_writer: Callable[..., StoreWriter],
) -> None:
    from collections.abc import Sequence

    from chongming_core import ConcurrencyConflict, InMemoryTaskStore, SnapshotWrite, StateMachine

    cache = _ThreadCache(idle_seconds=30)
    follower_ran = threading.Event()

    class SlowStore(InMemoryTaskStore):
        writes_in_memory = False  # it stands for a store whose commits take time

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            assert follower_ran.wait(5)  # the write completes only once the follower ran
            return super().save_many(writes)

    store = SlowStore()
    writer = make_writer(store, flush_interval=60)  # explicit and durable flushes only
    reported = threading.Event()

    def follower(tag: str) -> None:
        follower_ran.set()

    def leader(tag: str) -> None:
        thread_cache.body_returned()
        thread_cache.keeping_launch(lambda: cache.launch(follower, "next", "chongming-task-next-1"))
        writer.record(StateMachine.create("leader", "x").snapshot, durable=True)
        reported.set()

    cache.launch(leader, "lead", "chongming-task-lead-1")
    assert reported.wait(10)
    assert store.get("leader") is not None
    writer.close()
    cache.clear()


class _StartsAndWaits:
    """A listener that, when its run ends, starts another run and waits for it."""

    def __init__(self, start: Callable[[], TaskRun]) -> None:
        self.start = start
        self.outcome: object = None

    def on_transition(self, run: TaskRun, transition: object, snapshot: object) -> None:
        if run.done or not getattr(transition, "to_status", S.PENDING).is_terminal:
            return
        self.outcome = self.start().wait(timeout=5).status

    def on_side_update(self, run: TaskRun, snapshot: object) -> None:
        """Not needed here."""


def test_a_listener_that_waits_for_a_run_it_started_is_not_left_waiting() -> None:
    def follow() -> TaskRun:
        follower = TaskRun(lambda ctx: 2, task_id="follower")
        follower.start()
        return follower

    chain = _StartsAndWaits(follow)
    first = TaskRun(lambda ctx: 1, task_id="first", listeners=[chain])
    first.start()
    assert first.wait(10).status is S.SUCCEEDED
    assert chain.outcome is S.SUCCEEDED  # the follower ran while the listener waited


def test_a_slow_listener_passes_the_kept_attempt_on(
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=1)
    gate = threading.Event()
    controller.register("gate", lambda ctx: gate.wait(10))
    controller.register("quick", lambda ctx: "done")
    chain = _StartsAndWaits(lambda: controller.submit("quick", task_id="third"))
    first = controller.submit("gate", task_id="first")
    first.add_listener(chain)
    second = controller.submit("quick", task_id="second")  # queued: first's finish starts it
    wait_until(lambda: first.status is S.RUNNING)
    gate.set()
    # first's listener waits for "third", queued behind "second", which first's own finish
    # released: "second" must start elsewhere while the listener waits
    assert first.wait(10).status is S.SUCCEEDED
    assert chain.outcome is S.SUCCEEDED
    assert second.wait(10).status is S.SUCCEEDED
    controller.close()


def test_a_job_that_raises_after_keeping_a_launch_passes_it_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = _ThreadCache(idle_seconds=30)
    ran: list[tuple[str, threading.Thread]] = []
    done = threading.Event()
    raised_on: list[threading.Thread] = []

    def follower(tag: str) -> None:
        ran.append((tag, threading.current_thread()))
        done.set()

    def leader(tag: str) -> None:
        raised_on.append(threading.current_thread())
        thread_cache.body_returned()
        thread_cache.keeping_launch(lambda: cache.launch(follower, "next", "chongming-next"))
        raise SystemExit("the report ends its thread")  # the kept job must not be lost

    cache.launch(leader, "lead", "chongming-lead")
    assert done.wait(10)
    assert ran[0][0] == "next"
    assert ran[0][1] is not raised_on[0]  # started on another thread
    # what the job raised is logged, and the thread goes on: it parks for the next job
    # (D65), and is handed one like any other thread that came back
    deadline = time.monotonic() + 10
    while cache.idle_count < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert raised_on[0].is_alive()
    assert "SystemExit: the report ends its thread" in caplog.text
    again = threading.Event()
    cache.launch(lambda _: again.set(), None, "chongming-again")
    assert again.wait(10)
    cache.clear()
    assert not raised_on[0].is_alive()


def test_a_listener_raising_system_exit_on_a_task_thread_still_starts_the_kept_attempt(
    caplog: pytest.LogCaptureFixture,
    make_controller: Callable[..., Controller],
) -> None:
    controller = make_controller(max_parallel=1)
    gate = threading.Event()
    body_threads: list[threading.Thread] = []

    def gated(ctx: object) -> bool:
        body_threads.append(threading.current_thread())
        return gate.wait(10)

    controller.register("gate", gated)
    controller.register("quick", lambda ctx: "done")

    class GivesUp:
        reports_quickly = True  # claims not to block, so nothing is passed on before it

        def on_transition(self, run: TaskRun, transition: object, snapshot: object) -> None:
            if getattr(transition, "to_status", S.PENDING).is_terminal:
                raise SystemExit("the listener ends its thread")

        def on_side_update(self, run: TaskRun, snapshot: object) -> None:
            """Not needed here."""

    first = controller.submit("gate", task_id="first")
    first.add_listener(GivesUp())
    second = controller.submit("quick", task_id="second")
    wait_until(lambda: first.status is S.RUNNING)
    gate.set()
    assert second.wait(10).status is S.SUCCEEDED  # started on another thread
    assert controller.active_count == 0
    # the listener's SystemExit on a task thread is logged and the telling goes on: the
    # run ended and its waiters were told
    assert first.wait(10).status is S.SUCCEEDED
    assert "raised SystemExit on task 'first'; the run goes on" in caplog.text
    assert body_threads[0].is_alive()  # parked for the next attempt, not ended
    controller.close(timeout=10)


def test_a_listener_raising_system_exit_on_retry_wait_does_not_strand_the_retry(
    caplog: pytest.LogCaptureFixture,
    make_controller: Callable[..., Controller],
) -> None:

    controller = make_controller(max_parallel=1)
    calls: list[int] = []
    go = threading.Event()

    def flaky(ctx: object) -> str:
        assert go.wait(10)
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("the first attempt fails")
        return "ok"

    class GivesUp:
        reports_quickly = True

        def on_transition(self, run: TaskRun, transition: Any, snapshot: object) -> None:
            if transition.to_status is S.RETRY_WAIT:
                raise SystemExit("the listener exits")

        def on_side_update(self, run: TaskRun, snapshot: object) -> None:
            """Not needed here."""

    controller.register("flaky", flaky)
    run = controller.submit(
        "flaky", retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)), task_id="r1"
    )
    run.add_listener(GivesUp())
    go.set()
    outcome = run.wait(10)
    assert outcome.status is S.SUCCEEDED
    assert len(calls) == 2
    assert [t.to_status for t in run.transitions].count(S.RETRY_WAIT) == 1
    controller.close(timeout=10)
