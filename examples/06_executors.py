"""06 — executors: thread (default), inline, and async bodies.

Run: python examples/06_executors.py
"""

from __future__ import annotations

import asyncio
import threading

from chongming_task import (
    InlineExecutor,
    TaskContext,
    TaskRun,
    TaskStatus,
    ThreadExecutor,
    run_task,
)


def where(ctx: TaskContext) -> str:
    ctx.checkpoint()
    return threading.current_thread().name


async def fetch_all(ctx: TaskContext, urls: list[str]) -> list[str]:
    pages = []
    for url in urls:
        await ctx.acheckpoint()  # responds to stop and pause like checkpoint()
        await asyncio.sleep(0.001)  # the awaited I/O
        pages.append(f"<html>{url}</html>")
    return pages


def main() -> None:
    on_thread = run_task(where, executor=ThreadExecutor())
    print("thread executor ran on:", on_thread.value)
    assert on_thread.value != threading.current_thread().name

    run = TaskRun(where, executor=InlineExecutor())
    run.start()  # the body ran to completion in this thread before start() returned
    print("inline executor ran on:", run.outcome().value, "- terminal at once:", run.status.value)
    assert run.status is TaskStatus.SUCCEEDED
    assert run.outcome().value == threading.current_thread().name
    print("inline pause is honest:", run.pause())  # an inline body cannot be suspended

    pages = run_task(fetch_all, ["a", "b", "c"])
    print("async body:", pages.value)
    assert pages.value == ["<html>a</html>", "<html>b</html>", "<html>c</html>"]

    # An async body stops at `await ctx.acheckpoint()`.
    started = threading.Event()

    async def forever(ctx: TaskContext) -> None:
        started.set()
        while True:
            await ctx.acheckpoint()
            await asyncio.sleep(0.001)

    run = TaskRun(forever)
    run.start()
    assert started.wait(10)
    run.stop(reason="enough")
    outcome = run.wait(10)
    print("async stop:", outcome.status.value)
    assert outcome.status is TaskStatus.STOPPED


if __name__ == "__main__":
    main()
