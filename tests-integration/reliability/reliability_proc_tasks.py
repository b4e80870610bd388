"""Task bodies of the process storm (a spawned child imports them by module and name).

Every body counts its steps by appending one byte per step to a counter file,
so the test sees from outside whether a child advances (a paused one must not).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from typing import Any

#: a grandchild that ignores SIGTERM like its parent (ignored signals survive exec)
STUBBORN_GRANDCHILD = ["sh", "-c", "trap '' TERM; sleep 30"]


def _tick(counter: str) -> None:
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b".")
    finally:
        os.close(fd)


def work(ctx: Any, plan: str, steps: int, counter: str) -> int:
    """`steps` slices of work with a checkpoint before each; how it ends depends on `plan`:
    ``count`` returns, ``fail`` raises halfway, ``exit`` leaves by ``os._exit`` halfway,
    ``stubborn`` ignores SIGTERM, starts a grandchild that does too, and never checkpoints
    (only a force stop ends it early)."""
    if plan == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ctx.checkpoint()
        grandchild = subprocess.Popen(STUBBORN_GRANDCHILD)
        with open(counter + ".pids", "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()} {grandchild.pid}\n")
        for _ in range(steps):
            _tick(counter)
            time.sleep(0.005)
        grandchild.kill()
        grandchild.wait()
        return steps
    for step in range(steps):
        ctx.checkpoint()
        _tick(counter)
        time.sleep(0.005)
        if step == steps // 2 and plan == "fail":
            raise ValueError("the body fails halfway")
        if step == steps // 2 and plan == "exit":
            os._exit(3)
    ctx.checkpoint()
    return steps


async def awork(ctx: Any, steps: int, counter: str) -> int:
    """`work` with the plan ``count`` as an ``async def`` body (``await ctx.acheckpoint()``)."""
    for _ in range(steps):
        await ctx.acheckpoint()
        _tick(counter)
        await asyncio.sleep(0.001)
    await ctx.acheckpoint()
    return steps
