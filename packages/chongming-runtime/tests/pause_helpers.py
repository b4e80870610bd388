"""Helpers of the pause tests: bodies that count their steps in a file, on each executor
that can pause, and the check that a body advances exactly when its status says it may."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from chongming_core import TaskStatus
from chongming_runtime import ProcessExecutor, TaskRun, ThreadExecutor
from chongming_runtime.executors._base import Executor
from chongming_runtime.testing import wait_until

__all__ = [
    "EXECUTORS",
    "TESTS",
    "Steps",
    "body_and_executor",
    "moves",
    "started",
    "still_for",
]

S = TaskStatus
TESTS = Path(__file__).resolve().parent

#: (name, async body, executor factory): every executor that supports pause
EXECUTORS: list[tuple[str, bool, Callable[[], Executor]]] = [
    ("thread", False, ThreadExecutor),
    ("thread-async", True, ThreadExecutor),
    ("process", False, ProcessExecutor),
    ("process-async", True, ProcessExecutor),
]


def body_and_executor(
    tasks: ModuleType, asynchronous: bool, make: Callable[[], Executor]
) -> tuple[Callable[..., Any], Executor]:
    """The counting body (``async def`` or not) and a fresh executor to run it on."""
    return (tasks.acount_steps if asynchronous else tasks.count_steps), make()


class Steps:
    """The steps a counting body made, read from outside (its counter file's size)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __str__(self) -> str:
        return str(self.path)

    def count(self) -> int:
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0


def still_for(steps: Steps, seconds: float) -> bool:
    """True when the body made no step in `seconds` (a held body must make none)."""
    before = steps.count()
    threading.Event().wait(seconds)
    return steps.count() == before


def moves(steps: Steps, within: float = 10.0) -> bool:
    """True once the body made a step within `within` seconds (a free body must)."""
    before = steps.count()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if steps.count() != before:
            return True
        threading.Event().wait(0.002)
    return False


def started(run: TaskRun, steps: Steps) -> None:
    """Start `run` and wait until its body made a step and its start was recorded (a child
    process steps before its parent hears that it began)."""
    run.start()
    wait_until(lambda: steps.count() > 0, "the body's first step", timeout=30)
    wait_until(lambda: run.status is not TaskStatus.STARTING, "its start to be recorded")
