"""The child side of `ProcessExecutor`: runs one attempt in a spawned process.

Control flows parent -> child through shared memory (one word holding the stop
and pause flags and the pause generation, read by the child's ``checkpoint()``)
plus an event that wakes a paused child. Everything else flows child -> parent
through one pipe: the start (with the pid), heartbeats and progress (forwarded
every few milliseconds by a daemon thread), log lines, pause confirmations, and
finally the result.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import threading
from collections import deque
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

from chongming_core import Failure, FailureKind, Progress
from chongming_runtime.body._command import CommandFailed
from chongming_runtime.body._context import LOG_LINES_KEPT, RuntimeContext
from chongming_runtime.body._results import result_failure, result_problem
from chongming_runtime.executors._attempt import ResultKind, call_body
from chongming_runtime.executors._processes import descendants, qualified_name
from chongming_runtime.support._background import carry_on

__all__ = ["PAUSE", "STOP", "child_main", "control_word"]

STOP = 1
PAUSE = 2
_GENERATION_SHIFT = 2  # the pause generation sits above the two flag bits


def control_word(*, stop: bool, pause: bool, generation: int) -> int:
    """The one shared word the parent writes: flags and pause generation together, so the
    child never reads a generation that does not belong with the flags beside it."""
    return (generation << _GENERATION_SHIFT) | (STOP if stop else 0) | (PAUSE if pause else 0)


_log = logging.getLogger("chongming_task.runtime")


class _SharedInt(Protocol):
    value: int


class _WakeEvent(Protocol):
    def set(self) -> None: ...

    def clear(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class _Sender:
    """Serialises sends from the body thread and the forwarder thread."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            self._conn.send(message)


class _ChildControl:
    """The child's read-only view of the control word the parent writes."""

    def __init__(self, word: _SharedInt, wake: _WakeEvent, sender: _Sender) -> None:
        self._word = word
        self._wake = wake
        self._sender = sender
        self._before_pause: Callable[[], None] | None = None

    @property
    def requested(self) -> bool:
        return bool(self._word.value & (STOP | PAUSE))

    @property
    def stop_requested(self) -> bool:
        return bool(self._word.value & STOP)

    @property
    def pause_requested(self) -> bool:
        return bool(self._word.value & PAUSE)

    @property
    def stop_reason(self) -> str | None:
        return None

    def wait_while_paused(self) -> None:
        """Hold here while a pause is requested; confirm each pause generation seen meanwhile.

        A resume followed at once by another pause may find the body still here: the new
        generation is confirmed too (D60), from one read of the word, so a confirmation
        always names a pause that was requested while the body was held.
        """
        confirmed: int | None = None
        while True:
            self._wake.clear()
            word = self._word.value
            if word & STOP or not word & PAUSE:
                return
            generation = word >> _GENERATION_SHIFT
            if generation != confirmed:
                if self._before_pause is not None:
                    self._before_pause()  # progress and heartbeat reach the parent first
                self._sender.send(("paused", generation))
                confirmed = generation
            self._wake.wait(1.0)


class _Forwarder:
    """Forwards heartbeats and the latest progress to the parent every `interval` seconds."""

    def __init__(self, sender: _Sender, interval: float) -> None:
        self._sender = sender
        self._interval = interval
        self._ctx: RuntimeContext | None = None
        self._progress: Progress | None = None
        self._sent_progress: Progress | None = None
        self._sent_beat: float | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()

    def progress(self, progress: Progress) -> None:
        self._progress = progress

    def start(self, ctx: RuntimeContext) -> None:
        self._ctx = ctx
        self._sent_beat = ctx.last_beat
        threading.Thread(target=self._loop, name="chongming-forwarder", daemon=True).start()

    def _loop(self) -> None:
        while not self._done.wait(self._interval):
            try:
                self.flush()
            except BaseException as exc:  # a failed send must not end the beats (D65)
                if not isinstance(exc, OSError):
                    carry_on("the heartbeat forwarder", exc, _log, None)
                # a pipe that broke means the parent is gone: the parent watch ends this
                # child; until then there is nothing to log at every beat

    def flush(self) -> None:
        with self._lock:
            ctx = self._ctx
            if ctx is not None and ctx.last_beat != self._sent_beat:
                self._sent_beat = ctx.last_beat
                self._sender.send(("beat",))
            progress = self._progress
            if progress is not None and progress is not self._sent_progress:
                self._sent_progress = progress
                self._sender.send(("progress", progress.to_dict()))

    def close(self) -> None:
        self._done.set()
        self.flush()


def _leave_ctrl_c_to_the_parent() -> None:
    """Ignore SIGINT, which a terminal's Ctrl-C sends to the whole foreground process
    group: it is the parent's to handle (the console's grace, then a stop the body sees at
    a checkpoint; a script that dies of it takes the child with it, see
    `_end_with_the_parent`). Taken here, it raised KeyboardInterrupt in the body in the
    middle of its work, and the attempt failed before the parent could stop it. A body
    may install a handler of its own. (The child stays in the parent's process group: in
    a group of its own it could not ``setsid()``, and it would stop on SIGTTIN when it
    reads the terminal.)"""
    with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to do
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _end_with_the_parent() -> None:
    """End this child, and what its body started, when the supervising process dies: nothing
    may run on unsupervised (``reconcile()`` calls the task lost and a rerun could race it)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])  # returns when the supervising process is gone
        for pid, _ in descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="chongming-parent-watch", daemon=True).start()


def child_main(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    info: Mapping[str, Any],
    word: _SharedInt,
    wake: _WakeEvent,
    conn: Connection,
) -> None:
    """Entry point of the child process (module level, so ``spawn`` can import it)."""
    _leave_ctrl_c_to_the_parent()
    _end_with_the_parent()
    sender = _Sender(conn)
    control = _ChildControl(word, wake, sender)
    forwarder = _Forwarder(sender, float(info["forward_interval"]))
    root = info.get("artifact_root")
    ctx = RuntimeContext(
        task_id=str(info["task_id"]),
        task_name=str(info["task_name"]),
        attempt=int(info["attempt"]),
        control=control,
        monotonic=_monotonic(),
        progress_sink=forwarder.progress,
        log_sink=lambda level, text: sender.send(("log", level, text)),
        logs=deque(info.get("logs") or (), maxlen=LOG_LINES_KEPT),
        artifact_root=None if root is None else Path(root),
        upstream=info.get("upstream") or {},
    )
    control._before_pause = forwarder.flush
    sender.send(("started", os.getpid()))
    forwarder.start(ctx)
    if control.stop_requested:
        result_message: tuple[Any, ...] = ("cancelled",)
    else:
        result = call_body(fn, ctx, args, kwargs)
        result_message = _result_message(ctx.task_id, result.kind, result.value, result.exception)
    forwarder.close()
    try:
        sender.send(result_message)
    except Exception as exc:  # the value cannot be pickled to cross back to the parent
        if result_message[0] == "returned":
            value = result_message[1]
            failure = Failure.of(
                FailureKind.RESULT_INVALID,
                f"task {ctx.task_id!r} returned a {type(value).__qualname__} that cannot be "
                f"sent back from its process ({type(exc).__name__}: {exc}); return plain JSON "
                "data (dict, list, str, number, bool, None)",
                retryable=False,  # it would fail the same way
            )
        else:
            failure = Failure.of(FailureKind.EXCEPTION, f"could not report the result: {exc!r}")
        sender.send(("raised", failure.to_dict(), None, ()))
    conn.close()


def _monotonic() -> Callable[[], float]:
    import time  # noqa: PLC0415 - keep the module namespace small for spawn

    return time.monotonic


def _result_message(
    task_id: str, kind: ResultKind, value: Any, exc: BaseException | None
) -> tuple[Any, ...]:
    if kind is ResultKind.RETURNED:
        problem = result_problem(value)
        if problem is not None:
            return ("raised", result_failure(task_id, value, problem).to_dict(), None, ())
        return ("returned", value)
    if kind is ResultKind.CANCELLED:
        return ("cancelled",)
    assert exc is not None
    failure = Failure.from_exception(
        exc,
        kind=FailureKind.NONZERO_EXIT if isinstance(exc, CommandFailed) else FailureKind.EXCEPTION,
    )
    pickled: bytes | None
    try:
        pickled = pickle.dumps(exc)
        pickle.loads(pickled)
    except Exception:
        pickled = None
    # the classes of the exception by name: the parent's retry policy judges by them when the
    # exception itself cannot cross (its pickle does not round-trip)
    names = tuple(qualified_name(c) for c in type(exc).__mro__)
    return ("raised", failure.to_dict(), pickled, names)
