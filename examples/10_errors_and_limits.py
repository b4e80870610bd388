"""10 — errors, and the limits that are semantics, not missing features (guide §10, §11).

Run: python examples/10_errors_and_limits.py
"""

from __future__ import annotations

import threading
from typing import Any

from chongming_task import FailureKind, TaskStatus
from chongming_task.errors import (
    AttemptsExhausted,
    ConcurrencyConflict,
    ConfigurationError,
    InvalidTransition,
    StoreError,
    TaskCancelled,
    TaskError,
)
from chongming_task.run import TaskRun
from chongming_task.runtime.executors.inline import InlineExecutor


def swallowing_loop(ctx: Any) -> None:
    """The common mistake: `except Exception` around the loop. A stop still gets through."""
    while True:
        try:
            ctx.checkpoint()
            threading.Event().wait(0.002)
        except Exception as exc:  # meant for business errors only
            print(f"business error handled: {exc}")


def main() -> None:
    """Show the error tree, the unswallowable stop, and three honest limits."""
    # §10: one root for every error, and TaskCancelled outside it on purpose
    for error in (InvalidTransition, AttemptsExhausted, ConcurrencyConflict, StoreError):
        assert issubclass(error, TaskError)
    assert issubclass(ConfigurationError, TaskError)
    assert issubclass(TaskCancelled, BaseException)
    assert not issubclass(TaskCancelled, Exception)

    run = TaskRun(swallowing_loop, task_id="swallow", graceful_stop=5)
    run.start()
    started = threading.Event()
    for _ in range(1000):
        if run.status is TaskStatus.RUNNING:
            started.set()
            break
        threading.Event().wait(0.005)
    assert started.is_set()
    run.stop(reason="release window")
    outcome = run.wait(timeout=10)
    print(f"except Exception around the loop: {outcome.status.value}")
    assert outcome.status is TaskStatus.STOPPED  # the stop was not swallowed
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED

    # §11: wait(timeout) never kills anything; it only stops waiting
    release = threading.Event()

    def slow(ctx: Any) -> str:
        while not release.is_set():
            ctx.checkpoint()
            release.wait(0.005)
        return "done"

    run = TaskRun(slow, task_id="slow")
    run.start()
    try:
        run.wait(timeout=0.05)
    except TimeoutError as waited:
        print(f"wait timed out: {waited}")
    assert run.status in {TaskStatus.STARTING, TaskStatus.RUNNING}  # untouched
    release.set()
    assert run.wait(timeout=10).value == "done"

    # §11: the inline executor cannot pause, and says so instead of pretending
    gate = threading.Event()
    answers: list[bool] = []

    def inline_body(ctx: Any) -> None:
        answers.append(inline.pause(timeout=0.05))
        gate.set()

    inline = TaskRun(inline_body, task_id="inline", executor=InlineExecutor())
    inline.start()  # runs to the end right here, in this thread
    assert gate.is_set()
    print(f"pause() on the inline executor: {answers[0]}")
    assert answers == [False]
    assert inline.status is TaskStatus.SUCCEEDED


if __name__ == "__main__":
    main()
