"""Task bodies for the process-executor tests.

A spawned child imports the task function by module and name, so these live in
their own module, which the tests put on ``sys.path`` (the child inherits it).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from chongming_core import ConfigurationError, task


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


class TwoPartError(Exception):
    """An exception whose pickle does not round-trip (its __init__ takes two arguments)."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def raise_two_part_error(ctx: Any) -> None:
    raise TwoPartError("input", "unreadable")


class Holder(dict[str, Any]):
    """A dict (so it passes as JSON) whose pickle fails: it keeps a lock."""

    def __init__(self) -> None:
        super().__init__(rows=3)
        self.lock = threading.Lock()


def return_unpicklable_dict(ctx: Any) -> dict[str, Any]:
    return Holder()


def return_tuples(ctx: Any) -> tuple[Any, ...]:
    return (1, (2, "x"), {"pair": (3, 4)})


def return_int_of_5001_digits(ctx: Any) -> int:
    return 10**5000


def report_infinite_progress(ctx: Any) -> str:
    try:
        ctx.progress(1, total=float("inf"))
    except ConfigurationError as refused:
        return f"refused: {refused}"
    return "accepted"


def log_at_a_level_by_name(ctx: Any) -> str:
    try:
        ctx.log("by name", level="WARNING")
    except ConfigurationError as refused:
        ctx.log("after")
        return f"refused: {refused}"
    return "accepted"


def log_then_fail_once(ctx: Any) -> list[str]:
    ctx.log(f"attempt {ctx.attempt}")
    if ctx.attempt == 1:
        raise ConnectionError("first fails")
    return list(ctx.logs)


def start_grandchild_and_wait(ctx: Any, pid_file: str) -> None:
    """Start a long-running subprocess, note its pid, and wait for it (no checkpoint)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(pid_file).write_text(str(child.pid), encoding="utf-8")
    ctx.progress(1)  # the test may stop now
    child.wait()


def start_stubborn_grandchild_and_wait(ctx: Any, pid_file: str) -> None:
    """A subprocess that ignores SIGTERM (a server draining slowly, a shell trap)."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    child.stdout.readline()
    Path(pid_file).write_text(str(child.pid), encoding="utf-8")
    ctx.progress(1)
    child.wait()


def busy_in_c(ctx: Any, pid_file: str) -> int:
    """Hold the GIL in one long C call (a native library's computation)."""
    Path(pid_file).write_text(str(os.getpid()), encoding="utf-8")
    return sum(range(3 * 10**9)) % 7


def new_session(ctx: Any) -> int:
    """A body that detaches into a session of its own (daemon-style helpers do)."""
    os.setsid()
    return os.getsid(0)


def write_artifact(ctx: Any, text: str) -> str:
    """Write `text` to ``out.txt`` in the attempt's artifact folder; return the folder."""
    folder: Path = ctx.artifact_dir
    (folder / "out.txt").write_text(text, encoding="utf-8")
    return str(folder)


def _tick(counter: str) -> None:
    """One step of work seen from outside: one byte appended to the file `counter`."""
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b".")
    finally:
        os.close(fd)


def count_steps(ctx: Any, counter: str) -> None:
    """Checkpoint, then count a step, every millisecond until stopped."""
    while True:
        ctx.checkpoint()
        _tick(counter)
        time.sleep(0.001)


async def acount_steps(ctx: Any, counter: str) -> None:
    """`count_steps` for an ``async def`` body (``await ctx.acheckpoint()``)."""
    while True:
        await ctx.acheckpoint()
        _tick(counter)
        await asyncio.sleep(0.001)


def _wait_for_gate(path: str) -> str:
    """In the child, while its attempt is being loaded: wait until the file `path` exists
    (at most a minute, so a test that never opens it leaves no child behind for long)."""
    deadline = time.monotonic() + 60.0
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.005)
    return path


class StartGate:
    """An argument that holds a child's start until the test opens it: a child loads its
    arguments before it reports its start, and loading this one waits for the file `path`.

    The parent only pickles it (to check it can cross), which waits for nothing.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_wait_for_gate, (self.path,))


def _refuse_to_load() -> None:
    raise RuntimeError("this argument cannot be loaded in a child process")


class LoadsNowhere:
    """An argument a child cannot load: its process dies before the body can begin."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_refuse_to_load, ())


def count_steps_behind(ctx: Any, gate: Any, counter: str) -> None:
    """`count_steps` for a body whose start a `StartGate` (or a held launch) delays."""
    count_steps(ctx, counter)
