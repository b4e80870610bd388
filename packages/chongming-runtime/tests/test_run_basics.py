"""TaskRun and run_task: starting, waiting, outcomes, options, listeners, executors (§3, §7)."""

from __future__ import annotations

import asyncio
import enum
import sys
import threading
import time
from typing import Any, NamedTuple

import pytest

from chongming_core import (
    ConfigurationError,
    FailureKind,
    FakeClock,
    FixedBackoff,
    RetryPolicy,
    TaskSnapshot,
    TaskStatus,
    Timeout,
    Transition,
    task,
)
from chongming_core.backend import MAX_DEPTH
from chongming_runtime import (
    InlineExecutor,
    TaskContext,
    TaskOutcome,
    TaskRun,
    ThreadExecutor,
    run_task,
)
from chongming_runtime.executors.inline import InlineExecutor as InlineFromModule
from chongming_runtime.executors.thread import ThreadExecutor as ThreadFromModule
from run_helpers import path, st

S = TaskStatus


def _nested(depth: int) -> list[Any]:
    """A list nested `depth` levels deep."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _cycle() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


HAPPY = [
    (S.PENDING, S.QUEUED),
    (S.QUEUED, S.STARTING),
    (S.STARTING, S.RUNNING),
    (S.RUNNING, S.SUCCEEDED),
]


def add(ctx: TaskContext, a: int, *, b: int = 0) -> int:
    ctx.checkpoint()
    return a + b


def test_run_task_returns_an_outcome_with_value_status_and_snapshot() -> None:
    outcome = run_task(add, 2, b=3, task_id="job-1", name="抽取")
    assert isinstance(outcome, TaskOutcome)
    assert outcome.ok
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == 5
    assert outcome.failure is None
    assert outcome.snapshot.task_id == "job-1"
    assert outcome.snapshot.name == "抽取"
    assert outcome.snapshot.executor == "thread"
    assert outcome.snapshot.outcome == 5
    assert [a.number for a in outcome.attempts] == [1]
    assert outcome.attempts[0].status is S.SUCCEEDED


def test_the_trajectory_of_a_successful_run_is_complete_and_versioned() -> None:
    run = TaskRun(add, (1,), {"b": 1}, task_id="t")
    assert st(run) is S.PENDING
    run.start()
    outcome = run.wait(10)
    assert outcome.value == 2
    assert path(run) == HAPPY
    assert [t.status_version for t in run.transitions] == [1, 2, 3, 4]
    assert [t.trigger for t in run.transitions] == [
        "scheduler:queued",
        "scheduler:dispatched",
        "executor:launched",
        "executor:returned",
    ]
    assert run.snapshot.status_version == 4


def test_start_twice_is_an_error() -> None:
    run = TaskRun(add, (1,), executor=InlineExecutor())
    run.start()
    with pytest.raises(ConfigurationError, match=r"already called"):
        run.start()


def test_wait_timeout_raises_the_builtin_timeout_error_and_changes_nothing() -> None:
    release = threading.Event()
    entered = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(10)
        return "ok"

    run = TaskRun(body)
    run.start()
    assert entered.wait(10)  # the body runs only once `running` is recorded
    before = run.transitions
    with pytest.raises(TimeoutError, match="wait\\(\\) changed nothing"):
        run.wait(timeout=0.01)
    assert run.transitions == before
    assert st(run) is S.RUNNING
    release.set()
    assert run.wait(10).value == "ok"


def test_the_default_executor_is_a_daemon_thread_per_attempt() -> None:
    seen: dict[str, Any] = {}

    def body(ctx: TaskContext) -> None:
        current = threading.current_thread()
        seen["daemon"] = current.daemon
        seen["thread"] = current

    run = TaskRun(body)
    run.start()
    run.wait(10)
    assert seen["daemon"] is True
    assert seen["thread"] is not threading.main_thread()
    assert isinstance(run.executor, ThreadExecutor)
    assert ThreadFromModule is ThreadExecutor
    assert InlineFromModule is InlineExecutor


def test_inline_executor_runs_in_the_caller_thread_before_start_returns() -> None:
    seen: list[threading.Thread] = []

    def body(ctx: TaskContext) -> int:
        seen.append(threading.current_thread())
        return 1

    run = TaskRun(body, executor=InlineExecutor())
    run.start()
    assert st(run) is S.SUCCEEDED  # already terminal when start() returned
    assert run.done
    assert seen == [threading.current_thread()]
    assert run.snapshot.executor == "inline"


def test_async_bodies_run_to_completion_on_their_thread() -> None:
    async def body(ctx: TaskContext, n: int) -> int:
        total = 0
        for index in range(n):
            await ctx.acheckpoint()
            await asyncio.sleep(0)
            total += index
        return total

    assert run_task(body, 5).value == 10
    assert run_task(body, 4, executor=InlineExecutor()).value == 6


def test_async_body_stops_at_acheckpoint() -> None:
    entered = threading.Event()

    async def body(ctx: TaskContext) -> None:
        entered.set()
        while True:
            await ctx.acheckpoint()
            await asyncio.sleep(0.001)

    run = TaskRun(body)
    run.start()
    assert entered.wait(10)
    run.stop(reason="enough")
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED


def test_an_exception_fails_the_attempt_with_kind_exception() -> None:
    def body(ctx: TaskContext) -> None:
        raise KeyError("missing")

    run = TaskRun(body)
    run.start()
    outcome = run.wait(10)
    assert outcome.status is S.FAILED
    assert outcome.value is None
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.EXCEPTION
    assert outcome.failure.exception_type == "KeyError"
    assert outcome.failure.traceback is not None
    assert "missing" in outcome.failure.traceback
    assert path(run)[-1] == (S.RUNNING, S.FAILED)


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ({1, 2, 3}, "set"),
        (object(), "object"),
        (float("nan"), "float"),
        (b"x", "bytes"),
        # no store keeps a lone surrogate (bytes that were not UTF-8, decoded leniently)
        ("caf\udce9", "str"),
        ({"rows": ["ok", "caf\udce9"]}, "dict"),
        # JSON would turn the key into "1": other processes would read another value
        ({1: "a"}, "dict"),
        ([{"a": {2: "b"}}], "list"),
        ({(1, 2): "a"}, "dict"),
        # more digits than another process reads back (its default int/str limit)
        pytest.param(10**5000, "int", id="int-5001-digits"),
        pytest.param({"rows": [1, -(10**4300)]}, "dict", id="nested-int-4301-digits"),
        (float("inf"), "float"),
        ([1.0, float("-inf")], "list"),
        ((1, float("nan")), "tuple"),
        (frozenset({1}), "frozenset"),
        (bytearray(b"x"), "bytearray"),
        pytest.param(_nested(MAX_DEPTH + 1), "list", id="nested-too-deep"),
        pytest.param(_cycle(), "list", id="cycle"),
    ],
)
def test_a_result_that_is_not_json_fails_with_result_invalid(value: Any, type_name: str) -> None:
    outcome = run_task(
        lambda ctx: value,
        executor=InlineExecutor(),
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
    )
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert type_name in outcome.failure.message
    assert "pointer" in outcome.failure.message
    assert outcome.failure.retryable is False
    assert len(outcome.attempts) == 1  # not retried: it would fail the same way


@pytest.mark.parametrize(
    "value",
    [
        "café",
        {"名前": ["ok", "nul\x00kept", 1.5]},
        pytest.param(10**4300 - 1, id="int-4300-digits"),  # every process reads it back
        pytest.param(_nested(MAX_DEPTH), id="nested-to-the-limit"),
        pytest.param(["x" * 100_000 + "[" * 1000], id="brackets-in-text"),  # not nesting
    ],
)
def test_results_every_store_keeps_pass(value: Any) -> None:
    outcome = run_task(lambda ctx: value, executor=InlineExecutor())
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == value


class _Colour(enum.IntEnum):
    RED = 1


class _Mode(enum.StrEnum):
    FAST = "fast"


class _Point(NamedTuple):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "read_back"),
    [
        ((1, "x"), [1, "x"]),
        ({"pair": (1, (2, 3))}, {"pair": [1, [2, 3]]}),
        (_Point(1, 2), [1, 2]),
        (_Colour.RED, 1),
        ([_Mode.FAST, {_Mode.FAST: _Colour.RED}], ["fast", {"fast": 1}]),
    ],
)
def test_a_result_is_the_value_every_reader_gets_back(value: Any, read_back: Any) -> None:
    """JSON keeps no tuple and no subclass: this process gets what the store hands back to
    every other reader (a list, an int, a str), not the original type only it would see."""
    outcome = run_task(lambda ctx: value, executor=InlineExecutor())
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == read_back
    assert same_json_types(outcome.value, read_back)
    assert same_json_types(outcome.snapshot.outcome, read_back)


def same_json_types(found: Any, expected: Any) -> bool:
    """Equal and of exactly the same types all the way down."""
    if type(found) is not type(expected):
        return False
    if isinstance(expected, dict):
        return (
            all(type(k) is str and same_json_types(found[k], v) for k, v in expected.items())
            and found.keys() == expected.keys()
        )
    if isinstance(expected, list):
        return len(found) == len(expected) and all(
            same_json_types(f, e) for f, e in zip(found, expected, strict=True)
        )
    return bool(found == expected)


def test_an_int_too_long_to_read_back_says_why_and_what_to_return() -> None:
    outcome = run_task(lambda ctx: {"n": [10**5000]}, task_id="big", executor=InlineExecutor())
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.RESULT_INVALID
    assert (
        "the result at ['n'][0] is an int of 5001 digits, which the store cannot encode as "
        "JSON (limit 4300 digits); return it as a str" in outcome.failure.message
    )


def test_an_int_is_refused_by_the_portable_limit_even_when_this_process_raised_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process, at Python's default limit, could not read it back."""
    monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 0)  # 0: no limit here
    big = 10**4400
    for value in (big, [big], {"n": big}):
        outcome = run_task(lambda ctx, v=value: v, executor=InlineExecutor())
        assert outcome.failure is not None, value
        assert "limit 4300 digits" in outcome.failure.message
    digits_in_text = "9" * 5000
    assert run_task(lambda ctx: [digits_in_text], executor=InlineExecutor()).value == [
        digits_in_text
    ]


def test_per_call_options_override_the_task_spec() -> None:
    @task(name="spec-name", tags={"io"}, retry=RetryPolicy(max_attempts=4), timeout=Timeout(idle=9))
    def decorated(ctx: TaskContext) -> None:
        """Does things."""

    run = TaskRun(decorated)
    snap = run.snapshot
    assert (snap.name, snap.tags, snap.max_attempts) == ("spec-name", frozenset({"io"}), 4)
    assert snap.description == "Does things."
    assert run._setup.timeout == Timeout(idle=9)

    run = TaskRun(
        decorated,
        name="call-name",
        label="标签",
        tags={"cpu"},
        retry=RetryPolicy(max_attempts=2),
        timeout=Timeout(per_attempt=3),
    )
    snap = run.snapshot
    assert (snap.name, snap.label, snap.tags, snap.max_attempts) == (
        "call-name",
        "标签",
        frozenset({"cpu"}),
        2,
    )
    assert run._setup.timeout == Timeout(per_attempt=3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"args": "abc"}, "args must be a tuple"),
        ({"kwargs": [1]}, "kwargs must be a mapping"),
        ({"retry": 3}, "retry must be a RetryPolicy"),
        ({"timeout": 5}, "timeout must be a Timeout"),
        ({"executor": object()}, "executor must be"),
        ({"graceful_stop": -1}, "graceful_stop must be >= 0"),
        ({"pause_timeout": 0}, "pause_timeout must be > 0"),
        ({"pause_timeout": float("inf")}, "pause_timeout must be > 0 seconds and finite"),
        ({"tags": "io"}, "single string"),
    ],
)
def test_bad_options_are_refused_with_a_clear_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        TaskRun(add, **kwargs)


def test_a_non_callable_body_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="callable"):
        TaskRun(42)  # type: ignore[arg-type]


class Recorder:
    def __init__(self, run_lock_probe: TaskRun | None = None) -> None:
        self.transitions: list[tuple[TaskStatus, TaskStatus, int]] = []
        self.side: list[TaskSnapshot] = []
        self.thread_ids: set[int] = set()

    def on_transition(self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot) -> None:
        # Calling back into the run from a listener must not deadlock.
        assert run.snapshot.status_version >= transition.status_version
        self.transitions.append(
            (transition.from_status, transition.to_status, snapshot.status_version)
        )

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        self.side.append(snapshot)


def test_listeners_see_every_transition_in_order_before_wait_returns() -> None:
    recorder = Recorder()

    def body(ctx: TaskContext) -> int:
        for index in range(3):
            ctx.checkpoint()
            ctx.progress(index + 1, total=3)
        return 3

    run = TaskRun(body, listeners=[recorder])
    run.start()
    run.wait(10)
    assert [(a, b) for a, b, _ in recorder.transitions] == HAPPY
    assert [v for _, _, v in recorder.transitions] == [1, 2, 3, 4]
    assert [s.progress.done for s in recorder.side if s.progress] == [1, 2, 3]
    assert {s.status_version for s in recorder.side} == {3}  # side updates keep the version


def test_a_listener_may_stop_the_run_from_its_callback() -> None:
    entered = threading.Event()

    class Stopper:
        def on_transition(
            self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot
        ) -> None:
            if transition.to_status is S.RUNNING:
                run.stop(reason="listener")

        def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
            pass

    def body(ctx: TaskContext) -> None:
        entered.set()
        while True:
            ctx.checkpoint()
            time.sleep(0.001)  # a slice of work

    run = TaskRun(body, listeners=[Stopper()])
    run.start()
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert path(run)[-2:] == [(S.RUNNING, S.STOPPING), (S.STOPPING, S.STOPPED)]


def test_a_failing_listener_is_logged_and_does_not_break_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def on_transition(
            self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot
        ) -> None:
            raise RuntimeError("listener bug")

        def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
            pass

    outcome = run_task_with_listener(Broken())
    assert outcome.ok
    assert "listener bug" in caplog.text


def run_task_with_listener(listener: Any) -> TaskOutcome:
    run = TaskRun(add, (1,), listeners=[listener], executor=InlineExecutor())
    run.start()
    return run.wait(1)


def test_a_pre_created_snapshot_and_actor_are_used() -> None:
    from chongming_core import StateMachine

    clock = FakeClock()
    machine = StateMachine.create("given-id", "given", max_attempts=1, clock=clock)
    machine.mark_queued(actor="controller")
    run = TaskRun(
        add, (4,), machine=machine, actor="node-a", clock=clock, executor=InlineExecutor()
    )
    run.start()
    assert run.task_id == "given-id"
    assert st(run) is S.SUCCEEDED
    assert {t.actor for t in run.transitions[1:]} == {"node-a"}
    assert path(run) == HAPPY


def test_admission_gates_every_attempt() -> None:
    admitted: list[TaskRun] = []
    run = TaskRun(add, (1,), admission=admitted.append)
    run.start()
    assert st(run) is S.QUEUED
    assert admitted == [run]
    run.dispatch()
    assert run.wait(10).value == 1


def test_ctrl_c_in_a_listener_on_the_main_thread_finishes_the_batch_and_hands_on_the_rest() -> None:
    """A KeyboardInterrupt raised by a listener while the main thread tells events is raised
    once the batch under way is told; events queued meanwhile are told by another thread."""
    from chongming_runtime.run._task_run import RunEvent

    run = TaskRun(lambda ctx: None)
    heard: list[str] = []
    threads: list[threading.Thread] = []

    class Interrupts:
        reports_quickly = True

        def on_transition(self, run: TaskRun, transition: Any, snapshot: Any) -> None:
            heard.append(f"t:{transition.to_status.value}")

        def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
            heard.append("side")
            threads.append(threading.current_thread())
            if len(heard) == 1:
                with run._lock:  # more comes in while this batch is being told
                    run._queue_event(RunEvent(snapshot, None))
                raise KeyboardInterrupt

    class Other:
        reports_quickly = True

        def on_transition(self, run: TaskRun, transition: Any, snapshot: Any) -> None:
            heard.append("other-t")

        def on_side_update(self, run: TaskRun, snapshot: Any) -> None:
            heard.append("other-side")

    run.add_listener(Interrupts())
    run.add_listener(Other())
    snapshot = run.snapshot
    with run._lock:
        run._queue_event(RunEvent(snapshot, None))
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        run._deliver()
    assert heard[:2] == ["side", "other-side"]  # the batch under way was told to everyone
    for _ in range(1000):  # what was queued meanwhile is told by another thread
        if len(heard) == 4:
            break
        time.sleep(0.005)
    assert heard == ["side", "other-side", "side", "other-side"]
    assert threads[0] is threading.main_thread()
    assert threads[1] is not threading.main_thread()


def test_ctrl_c_on_the_main_thread_never_strands_events_other_threads_left_to_it() -> None:
    """While the main thread tells `stopping`, the body unwinds on its own thread and queues
    `stopped` for the main thread to tell; a Ctrl-C in the listener must not strand it."""
    started = threading.Event()

    def body(ctx: Any) -> None:
        started.set()
        while True:
            ctx.checkpoint()
            time.sleep(0.005)

    run = TaskRun(body, task_id="a")

    class Interrupts:
        reports_quickly = True

        def on_transition(self, r: TaskRun, transition: Any, snapshot: Any) -> None:
            if (
                transition.to_status is TaskStatus.STOPPING
                and threading.current_thread() is threading.main_thread()
            ):
                deadline = time.monotonic() + 5
                while not r._machine.status.is_terminal and time.monotonic() < deadline:
                    time.sleep(0.01)  # the body unwinds meanwhile: `stopped` is queued
                raise KeyboardInterrupt

        def on_side_update(self, r: TaskRun, snapshot: Any) -> None:
            """Not needed here."""

    run.add_listener(Interrupts())
    run.start()
    assert started.wait(5)
    with pytest.raises(KeyboardInterrupt):
        run.stop("bye")
    assert run.wait(5).status is TaskStatus.STOPPED  # told by another thread, not stranded


def test_a_dispatch_requested_while_an_interrupted_one_unwinds_is_never_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while `starting` is told on the main thread; the launch fails (no thread), the
    failure asks for a retry at once while the interrupted dispatch unwinds, and even the
    hand-off of that retry finds no thread: it is taken on this thread, and the run ends."""
    from chongming_core import FixedBackoff, RetryPolicy
    from chongming_runtime.support import _thread_cache as thread_cache

    launch = thread_cache._ThreadCache.launch
    failures = [2]

    def no_thread_twice(self: Any, target: Any, arg: Any, name: str) -> Any:
        if failures[0] > 0:
            failures[0] -= 1
            raise RuntimeError("can't start new thread")
        return launch(self, target, arg, name)

    monkeypatch.setattr(thread_cache._ThreadCache, "launch", no_thread_twice)

    class Interrupts:
        reports_quickly = True
        told = 0

        def on_transition(self, r: TaskRun, transition: Any, snapshot: Any) -> None:
            if transition.to_status is TaskStatus.STARTING and Interrupts.told == 0:
                Interrupts.told += 1
                raise KeyboardInterrupt

        def on_side_update(self, r: TaskRun, snapshot: Any) -> None:
            """Not needed here."""

    run = TaskRun(lambda ctx: 1, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)))
    run.add_listener(Interrupts())
    with pytest.raises(KeyboardInterrupt):  # the interrupt, not the thread failure
        run.start()
    assert run.wait(10).status is TaskStatus.SUCCEEDED


def test_a_priority_that_is_not_an_integer_is_refused() -> None:
    """As Controller.submit refuses it: a run of a priority "x" used to start and run."""
    with pytest.raises(ConfigurationError, match="priority must be an integer, got 'x'"):
        TaskRun(lambda ctx: None, priority="x")  # type: ignore[arg-type]
