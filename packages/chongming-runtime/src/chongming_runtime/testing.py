"""Helpers for testing code that runs tasks: bounded waits, gates, looping bodies, closing.

Every wait here has a timeout and fails with an `AssertionError` naming what it waited
for, so a test that goes wrong fails instead of hanging. Example::

    closer = Closer()
    try:
        controller = closer.controller()
        gate = Gate()
        controller.register("held", gate.body)
        run = controller.submit("held")
        gate.wait_started()
        controller.stop(run.task_id)
        wait_until(lambda: run.status.is_terminal, "the task to end")
    finally:
        gate.release()
        closer.close()  # fails if a close hangs longer than its timeout
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from chongming_core import TaskStore
from chongming_runtime.controller._controller import Controller
from chongming_runtime.persistence._writer import StoreWriter

__all__ = ["Closer", "Gate", "checkpoint_until", "spin", "wait_until"]

#: how long a wait, or a close, may take before the test fails (seconds)
DEFAULT_TIMEOUT = 10.0


def wait_until(
    predicate: Callable[[], object],
    what: str = "the condition",
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.002,
) -> None:
    """Poll `predicate` every `interval` seconds until it holds.

    Raises:
        AssertionError: naming `what`, when it did not hold within `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    tick = threading.Event()  # never set: a sleep that does not depend on time.sleep patches
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        tick.wait(interval)


def checkpoint_until(ctx: Any, event: threading.Event, *, interval: float = 0.005) -> None:
    """A task body's wait: reach a checkpoint every `interval` seconds until `event` is set.

    A stop or pause reaches the body at its next checkpoint, as it would a real one.
    """
    while not event.is_set():
        ctx.checkpoint()
        event.wait(interval)


def spin(ctx: Any) -> None:
    """A task body that loops at checkpoints until it is stopped (it never returns)."""
    tick = threading.Event()
    while True:
        ctx.checkpoint()
        tick.wait(0.002)


class Gate:
    """Holds task bodies at a checkpoint loop until the test releases them.

    Register `body` as a task; `wait_started` returns once that many bodies are inside,
    `release` (or ``open.set()``) lets every held body, and every later one, return.

    Args:
        timeout: how long `wait_started` waits for each body.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.open = threading.Event()
        self.started: list[str] = []
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running = threading.Semaphore(0)

    def body(self, ctx: Any, name: str = "x") -> str:
        """A task body: note `name` as started, checkpoint until released, return `name`."""
        with self._lock:
            self.started.append(name)
        self._running.release()
        checkpoint_until(ctx, self.open)
        ctx.checkpoint()
        return name

    def wait_started(self, n: int = 1) -> None:
        """Wait until `n` more bodies entered the gate; AssertionError after the timeout."""
        for _ in range(n):
            assert self._running.acquire(timeout=self.timeout), (
                f"a task body did not start within {self.timeout:g}s"
            )

    def release(self) -> None:
        """Let every held body, and every later one, return."""
        self.open.set()


class _Closeable(Protocol):
    def close(self) -> object: ...


C = TypeVar("C", bound=_Closeable)


class Closer:
    """Makes controllers and writers for a test, and closes them all at its end.

    `close` closes what was made, the last first, each on a thread of its own: a close
    that takes longer than twice `timeout` fails the test instead of hanging it (a
    controller given `timeout` raises its own `TimeoutError` first). Use it in a
    fixture (teardown runs even when the test failed)::

        @pytest.fixture
        def closer():
            closer = Closer()
            yield closer
            closer.close()

    Args:
        timeout: how long each close may take (seconds); a controller is closed with it.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self._made: list[tuple[str, Callable[[], object]]] = []

    def controller(self, **kwargs: Any) -> Controller:
        """A `Controller` built with `kwargs`, closed (with `timeout`) by `close`."""
        controller = Controller(**kwargs)
        self._made.append((repr(controller), lambda: controller.close(timeout=self.timeout)))
        return controller

    def writer(self, store: TaskStore, **kwargs: Any) -> StoreWriter:
        """A `StoreWriter` on `store` built with `kwargs`, closed by `close`."""
        writer = StoreWriter(store, **kwargs)

        def close() -> None:
            # one the test closed itself (perhaps without a last flush) stays as it left it
            if not writer._is_closed():
                writer.close()

        self._made.append((repr(writer), close))
        return writer

    def add(self, closeable: C) -> C:
        """Close `closeable` (anything with a ``close()``) with the rest; returns it."""
        self._made.append((repr(closeable), closeable.close))
        return closeable

    def close(self) -> None:
        """Close everything made, the last first; the first error, or hang, is raised.

        Raises:
            AssertionError: a close did not return within twice `timeout` (it is left
                running on a daemon thread), or raised (chained).
        """
        made, self._made = self._made, []
        first: BaseException | None = None
        for name, close in reversed(made):
            error = _close_within(name, close, self.timeout)
            if error is not None and first is None:
                first = error
        if first is not None:
            raise first


def _close_within(name: str, close: Callable[[], object], timeout: float) -> BaseException | None:
    """Run `close` on a daemon thread; the error it raised, or one saying it hung."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            close()
        except BaseException as exc:  # of any kind: reported to the test, not lost
            raised.append(exc)

    thread = threading.Thread(target=run, name=f"closing {name}", daemon=True)
    thread.start()
    # a controller's own timeout comes first: the margin lets it raise its TimeoutError
    thread.join(2 * timeout)
    if thread.is_alive():
        return AssertionError(f"closing {name} did not finish within {2 * timeout:g}s")
    if raised:
        error = AssertionError(f"closing {name} raised {raised[0]!r}")
        error.__cause__ = raised[0]
        return error
    return None
