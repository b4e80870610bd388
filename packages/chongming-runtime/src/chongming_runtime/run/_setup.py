"""`RunSetup`: what every run made the same way shares, checked once.

A run's body, executor, retry policy, timeouts, stop and pause windows, clock, actor and
its controller's hooks are the same for every submission of a registered task with the
same options. A `Controller` makes one `RunSetup` per such combination and hands it to
each run, so a queued run holds one reference to it instead of a dozen fields of its own
and nothing is checked again per submission. A `TaskRun` made alone makes its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chongming_core import (
    SYSTEM_CLOCK,
    Clock,
    ConfigurationError,
    RetryPolicy,
    SystemClock,
    Timeout,
    get_task_spec,
)
from chongming_core.backend import portable_json
from chongming_runtime.executors._base import Executor
from chongming_runtime.executors.thread import ThreadExecutor

__all__ = ["NO_TIMEOUT", "ONE_ATTEMPT", "LaunchGate", "RunSetup", "pause_window", "seconds"]

#: ``launch_gate(task_id, version, launch)``: calls ``launch()`` once the store holds the
#: task at `version` (D105).
LaunchGate = Callable[[str, int, Callable[[], None]], None]

#: the defaults of a run without a retry policy or timeouts (shared, never written)
ONE_ATTEMPT = RetryPolicy(max_attempts=1)
NO_TIMEOUT = Timeout()


def seconds(name: str, value: Any) -> float:
    """`value` as seconds (a number >= 0), or ConfigurationError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0:
        raise ConfigurationError(f"{name} must be >= 0 seconds, got {value!r}")
    return float(value)


def wait_timeout(value: object, name: str = "wait timeout") -> float | None:
    """How long a caller may block: None (no limit) or seconds >= 0, checked as `seconds`.
    A timeout longer than the platform can wait for (``inf``) is no limit: waiting for it
    raised `OverflowError`."""
    if value is None:
        return None
    limit = seconds(name, value)
    return None if limit > threading.TIMEOUT_MAX else limit


def pause_window(value: object, name: str = "pause timeout") -> float:
    """A pause window checked: a finite number of seconds > 0.

    Raises:
        ConfigurationError: anything else (a window that never ends is no window: the
            caller would wait forever, and the clock cannot keep such a deadline).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(f"{name} must be > 0 seconds and finite, got {value!r}")
    return float(value)


class RunSetup:
    """The configuration runs share (see the module docstring); never changed once made.

    Build it with `RunSetup.make`, which checks every value and fills in the ``@task``
    spec of `fn` where `retry` or `timeout` is not given (R12).
    """

    __slots__ = (
        "actor",
        "admission",
        "artifact_root",
        "clock",
        "executor",
        "fn",
        "graceful",
        "launch_gate",
        "monotonic",
        "pause_window",
        "policy",
        "stored_outcome",
        "timeout",
    )

    fn: Callable[..., Any]
    executor: Executor
    policy: RetryPolicy
    timeout: Timeout
    graceful: float
    pause_window: float
    clock: Clock
    monotonic: Callable[[], float]
    artifact_root: Path | None
    stored_outcome: Callable[[Any], Any]
    actor: str
    #: called with the run when it is ready to start an attempt (a scheduler's admission)
    admission: Callable[[Any], None] | None
    launch_gate: LaunchGate | None

    @classmethod
    def make(
        cls,
        fn: Callable[..., Any],
        *,
        executor: Executor | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        graceful_stop: float = 5.0,
        pause_timeout: float = 5.0,
        clock: Clock | None = None,
        artifact_dir: str | Path | None = None,
        actor: str | None = None,
        admission: Callable[[Any], None] | None = None,
        stored_outcome: Callable[[Any], Any] | None = None,
        launch_gate: LaunchGate | None = None,
    ) -> RunSetup:
        """Check the values and build the setup (ConfigurationError names a bad one)."""
        if not callable(fn):
            raise ConfigurationError(f"TaskRun needs a callable task body, got {fn!r}")
        spec = get_task_spec(fn)
        if retry is None and spec is not None:
            retry = spec.retry
        if timeout is None and spec is not None:
            timeout = spec.timeout
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
        if timeout is not None and not isinstance(timeout, Timeout):
            raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")
        if executor is None:
            executor = ThreadExecutor()
        if not (callable(getattr(executor, "launch", None)) and hasattr(executor, "inline")):
            raise ConfigurationError(
                f"executor must be an executor such as ThreadExecutor(), InlineExecutor() or "
                f"ProcessExecutor(), got {executor!r}"
            )
        setup = cls()
        setup.fn = fn
        setup.executor = executor
        setup.policy = retry if retry is not None else ONE_ATTEMPT
        setup.timeout = timeout if timeout is not None else NO_TIMEOUT
        setup.graceful = seconds("graceful_stop", graceful_stop)
        setup.pause_window = pause_window(pause_timeout, "pause_timeout")
        setup.clock = clock if clock is not None else SYSTEM_CLOCK
        setup.monotonic = (
            time.monotonic if type(setup.clock) is SystemClock else setup.clock.monotonic
        )
        setup.artifact_root = None if artifact_dir is None else Path(artifact_dir)
        setup.stored_outcome = stored_outcome if stored_outcome is not None else portable_json
        setup.actor = actor or "system"
        setup.admission = admission
        setup.launch_gate = launch_gate
        return setup

    def __repr__(self) -> str:
        return f"<RunSetup {getattr(self.fn, '__name__', self.fn)!r} on {self.executor!r}>"
