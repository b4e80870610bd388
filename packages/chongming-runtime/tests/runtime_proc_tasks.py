"""Task bodies for the process-executor tests.

A spawned child imports the task function by module and name, so these live in
their own module, which the tests put on ``sys.path`` (the child inherits it).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

from chongming_core import task


def square(ctx: Any, value: int) -> dict[str, int]:
    ctx.checkpoint()
    ctx.progress(1, total=1, unit="item")
    ctx.log(f"squaring {value}")
    return {"value": value * value, "pid": os.getpid()}


@task
def loop_forever(ctx: Any, interval: float = 0.002) -> int:
    rounds = 0
    while True:
        ctx.checkpoint()
        rounds += 1
        ctx.progress(rounds, unit="round")
        time.sleep(interval)


def loop_until_stopped(ctx: Any) -> int:
    rounds = 0
    while True:
        try:
            ctx.checkpoint()
        except BaseException:
            break
        rounds += 1
        ctx.progress(rounds, unit="round")
        time.sleep(0.002)
    return rounds


def ignore_everything(ctx: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx.checkpoint()
    ctx.progress(1)  # tells the test the handler is in place
    while True:
        time.sleep(0.01)


def sleep_without_checkpoint(ctx: Any, seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def exit_hard(ctx: Any, code: int) -> None:
    ctx.checkpoint()
    os._exit(code)


def segfault(ctx: Any) -> None:
    ctx.checkpoint()
    ctypes.string_at(0)


def raise_value_error(ctx: Any) -> None:
    raise ValueError("bad input")


def return_set(ctx: Any) -> set[int]:
    return {1, 2, 3}


async def async_square(ctx: Any, value: int) -> int:
    await ctx.acheckpoint()
    return value * value
