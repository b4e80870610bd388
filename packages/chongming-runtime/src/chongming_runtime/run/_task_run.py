"""`TaskRun`: the supervised execution of one task (guide §3.2, §4, §5, §6).

Every state-machine call of a run happens under the run's one lock, so
`StateMachine` stays the only writer of the status even though operators,
timers and the task's own thread all act on it. No thread ever sleeps on behalf
of a waiting task: every deadline (start/attempt/idle timeouts, backoff,
graceful-stop and pause windows) is a timer on the injected `Clock`.

Lifecycle decisions live in `Supervision` (``_supervision.py``, with its deadlines
in ``_deadlines.py`` and pause/resume in ``_pausing.py``); this module holds the
public surface and the attempt bookkeeping.

A run that waits (queued, blocked, retry_wait) costs memory only, and little of
it: the class has ``__slots__``, and the condition, the events and the log
buffer are made when first needed (the first attempt, the first ``wait()``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from chongming_core import (
    SYSTEM_CLOCK,
    Clock,
    ConfigurationError,
    Progress,
    RetryPolicy,
    StateMachine,
    SystemClock,
    TaskSnapshot,
    TaskStatus,
    Timeout,
    Transition,
    get_task_spec,
    validate_tags,
)
from chongming_core.backend import portable_json
from chongming_runtime.body._context import LOG_LINES_KEPT, RuntimeContext
from chongming_runtime.body._control import AttemptControl
from chongming_runtime.executors._attempt import Attempt
from chongming_runtime.executors._base import Executor
from chongming_runtime.executors.thread import ThreadExecutor
from chongming_runtime.run._listeners import RunEvent, RunListener
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._pausing import pause_window
from chongming_runtime.run._supervision import Supervision
from chongming_runtime.support._ids import random_hex12
from chongming_runtime.support._thread_cache import hand_over, run_elsewhere

__all__ = ["TaskRun"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.runtime")

#: Shared defaults (immutable in practice: nothing ever writes to them).
_NO_KWARGS: Mapping[str, Any] = {}
_ONE_ATTEMPT = RetryPolicy(max_attempts=1)
_NO_TIMEOUT = Timeout()


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0:
        raise ConfigurationError(f"{name} must be >= 0 seconds, got {value!r}")
    return float(value)


class TaskRun(Supervision):
    """Run one task under supervision: start, wait, stop, pause, resume; thread-safe.

    Example::

        run = TaskRun(extract, ("s3://bucket/x",), task_id="job-1", name="extract")
        run.start()            # returns at once (ThreadExecutor)
        run.pause()            # True once the body is suspended at a checkpoint
        run.resume()
        run.stop(reason="release window")
        outcome = run.wait(timeout=60)

    Per-call `retry`, `timeout`, `tags` and `name` override the ``@task`` spec of `fn`
    (R12). A `Controller` may hand in a pre-created `machine` (or a `snapshot` plus
    its `transitions`), an `actor`, `listeners`, and an `admission` callback that
    gates every attempt: it is called when the run is ready to start one, and the
    controller then calls `dispatch()`; its store's `stored_outcome`, which turns a
    returned value into the outcome every reader of that store gets (D68); and a
    `launch_gate`, called as ``launch_gate(task_id, version, launch)`` instead of
    launching an attempt, which calls ``launch()`` once the store holds the task at
    that version (D105).

    Args:
        fn: the body; called as ``fn(ctx, *args, **kwargs)``.
        args: positional arguments (a tuple; ``ctx`` is injected, do not pass it).
        kwargs: keyword arguments.
        graceful_stop: seconds a body gets to unwind after a stop request or a timeout.
        pause_timeout: the default window of ``pause()`` to reach a checkpoint.
        clock: the clock for every deadline (`FakeClock` in tests).
        artifact_dir: root of the per-attempt folders ``<root>/<task_id>/attempt-<n>``.
        upstream: return values of upstream nodes (pipelines), read by ``ctx.input()``.
        stored_outcome: how the store will keep a returned value: the value every reader
            gets back, or ValueError saying why it cannot (a store's
            `TaskStore.stored_outcome`; by default the rules every store shares).
    """

    __slots__ = (
        "__weakref__",
        "_actor",
        "_admission",
        "_args",
        "_artifact_root",
        "_clock",
        "_delivering",
        "_done",
        "_executor",
        "_final",
        "_finish_holds",
        "_finished",
        "_fn",
        "_graceful",
        "_kwargs",
        "_launch_gate",
        "_listeners",
        "_lock",
        "_logs",
        "_machine",
        "_monotonic",
        "_outbox",
        "_pause_window",
        "_policy",
        "_settled",
        "_stored_outcome",
        "_task_id",
        "_timeout",
        "_upstream",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        task_id: str | None = None,
        name: str | None = None,
        label: str | None = None,
        description: str | None = None,
        tags: Iterable[str] | None = None,
        executor: Executor | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        graceful_stop: float = 5.0,
        pause_timeout: float = 5.0,
        clock: Clock | None = None,
        artifact_dir: str | Path | None = None,
        upstream: Mapping[str, Any] | None = None,
        priority: int = 0,
        bucket: int | None = None,
        bucket_key: str | None = None,
        pipeline_id: str | None = None,
        node_id: str | None = None,
        actor: str | None = None,
        machine: StateMachine | None = None,
        snapshot: TaskSnapshot | None = None,
        transitions: Iterable[Transition] = (),
        listeners: Iterable[RunListener] = (),
        admission: Callable[[TaskRun], None] | None = None,
        stored_outcome: Callable[[Any], Any] | None = None,
        launch_gate: Callable[[str, int, Callable[[], None]], None] | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(f"TaskRun needs a callable task body, got {fn!r}")
        if not isinstance(args, tuple | list):
            raise ConfigurationError(
                f"args must be a tuple of positional arguments, got {args!r}; "
                "write args=('value',) (note the trailing comma)"
            )
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ConfigurationError(f"kwargs must be a mapping, got {kwargs!r}")
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
        self._fn = fn
        self._args = args if type(args) is tuple else tuple(args)
        self._kwargs: Mapping[str, Any] = dict(kwargs) if kwargs else _NO_KWARGS
        executor.validate(fn, self._args, self._kwargs)
        self._executor = executor
        self._policy = retry if retry is not None else _ONE_ATTEMPT
        self._timeout = timeout if timeout is not None else _NO_TIMEOUT
        self._graceful = _seconds("graceful_stop", graceful_stop)
        self._pause_window = pause_window(pause_timeout, "pause_timeout")
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._monotonic: Callable[[], float] = (
            time.monotonic if type(self._clock) is SystemClock else self._clock.monotonic
        )
        self._artifact_root = None if artifact_dir is None else Path(artifact_dir)
        self._upstream: Mapping[str, Any] | None = dict(upstream) if upstream else None
        self._stored_outcome = stored_outcome if stored_outcome is not None else portable_json
        self._actor = actor or "system"

        if machine is None and snapshot is not None:
            machine = StateMachine(snapshot, transitions, clock=self._clock)
        if machine is None:
            tag_set = validate_tags(tags) if tags is not None else None
            if tag_set is None:
                tag_set = spec.tags if spec is not None else frozenset()
            machine = StateMachine.create(
                task_id if task_id is not None else f"task-{random_hex12()}",
                name or (spec.name if spec is not None else _callable_name(fn)),
                max_attempts=self._policy.max_attempts,
                label=label,
                description=description or (spec.description if spec is not None else None),
                tags=tag_set,
                priority=priority,
                bucket=bucket,
                bucket_key=bucket_key,
                pipeline_id=pipeline_id,
                node_id=node_id,
                clock=self._clock,
            )
        self._machine = machine
        self._task_id = machine.task_id

        self._lock = threading.Lock()
        self._listeners: tuple[RunListener, ...] = tuple(listeners)
        self._admission = admission
        self._launch_gate = launch_gate
        self._outbox: list[RunEvent] | None = None  # events not yet told to the listeners
        self._delivering = False
        # made when first needed: a queued run holds no event, condition or log buffer
        self._done = machine.status.is_terminal
        self._finished: threading.Event | None = None
        self._wakeup: threading.Event | None = None
        self._logs: deque[str] | None = None
        self._final: TaskSnapshot | None = None  # the composed terminal snapshot, once told
        self._settled: TaskSnapshot | None = None  # told to every listener, maybe held
        self._finish_holds = 0  # listeners that asked `wait()` to wait for them
        self._init_supervision()

    # ================================================================ public surface
    @property
    def task_id(self) -> str:
        """The task's id."""
        return self._task_id

    @property
    def name(self) -> str:
        """The task's registered name."""
        return self._machine.snapshot.name

    @property
    def executor(self) -> Executor:
        """The executor that carries the attempts."""
        return self._executor

    @property
    def clock(self) -> Clock:
        """The clock of every deadline of this run."""
        return self._clock

    @property
    def status(self) -> TaskStatus:
        """The current status (read under the run's lock, so its timers are already armed)."""
        with self._lock:
            return self._machine.status

    @property
    def snapshot(self) -> TaskSnapshot:
        """The current snapshot, side-path fields (progress, heartbeat, pid) included."""
        final = self._final
        if final is not None:  # terminal: nothing changes any more
            return final
        with self._lock:
            return self._compose()

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """The whole trajectory, oldest first."""
        with self._lock:
            return self._machine.transitions

    @property
    def logs(self) -> tuple[str, ...]:
        """The latest log lines of the task (at most 200)."""
        logs = self._logs
        return () if logs is None else tuple(logs)

    @property
    def done(self) -> bool:
        """True once the task is terminal and every listener has been told."""
        return self._done

    def add_listener(self, listener: RunListener) -> None:
        """Observe every later transition and side update (see `RunListener`)."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def wait(self, timeout: float | None = None) -> TaskOutcome:
        """Block until the task is terminal and return its outcome.

        `timeout` is real seconds the caller is willing to block (it is not a task
        deadline, so it is not measured on the run's clock).

        Raises:
            TimeoutError: still not terminal after `timeout`; the task is left untouched.
        """
        if timeout is not None:
            timeout = _seconds("wait timeout", timeout)
        if not self._done:
            with self._lock:
                finished = self._finished
                if finished is None and not self._done:
                    finished = self._finished = threading.Event()
            if finished is not None and not finished.wait(timeout):
                status = self.status
                hint = (
                    "its stop was requested; the body has not unwound yet"
                    if status is _S.STOPPING
                    else "call stop() to stop it"
                )
                raise TimeoutError(
                    f"task {self._task_id!r} is still {status.value} after waiting "
                    f"{timeout:g}s; wait() changed nothing ({hint})"
                )
        return self.outcome()

    def outcome(self) -> TaskOutcome:
        """The outcome now (meaningful once terminal; see `wait`)."""
        return TaskOutcome.from_snapshot(self.snapshot)

    def _recipe(self) -> tuple[tuple[Any, ...], Mapping[str, Any], dict[str, Any]]:
        """Arguments and options to run the same body again (`Controller.retry`)."""
        snap = self._machine.snapshot
        options = {
            "executor": self._executor,
            "retry": self._policy,
            "timeout": None if self._timeout is _NO_TIMEOUT else self._timeout,
            "tags": snap.tags,
            "priority": snap.priority,
            "bucket": snap.bucket,
        }
        return self._args, self._kwargs, options

    def _scheduling_snapshot(self) -> TaskSnapshot:
        """The machine's snapshot without the lock, for fields fixed at creation (priority,
        tags, bucket): a reference read is atomic, and those fields never change."""
        return self._machine.snapshot

    # ================================================================ composition
    def _compose(self) -> TaskSnapshot:
        """The machine's snapshot plus the side-path fields. Call under the lock."""
        snap = self._machine.snapshot
        changes: dict[str, Any] = {}
        if self._progress is not None:
            changes["progress"] = self._progress
        attempt = self._attempt
        if attempt is not None and attempt.started and attempt.number == snap.attempt:
            beat = attempt.context.last_beat
            if beat != attempt.beat_shown or snap.last_heartbeat_at is None:
                age = max(0.0, self._monotonic() - beat)
                changes["last_heartbeat_at"] = self._clock.now() - timedelta(seconds=age)
            if snap.pid is None and attempt.pid is not None:
                changes["pid"] = attempt.pid
        return snap.evolve(**changes) if changes else snap

    def _record(self, transition: Transition) -> None:
        """Queue `transition` for the listeners. Call under the lock."""
        if transition.to_status.is_terminal:
            self._queue_event(RunEvent(self._compose(), transition))
            self._on_terminal()
            if self._wakeup is not None:
                self._wakeup.set()
            return
        snapshot = self._compose() if self._listeners else self._machine.snapshot
        self._queue_event(RunEvent(snapshot, transition))

    def _queue_event(self, event: RunEvent) -> None:
        """Queue `event` for `_deliver`. Call under the lock."""
        if self._outbox is None:
            self._outbox = [event]
        else:
            self._outbox.append(event)

    def _hold_finish(self) -> Callable[[], None]:
        """For a listener of the terminal transition: ``wait()`` and ``done`` wait until the
        returned callable is called (a store writer calls it once the write is durable)."""
        with self._lock:
            self._finish_holds += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._finish_holds -= 1
                settled = self._settled if self._finish_holds == 0 else None
            if settled is not None:
                self._finish(settled)

        return release

    def _settle_told(self, snapshot: TaskSnapshot) -> None:
        """Every listener has seen the terminal transition; finish unless one holds it."""
        with self._lock:
            self._settled = snapshot
            held = self._finish_holds > 0
        if not held:
            self._finish(snapshot)

    def _finish(self, snapshot: TaskSnapshot) -> None:
        """Release the waiters (once)."""
        with self._lock:
            if self._done:
                return
            self._final = snapshot
            self._done = True
            # a finished run keeps its trajectory, not the machinery of its last attempt
            # (context, control, closures): fewer live objects for the garbage collector
            self._attempt = None
            finished = self._finished
        if finished is not None:
            finished.set()

    def _deliver(self) -> None:
        """Tell the listeners about queued events, in order, outside the lock (never hold it).

        A listener raising a BaseException (SystemExit, KeyboardInterrupt) never leaves the
        run half told: on the main thread (Ctrl-C) the batch under way is finished (a
        terminal event in it still ends the run and tells its waiters), the events queued
        meanwhile are told by another thread, and the exception is raised at once; on any
        other thread it can only end that thread, so it is logged and the telling goes on.
        """
        interrupted: BaseException | None = None
        while interrupted is None:
            with self._lock:
                if self._delivering or not self._outbox:
                    break
                self._delivering = True
                batch, self._outbox = self._outbox, None
                listeners = self._listeners
            terminal: TaskSnapshot | None = None
            try:
                for event in batch:
                    for listener in listeners:
                        if not getattr(listener, "reports_quickly", False):
                            hand_over()  # it may block: an attempt kept here must not wait
                        try:
                            if event.transition is None:
                                listener.on_side_update(self, event.snapshot)
                            else:
                                listener.on_transition(self, event.transition, event.snapshot)
                        except Exception:
                            _log.exception("listener %r failed on task %r", listener, self._task_id)
                        except BaseException as exc:
                            if threading.current_thread() is not threading.main_thread():
                                _log.exception(
                                    "listener %r raised %s on task %r; the run goes on",
                                    listener,
                                    type(exc).__name__,
                                    self._task_id,
                                )
                            elif interrupted is None:
                                interrupted = exc
                    if event.transition is not None and event.transition.to_status.is_terminal:
                        terminal = event.snapshot
            finally:
                with self._lock:
                    self._delivering = False
                if terminal is not None:
                    self._settle_told(terminal)
        if interrupted is not None:
            if self._outbox:  # queued by threads that left it to this one: never stranded
                try:
                    run_elsewhere(self._deliver, f"chongming-deliver-{self._task_id}")
                except Exception:  # no thread to be had: tell them here first
                    self._deliver()
            raise interrupted

    # ================================================================ attempts
    def _new_attempt(self) -> Attempt:
        """Build the next attempt (fresh control token and context). Call under the lock."""
        number = self._machine.snapshot.attempt
        control = AttemptControl()
        context = RuntimeContext(
            task_id=self._task_id,
            task_name=self._machine.snapshot.name,
            attempt=number,
            control=control,
            monotonic=self._monotonic,
            progress_sink=lambda progress: self._on_progress(number, progress),
            logs=self._logs,
            log_buffer=self._log_buffer,
            artifact_root=self._artifact_root,
            upstream=self._upstream,
        )
        attempt = Attempt(
            self,
            number=number,
            fn=self._fn,
            args=self._args,
            kwargs=self._kwargs,
            context=context,
            control=control,
        )
        control.bind(hold=lambda: self._hold_at_checkpoint(attempt))
        return attempt

    def _log_buffer(self) -> deque[str]:
        """The run's log lines, made on the first line of any attempt."""
        with self._lock:
            logs = self._logs
            if logs is None:
                logs = self._logs = deque(maxlen=LOG_LINES_KEPT)
            return logs

    def _on_progress(self, number: int, progress: Progress) -> None:
        with self._lock:
            attempt = self._attempt
            if attempt is None or attempt.number != number or attempt.closed:
                return
            self._progress = progress
            if self._listeners:
                self._queue_event(RunEvent(self._compose()))
        self._deliver()

    def __repr__(self) -> str:
        return f"<TaskRun {self._task_id!r} {self.status.value}>"


def _callable_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None)
    if isinstance(name, str) and name and name != "<lambda>":
        return name
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None:
        return _callable_name(inner)
    return "task"
