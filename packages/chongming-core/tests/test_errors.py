"""The error tree of guide §10 and why `TaskCancelled` is a `BaseException` (§5.1, §10)."""

from __future__ import annotations

import pytest

from chongming_core import (
    AttemptsExhausted,
    CircularDependency,
    ConcurrencyConflict,
    ConfigurationError,
    DependencyFailed,
    InvalidTransition,
    StoreError,
    TaskCancelled,
    TaskError,
    TaskExecutionError,
    TaskStatus,
    TaskTimeout,
)

TREE = [
    InvalidTransition,
    DependencyFailed,
    CircularDependency,
    TaskTimeout,
    TaskExecutionError,
    AttemptsExhausted,
    ConcurrencyConflict,
    StoreError,
    ConfigurationError,
]


def test_task_error_is_an_exception() -> None:
    assert issubclass(TaskError, Exception)


@pytest.mark.parametrize("error", TREE)
def test_every_error_of_the_tree_is_a_direct_task_error(error: type[TaskError]) -> None:
    assert issubclass(error, TaskError)
    assert error.__bases__ == (TaskError,)


def test_task_cancelled_is_a_base_exception_outside_the_tree() -> None:
    assert issubclass(TaskCancelled, BaseException)
    assert not issubclass(TaskCancelled, Exception)
    assert not issubclass(TaskCancelled, TaskError)


def _work_loop_that_catches_exception(stop_after: int, log: list[str]) -> int:
    """The common loop of §10: ``except Exception`` meant for business errors."""
    done = 0
    while True:
        try:
            done += 1
            if done == 2:
                raise ValueError("a business error")
            if done == stop_after:
                raise TaskCancelled("发布窗口", task_id="t1")
        except Exception as exc:
            log.append(str(exc))
        if done > 100:
            return done


def test_except_exception_does_not_swallow_a_stop() -> None:
    log: list[str] = []
    with pytest.raises(TaskCancelled) as info:
        _work_loop_that_catches_exception(stop_after=5, log=log)
    assert log == ["a business error"]
    assert info.value.reason == "发布窗口"
    assert info.value.task_id == "t1"


def test_task_cancelled_attributes() -> None:
    plain = TaskCancelled()
    assert (plain.reason, plain.task_id, str(plain)) == (None, None, "stop requested")
    given = TaskCancelled("release window", task_id="job-1")
    assert (given.reason, given.task_id, str(given)) == (
        "release window",
        "job-1",
        "release window",
    )


def test_task_error_carries_message_and_task_id() -> None:
    error = TaskError("it broke; do this instead", task_id="t9")
    assert (str(error), error.message, error.task_id) == (
        "it broke; do this instead",
        "it broke; do this instead",
        "t9",
    )
    assert TaskError("x").task_id is None


def test_invalid_transition_attributes_and_message() -> None:
    error = InvalidTransition(
        task_id="t1",
        current=TaskStatus.QUEUED,
        target=TaskStatus.RUNNING,
        action="executor:launched",
        allowed=[TaskStatus.STARTING, TaskStatus.CANCELLED],
        detail="the task never started",
    )
    assert error.task_id == "t1"
    assert error.current is TaskStatus.QUEUED
    assert error.target is TaskStatus.RUNNING
    assert error.action == "executor:launched"
    assert error.allowed == frozenset({TaskStatus.STARTING, TaskStatus.CANCELLED})
    assert str(error) == (
        "illegal transition of task 't1': queued -> running; action 'executor:launched'; "
        "allowed now: cancelled, starting (the task never started)"
    )


def test_invalid_transition_says_none_when_nothing_is_allowed() -> None:
    terminal = InvalidTransition(
        task_id="t1",
        current=TaskStatus.LOST,
        target=TaskStatus.RUNNING,
        action="executor:launched",
        allowed=(),
    )
    assert "allowed now: none (terminal)" in str(terminal)
    guarded = InvalidTransition(
        task_id="t1", current=TaskStatus.PAUSED, target=None, action="control:resume", allowed=()
    )
    assert "paused -> ?" in str(guarded)
    assert "allowed now: none" in str(guarded)
    assert "terminal" not in str(guarded)


def test_attempts_exhausted_attributes() -> None:
    error = AttemptsExhausted(task_id="t1", attempt=3, max_attempts=3)
    assert (error.task_id, error.attempt, error.max_attempts) == ("t1", 3, 3)
    assert "used 3 of 3 attempts" in str(error)
    assert "retry()" in str(error)


def test_concurrency_conflict_attributes() -> None:
    error = ConcurrencyConflict("version moved", task_id="t1", expected=4, actual=5)
    assert (error.task_id, error.expected, error.actual) == ("t1", 4, 5)
    created = ConcurrencyConflict("exists", task_id="t1")
    assert (created.expected, created.actual) == (None, None)


def test_store_error_says_whether_a_lock_held_elsewhere_ran_out() -> None:
    plain = StoreError("disk full", task_id="t1")
    assert (plain.locked, plain.task_id, str(plain)) == (False, "t1", "disk full")
    assert StoreError("database is locked", locked=True).locked


def test_circular_dependency_names_the_cycle() -> None:
    error = CircularDependency(["a", "b", "c", "a"])
    assert error.cycle == ("a", "b", "c", "a")
    assert "a -> b -> c -> a" in str(error)
    assert "remove one of these edges" in str(error)


def test_dependency_failed_and_timeout_attributes() -> None:
    failed = DependencyFailed("upstream 'fetch' failed", task_id="load", upstream="fetch")
    assert (failed.task_id, failed.upstream) == ("load", "fetch")
    timeout = TaskTimeout("idle for 60s", task_id="t1", kind="timeout_idle")
    assert (timeout.task_id, timeout.kind) == ("t1", "timeout_idle")


def test_task_execution_error_keeps_the_cause() -> None:
    original = KeyError("row 7")

    def run_body() -> None:
        try:
            raise original
        except KeyError as exc:
            raise TaskExecutionError("task body raised KeyError", task_id="t1") from exc

    with pytest.raises(TaskExecutionError) as info:
        run_body()
    assert info.value.__cause__ is original
    assert info.value.task_id == "t1"
