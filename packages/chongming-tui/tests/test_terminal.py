"""The real dashboard in a real (pseudo) terminal: Ctrl-C and SIGTERM end it cleanly.

A dashboard killed by a signal's default action leaves the terminal in the
alternate screen with mouse reporting on; the operator's shell is unusable until
``reset``. Each test starts ``chongming-task dashboard`` in a pty, waits until its
first refresh is drawn, interrupts it and expects exit code 0 and the sequence
that leaves the alternate screen.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_core import FakeClock, TaskStore
from chongming_store_sqlite import SqliteTaskStore

pty = pytest.importorskip("pty")

LEAVE_ALTERNATE_SCREEN = b"\x1b[?1049l"


def _read_until(fd: int, wanted: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.fixture
def db(tmp_path: Path, seeder: Callable[[TaskStore, FakeClock], None]) -> Path:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as store:
        seeder(store, FakeClock())
    return path


@pytest.mark.parametrize("interrupt", ["ctrl+c", "SIGTERM"])
def test_the_dashboard_ends_cleanly(db: Path, interrupt: str) -> None:
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "150", "LINES": "40"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "chongming_cli", "--db", str(db), "dashboard"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    try:
        shown = _read_until(leader, b"total", timeout=30)
        assert b"total" in shown, f"the first refresh was never drawn: {shown[-500:]!r}"
        if interrupt == "ctrl+c":
            os.write(leader, b"\x03")
        else:
            process.send_signal(signal.SIGTERM)
        rest = _read_until(leader, LEAVE_ALTERNATE_SCREEN, timeout=15)
        code = process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    assert code == 0, f"exit code {code} after {interrupt}"
    assert LEAVE_ALTERNATE_SCREEN in rest, "the terminal was not restored"


@pytest.mark.parametrize("where", ["both", "stdin", "stdout"])
def test_without_a_terminal_the_dashboard_is_refused_in_one_line(db: Path, where: str) -> None:
    """Fed from /dev/null its input thread spun on end-of-file, and writing to a pipe whose
    reader had left blocked it for good, deaf to SIGTERM: it now refuses to start."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "chongming_cli", "--db", str(db), "dashboard"],
            stdin=subprocess.DEVNULL if where in {"both", "stdin"} else follower,
            stdout=subprocess.PIPE if where in {"both", "stdout"} else follower,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert process.returncode == 1
    (line,) = process.stderr.decode().splitlines()
    assert line.startswith("chongming-task: error: the dashboard needs a terminal")
    named = {"both": "standard input and standard output are", "stdin": "standard input is",
             "stdout": "standard output is"}[where]  # fmt: skip
    assert named in line
    assert b"Traceback" not in process.stderr
