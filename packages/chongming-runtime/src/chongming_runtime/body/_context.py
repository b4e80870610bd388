"""`RuntimeContext`: the ``ctx`` a task body receives as its first argument (guide §2, §8.13).

One context per attempt, with a fresh control token: a stop or a pause can only
reach the execution it was meant for. The public name is `TaskContext`; it is
the same class.

The hot path is ``checkpoint()`` with nothing requested: one attribute read of
the control flag, one clock read, one attribute write (the heartbeat).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chongming_core import ConfigurationError, Progress, TaskCancelled, storable_text
from chongming_core.backend import number_problem
from chongming_runtime.body._artifacts import artifact_folder
from chongming_runtime.body._control import ControlView

__all__ = ["LOG_LINES_KEPT", "RuntimeContext", "task_logger", "task_logger_name"]

#: How many log lines ``ctx.logs`` keeps (per task, across attempts).
LOG_LINES_KEPT = 200

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def task_logger_name(task_id: str) -> str:
    """The stdlib logger name of a task: ``chongming_task.task.<task_id>``."""
    return f"chongming_task.task.{task_id}"


def task_logger(task_id: str) -> logging.Logger:
    """The logger of a task, ``chongming_task.task.<task_id>``.

    When the application configured that exact logger, it is used. Otherwise a
    logger of that name is made as a child of ``chongming_task.task`` without
    being registered: the logging module keeps registered loggers forever, and a
    long-running service runs an unbounded number of task ids. Records still
    propagate to ``chongming_task.task`` and its ancestors, so levels and handlers
    set there apply.
    """
    name = task_logger_name(task_id)
    existing = logging.Logger.manager.loggerDict.get(name)
    if isinstance(existing, logging.Logger):
        return existing
    logger = logging.Logger(name)
    logger.parent = logging.getLogger("chongming_task.task")
    return logger


class _Heartbeat:
    """``ctx.heartbeat``: refresh the heartbeat without the stop/pause check."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: RuntimeContext) -> None:
        self._ctx = ctx

    def beat(self) -> None:
        """Tell the supervisor the task is still making progress."""
        ctx = self._ctx
        ctx.last_beat = ctx._monotonic()


class RuntimeContext:
    """The execution context of one attempt, injected by the executor.

    Example::

        def body(ctx, rows):
            for index, row in enumerate(rows, start=1):
                ctx.checkpoint()  # stop, pause and heartbeat in one call
                handle(row)
                ctx.progress(index, total=len(rows), unit="rows")
    """

    __slots__ = (
        "_artifact_dir",
        "_artifact_root",
        "_control",
        "_log_buffer",
        "_log_sink",
        "_logger",
        "_logs",
        "_monotonic",
        "_progress_sink",
        "_upstream",
        "attempt",
        "last_beat",
        "task_id",
        "task_name",
    )

    def __init__(
        self,
        *,
        task_id: str,
        task_name: str,
        attempt: int,
        control: ControlView,
        monotonic: Callable[[], float],
        progress_sink: Callable[[Progress], None] | None = None,
        log_sink: Callable[[int, str], None] | None = None,
        logs: deque[str] | None = None,
        log_buffer: Callable[[], deque[str]] | None = None,
        artifact_root: Path | None = None,
        upstream: Mapping[str, Any] | None = None,
    ) -> None:
        self.task_id = task_id
        self.task_name = task_name
        self.attempt = attempt
        self._control = control
        self._monotonic = monotonic
        #: The monotonic time of the latest checkpoint/beat (read by the idle timer).
        self.last_beat = monotonic()
        self._progress_sink = progress_sink
        self._log_sink = log_sink
        # the line buffer is made on the first line (most tasks never log): `log_buffer`
        # hands over the run's buffer, shared by all its attempts
        self._logs: deque[str] | None = logs
        self._log_buffer = log_buffer
        self._logger: logging.Logger | None = None
        self._artifact_root = artifact_root
        self._artifact_dir: Path | None = None
        self._upstream: Mapping[str, Any] = (
            _EMPTY if upstream is None else MappingProxyType(dict(upstream))
        )

    # ---------------------------------------------------------------- cooperation
    def checkpoint(self) -> None:
        """Cooperate: raise `TaskCancelled` after a stop, wait here while paused, beat.

        Raises:
            TaskCancelled: a stop was requested (by an operator or a timeout).
        """
        if self._control.requested:
            self._slow_checkpoint()
        self.last_beat = self._monotonic()

    async def acheckpoint(self) -> None:
        """`checkpoint()` for ``async def`` bodies; it also yields to the event loop.

        A pause blocks this attempt's own event loop, which is what a pause means:
        every coroutine of the task is suspended until resume or stop.
        """
        self.checkpoint()
        await asyncio.sleep(0)

    def _slow_checkpoint(self) -> None:
        control = self._control
        if control.stop_requested:
            raise TaskCancelled(control.stop_reason, task_id=self.task_id)
        if control.pause_requested:
            control.wait_while_paused()
            if control.stop_requested:
                raise TaskCancelled(control.stop_reason, task_id=self.task_id)

    @property
    def is_stop_requested(self) -> bool:
        """Whether a stop was requested; never blocks, never raises (use it in cleanup code)."""
        return self._control.stop_requested

    @property
    def is_pause_requested(self) -> bool:
        """Whether a pause is pending; never blocks, never raises."""
        return self._control.pause_requested

    @property
    def heartbeat(self) -> _Heartbeat:
        """The heartbeat handle: ``ctx.heartbeat.beat()`` before a long stretch without
        checkpoints. (Made on each access: one kept here would make a reference cycle with
        this context.)"""
        return _Heartbeat(self)

    # ---------------------------------------------------------------- side path
    def progress(
        self,
        done: float,
        *,
        total: float | None = None,
        unit: str | None = None,
        message: str | None = None,
    ) -> None:
        """Report progress. Side path: never bumps ``status_version``, never beats.

        Raises:
            ConfigurationError: `done` or `total` is not a finite number that fits a float
                (a bool, NaN, an infinity, a huge int), or `unit` or `message` is not a str
                or None: no store could keep it, and the report is refused here, at the
                call, instead of failing every later write (D70).
        """
        done = _progress_number("done", done)
        if total is not None:
            total = _progress_number("total", total)
        if self._progress_sink is not None:
            # informational text: kept, with what no store can keep written as escapes
            unit = _progress_text("unit", unit)
            message = _progress_text("message", message)
            self._progress_sink(Progress(done=done, total=total, unit=unit, message=message))

    def log(self, message: str, *, level: int = logging.INFO) -> None:
        """Log through ``chongming_task.task.<task_id>`` with task_id, task_name and attempt
        as ``extra``; the line is also kept in ``ctx.logs``.

        Raises:
            ConfigurationError: `level` is not an int (``logging.WARNING``, or 30), checked
                here on every executor, before anything is kept.
        """
        if isinstance(level, bool) or not isinstance(level, int):
            raise ConfigurationError(
                f"log level must be an int such as logging.WARNING (30), got {level!r}; "
                "or use ctx.warning(...) and ctx.error(...)"
            )
        text = str(message)
        if self._log_sink is not None:  # a child process forwards the line to its parent
            self._lines().append(f"{logging.getLevelName(level)} {text}")
            self._log_sink(level, text)
            return
        self.emit_log(level, text)

    def emit_log(self, level: int, text: str) -> None:
        """Write one line to the task's logger and to ``logs`` (used for forwarded lines too)."""
        self._lines().append(f"{logging.getLevelName(level)} {text}")
        if self._logger is None:
            self._logger = task_logger(self.task_id)
        self._logger.log(
            level,
            text,
            extra={"task_id": self.task_id, "task_name": self.task_name, "attempt": self.attempt},
        )

    def warning(self, message: str) -> None:
        """Log at WARNING."""
        self.log(message, level=logging.WARNING)

    def error(self, message: str) -> None:
        """Log at ERROR."""
        self.log(message, level=logging.ERROR)

    @property
    def logs(self) -> tuple[str, ...]:
        """The latest log lines of this task (at most 200, in memory only)."""
        return tuple(self._lines())

    def _lines(self) -> deque[str]:
        logs = self._logs
        if logs is None:
            buffer = self._log_buffer
            logs = self._logs = deque(maxlen=LOG_LINES_KEPT) if buffer is None else buffer()
        return logs

    # ---------------------------------------------------------------- data
    @property
    def artifact_dir(self) -> Path:
        """``<artifact_dir>/<task_id>/attempt-<n>``, created owner-only on first use.

        The task id is the folder's name when it is a plain lower-case name; any other
        id gets a readable prefix and a hash of the id (``x_y~<16 hex>`` for ``x/y``), so
        distinct ids never share a folder (see `chongming_runtime.body._artifacts`).

        Raises:
            ConfigurationError: no ``artifact_dir=`` was given to `TaskRun` / `run_task` /
                `Controller`.
        """
        if self._artifact_dir is None:
            if self._artifact_root is None:
                raise ConfigurationError(
                    f"task {self.task_id!r} has no artifact folder; pass artifact_dir=<folder> "
                    "to TaskRun(...), run_task(...) or Controller(...) to give each attempt "
                    "its own folder"
                )
            self._artifact_dir = artifact_folder(self._artifact_root, self.task_id, self.attempt)
        return self._artifact_dir

    @property
    def upstream(self) -> Mapping[str, Any]:
        """Return values of the succeeded upstream nodes by node id (empty for a single task)."""
        return self._upstream

    def input(self, node_id: str, default: Any = None) -> Any:
        """The return value of upstream node `node_id`, or `default` when it has none."""
        return self._upstream.get(node_id, default)

    def __repr__(self) -> str:
        return f"<TaskContext task_id={self.task_id!r} attempt={self.attempt}>"


def _progress_number(label: str, value: Any) -> Any:
    """`value` as every reader sees it (an int or a float, not a subclass), or refused."""
    kind = type(value)
    if (kind is float and math.isfinite(value)) or (
        kind is int and -_FLOAT_INTS < value < _FLOAT_INTS
    ):
        return value  # the common case, checked cheaply
    problem = number_problem(value)
    if problem is not None:
        raise ConfigurationError(f"progress {label} {problem}")
    return int(value) if isinstance(value, int) else float(value)


def _progress_text(label: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(
            f"progress {label} must be a str or None, got a {type(value).__qualname__}"
        )
    return storable_text(value if type(value) is str else str.__str__(value))


#: ints below this magnitude fit a float; larger ones are checked the slow way
_FLOAT_INTS = 2**1023
