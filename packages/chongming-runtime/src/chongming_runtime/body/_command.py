"""`run_command`: run an external command from a task body, cooperatively (guide §5.2).

The command's exit code becomes the attempt's failure kind ``nonzero_exit``: a
non-zero exit raises `CommandFailed`, which the runtime records with that kind
(retryable by default, like any transient failure). While the command runs,
the body keeps calling ``ctx.checkpoint()``, so a stop terminates the command
and a pause holds the body (the command itself keeps running, so a command that
writes a lot of output simply blocks on its full pipe until resume).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chongming_core import ConfigurationError, TaskExecutionError

__all__ = ["CommandFailed", "run_command"]

_TAIL = 2000


def _tail(text: str | None) -> str:
    if not text:
        return ""
    return text if len(text) <= _TAIL else "..." + text[-_TAIL:]


class CommandFailed(TaskExecutionError):
    """An external command exited non-zero (recorded as failure kind ``nonzero_exit``).

    Attributes:
        argv: the command.
        returncode: its exit code (negative: killed by that signal).
        stdout: its captured standard output (None unless captured).
        stderr: its captured standard error (None unless captured).
    """

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int,
        *,
        stdout: str | None = None,
        stderr: str | None = None,
        task_id: str | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        how = (
            f"was killed by signal {-returncode}"
            if returncode < 0
            else f"exited with code {returncode}"
        )
        message = f"command {list(self.argv)!r} {how}"
        tail = _tail(stderr).strip()
        if tail:
            message = f"{message}; stderr: {tail}"
        super().__init__(message, task_id=task_id)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_command_failed,
            (self.argv, self.returncode, self.stdout, self.stderr, self.task_id),
        )


def _rebuild_command_failed(
    argv: Sequence[str],
    returncode: int,
    stdout: str | None,
    stderr: str | None,
    task_id: str | None,
) -> CommandFailed:
    return CommandFailed(argv, returncode, stdout=stdout, stderr=stderr, task_id=task_id)


def run_command(
    ctx: Any,
    argv: Sequence[str | os.PathLike[str]],
    *,
    check: bool = True,
    poll: float = 0.05,
    capture: bool = True,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    terminate_grace: float = 2.0,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` and wait for it, calling ``ctx.checkpoint()`` every `poll` seconds.

    A stop (or a timeout's stop) terminates the command, then kills it after
    `terminate_grace` seconds, and re-raises the `TaskCancelled`.

    Args:
        ctx: the task's context.
        argv: the command and its arguments (no shell).
        check: raise `CommandFailed` on a non-zero exit.
        poll: seconds between checkpoints while the command runs.
        capture: capture stdout/stderr as text (else they are inherited).

    Raises:
        CommandFailed: the command exited non-zero and `check` is true.
        TaskCancelled: a stop was requested while the command ran.
    """
    if isinstance(argv, str | bytes) or not argv:
        raise ConfigurationError(
            f"argv must be a non-empty list of arguments, got {argv!r}; write e.g. "
            "run_command(ctx, ['gzip', '-k', path]) (no shell is involved)"
        )
    if isinstance(poll, bool) or not isinstance(poll, int | float) or poll <= 0:
        raise ConfigurationError(f"poll must be > 0 seconds, got {poll!r}")
    args = [os.fspath(a) for a in argv]
    pipe = subprocess.PIPE if capture else None
    process = subprocess.Popen(
        args,
        stdout=pipe,
        stderr=pipe,
        text=True,
        cwd=cwd,
        env=None if env is None else dict(env),
    )
    try:
        while True:
            ctx.checkpoint()
            try:
                stdout, stderr = process.communicate(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                continue
    except BaseException:
        process.terminate()
        try:
            process.communicate(timeout=terminate_grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        raise
    completed = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    if check and process.returncode != 0:
        raise CommandFailed(
            args,
            process.returncode,
            stdout=stdout,
            stderr=stderr,
            task_id=getattr(ctx, "task_id", None),
        )
    return completed
