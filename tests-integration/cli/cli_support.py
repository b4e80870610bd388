"""Helpers of the CLI tests: a task module on PYTHONPATH and a helper that runs the CLI
as a real subprocess (``python -m chongming_cli``)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from chongming_core import TaskSnapshot, TaskStatus
from chongming_store_sqlite import SqliteTaskStore

#: The task module every CLI test uses (written to a temporary folder on PYTHONPATH).
TASK_MODULE = textwrap.dedent(
    '''
    """Tasks of the CLI tests."""
    from __future__ import annotations

    import time
    from typing import Any

    from chongming_core import TaskCancelled, task


    @task(tags={"math"})
    def add(ctx: Any, a: int, b: int = 0) -> int:
        """Add two numbers."""
        ctx.checkpoint()
        return a + b


    @task
    def echo(ctx: Any, value: Any = None, **more: Any) -> Any:
        """Return what it was given."""
        ctx.checkpoint()
        return {"value": value, **more} if more else value


    @task
    def boom(ctx: Any, message: str = "boom") -> None:
        """Always fails."""
        ctx.checkpoint()
        raise ValueError(message)


    @task
    def spin(ctx: Any) -> None:
        """Loop until stopped (a stop ends it stopped)."""
        n = 0
        while True:
            ctx.checkpoint()
            n += 1
            ctx.progress(n, unit="step")
            time.sleep(0.01)


    @task
    def graceful(ctx: Any) -> int:
        """Loop until stopped, then return the count (R7's race-free form)."""
        n = 0
        while True:
            try:
                ctx.checkpoint()
            except TaskCancelled:
                return n
            n += 1
            ctx.progress(n, unit="step")
            time.sleep(0.01)
    '''
)

#: Environment variables the CLI reads; tests start from none of them.
CLI_ENV = (
    "CHONGMING_DB",
    "CHONGMING_DSN",
    "CHONGMING_NUM_BUCKETS",
    "CHONGMING_OWNED_BUCKETS",
    "CHONGMING_OWNER",
    "CHONGMING_DEBUG",
)


@dataclass(frozen=True)
class Workspace:
    """A folder with the task module ``cli_tasks`` and a database path."""

    root: Path
    db: Path
    env: dict[str, str]

    def cli(
        self,
        *args: str,
        timeout: float = 60,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``python -m chongming_cli ARGS`` to the end."""
        return subprocess.run(
            [sys.executable, "-m", "chongming_cli", *args],
            cwd=cwd or self.root,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def spawn(
        self, *args: str, env: dict[str, str] | None = None, own_group: bool = False
    ) -> subprocess.Popen[str]:
        """Start ``python -m chongming_cli ARGS`` in the background (with `own_group`, in a
        session of its own: a signal can then go to its whole process group)."""
        return subprocess.Popen(
            [sys.executable, "-m", "chongming_cli", *args],
            cwd=self.root,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=own_group,
        )

    def snapshot(self, task_id: str) -> TaskSnapshot | None:
        """The task as the store has it now."""
        with SqliteTaskStore(self.db) as store:
            return store.get(task_id)

    def wait_for(
        self,
        task_id: str,
        predicate: Callable[[TaskSnapshot], bool],
        *,
        timeout: float = 20.0,
        process: subprocess.Popen[str] | None = None,
    ) -> TaskSnapshot:
        """Poll the store until the task satisfies `predicate` (bounded by `timeout`)."""
        deadline = time.monotonic() + timeout
        last: TaskSnapshot | None = None
        while time.monotonic() < deadline:
            if self.db.exists():
                last = self.snapshot(task_id)
                if last is not None and predicate(last):
                    return last
            if process is not None and process.poll() is not None:
                out, err = process.communicate()
                pytest.fail(f"the run process exited early ({process.returncode}):\n{out}\n{err}")
            time.sleep(0.02)
        pytest.fail(f"task {task_id!r} never reached the expected state; last seen: {last}")


def status_is(*statuses: TaskStatus) -> Callable[[TaskSnapshot], bool]:
    """A predicate for `Workspace.wait_for`."""
    return lambda snapshot: snapshot.status in statuses


@contextlib.contextmanager
def reaped(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """Kill and reap `process` on leaving the block if it still runs (a failed assertion
    inside must not leave a background CLI process behind)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def finish(process: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    """Wait for a background CLI process; returns (exit code, stdout, stderr)."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the CLI process did not end in {timeout}s:\n{out}\n{err}")
    return process.returncode, out, err


def make_workspace(root: Path, extra_path: Sequence[Path] = ()) -> Workspace:
    """Write the task module under `root` and build the subprocess environment."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cli_tasks.py").write_text(TASK_MODULE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in CLI_ENV and k != "NO_COLOR"}
    paths = [*(str(p) for p in extra_path), str(root)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    return Workspace(root=root, db=root / "tasks.db", env=env)


#: A command the console suggests: ``chongming-task`` and its words (a quoted word may hold
#: spaces; a suggestion ends at ";", ")" or the end of the line).
HINT = re.compile(r"chongming-task(?: (?:'[^']*'|\"[^\"]*\"|[^\s;)'\"]+))+")


def hints(text: str) -> list[str]:
    """Every command suggested in `text`."""
    return HINT.findall(text)


def paste(
    workspace: Workspace, hint: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a suggested command as a person pasting it into bash would (in the workspace)."""
    base = dict(env if env is not None else workspace.env)
    base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
    return subprocess.run(
        ["bash", "-c", hint],
        cwd=workspace.root,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def first_line(stream: IO[str], timeout: float = 20) -> str:
    """The next line of a background process's pipe (bounded by `timeout`)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        pytest.fail(f"no line within {timeout}s")
    return stream.readline()
