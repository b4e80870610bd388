"""`TaskRun`: the supervised execution of one task (guide §3.2, §4, §5, §6).

Every state-machine call of a run happens under the run's one lock, so
`StateMachine` stays the only writer of the status even though operators,
timers and the task's own thread all act on it. No thread ever sleeps on behalf
of a waiting task: every deadline (start/attempt/idle timeouts, backoff,
graceful-stop and pause windows) is a timer on the injected `Clock`.

`TaskRun` supervises: it starts and dispatches attempts, takes the executor's
reports, enacts what `decide` (``_decision.py``) says an attempt's end means,
waits to retry, stops and cancels, and tells its listeners. It owns two
collaborators, each made when first needed: `RunDeadlines` (``_deadlines.py``:
start/attempt/idle timeouts and the graceful window) and `PauseControl`
(``_pausing.py``: pausing the body and resuming it). Each acts on the run
through a narrow protocol (`TimedRun`, `PausableRun`) rather than as a part of
it. The rules (rulings in brackets):

* Stop is request -> graceful window -> fallback. Not yet running (pending,
  queued, retry_wait, paused before start) -> ``stopped`` at once. Running ->
  ``stopping``; the body unwinds at a checkpoint -> ``stopped`` (kind
  ``cancelled``); it returns a value -> ``succeeded``; the window passes -> a
  thread is abandoned (``lost``) while a process is terminated, then killed
  (``stopped``) [R9]. A task paused in place goes ``paused -> running ->
  stopping`` because its body is still on the stack [R3].
* Queued/retry-waiting tasks pause at once and hold nothing (no admission, no
  backoff, no start clock); they resume to ``queued`` [R3].
* Retries: ``retry_wait`` with the backoff as a clock timer; ``TaskCancelled`` is
  never retried; a stop never retries.

A run that waits (queued, blocked, retry_wait) costs memory only, and little of
it: the class has ``__slots__``, and the deadlines, the pause control, the
events and the log buffer are made when first needed (a timeout or a stop, the
first pause of a body, the first ``wait()``, the first log line).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chongming_core import (
    ACTIVE_STATUSES,
    Clock,
    ConfigurationError,
    Failure,
    FailureKind,
    Progress,
    RetryPolicy,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    Timeout,
    TimerHandle,
    Transition,
    get_task_spec,
    validate_tags,
)
from chongming_runtime.body._context import LOG_LINES_KEPT, RuntimeContext
from chongming_runtime.body._control import AttemptControl
from chongming_runtime.body._results import keep_result
from chongming_runtime.executors._attempt import Attempt, AttemptHandle, AttemptResult
from chongming_runtime.executors._base import Executor
from chongming_runtime.run._deadlines import RunDeadlines
from chongming_runtime.run._decision import AttemptEnding, decide
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._pausing import PauseControl, PauseTicket
from chongming_runtime.run._setup import (
    NO_TIMEOUT,
    RunSetup,
    pause_window,
    wait_timeout,
)
from chongming_runtime.support._call_each import call_each
from chongming_runtime.support._ids import random_hex12
from chongming_runtime.support._text import check_reason
from chongming_runtime.support._thread_cache import hand_over, run_elsewhere

__all__ = ["RunEvent", "RunListener", "TaskRun"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.runtime")

#: Shared defaults (immutable in practice: nothing ever writes to them).
_NO_KWARGS: Mapping[str, Any] = {}

# Triggers the runtime adds on top of the state machine's defaults.
_STOP_TRIGGER = "control:stop"
_CANCEL_TRIGGER = "orchestrator:cancel"

_BEFORE_START = frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT})
#: where a pause applies at once and holds nothing [R3]
_WAITING_TO_START = frozenset({_S.QUEUED, _S.RETRY_WAIT})


@runtime_checkable
class RunListener(Protocol):
    """Observes one or more runs (a `Controller`, a store writer, a dashboard).

    Listeners are called **after** the change and **outside** the run's lock, in the
    order the changes happened, by one thread at a time. A listener may therefore
    call back into the run (``stop()``, ``snapshot``) without any risk of deadlock;
    a slow listener only delays the next notification. ``wait()`` returns only after
    every listener has seen the terminal transition ("durable before told").
    """

    def on_transition(self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot) -> None:
        """A status change (`snapshot` is the task right after it, side fields included).

        A listener whose class sets ``reads_snapshots = False`` (the controller, which
        has its store writer take a run's state when it flushes) is passed None for the
        snapshot of a non-terminal transition: the run builds none for it.
        """
        ...

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        """A side-path change (progress) that did not bump ``status_version``.

        Heartbeats are not pushed (they happen at every checkpoint): read
        ``run.snapshot.last_heartbeat_at`` when flushing, e.g. every ``touch_interval``.
        """
        ...


class MovePuller(Protocol):
    """A listener that needs no transition for a move to ``queued``, ``starting`` or
    ``running``, only to know the run moved: it reads the run's state itself (a store writer
    taking it when it flushes, `StoreWriter.record_run`). Its class sets
    ``pulls_moves = True``. While every listener of a run is one, such a move queues no event
    and builds no snapshot: each is told `on_moved` instead of `on_transition`, outside the
    lock, at least once after the move (several moves may be told by one call)."""

    def on_moved(self, run: TaskRun) -> None:
        """`run` moved to ``queued``, ``starting`` or ``running`` since it was last told."""
        ...


class RunEvent:
    """One queued notification: a transition, or a side update when `transition` is None.
    `snapshot` is None for a non-terminal transition while no listener reads snapshots.
    (Plain slots, never changed after it is made: made four times per task, a frozen
    dataclass costs three times as much to make.)"""

    __slots__ = ("snapshot", "transition")

    def __init__(self, snapshot: TaskSnapshot | None, transition: Transition | None = None) -> None:
        self.snapshot = snapshot
        self.transition = transition


# The bits of `TaskRun._flags`: one int for seven yes-or-no facts, 48 bytes less per run
# than a slot each (D176). Each is read and written under the run's lock only.
#: `start()` was called (or a claim's start taken on).
_START_REQUESTED = 1
#: A scheduler's admission, for the next attempt.
_ADMITTED = 2
#: The scheduler is to be asked, outside the lock.
_ADMISSION_DUE = 4
#: A thread is in `_dispatch`.
_DISPATCHING = 8
#: A kick came while one dispatched: that one goes round again.
_REDISPATCH = 16
#: The backoff ended: the next attempt is due.
_RETRY_DUE = 32
#: A thread is telling the listeners (`_deliver`).
_DELIVERING = 64
#: A listener reads the snapshot of every transition (see `RunListener.on_transition`).
_SNAPSHOTS_READ = 128
#: A listener is told a move to queued, starting or running as a transition: not every
#: listener is a `MovePuller`. (Set for the few runs that need it: a controller's run keeps
#: its flags within the small ints Python shares, 32 bytes less per queued run.)
_MOVES_TOLD = 256
#: A move was recorded and its pullers are not told yet (`_deliver`).
_MOVE_DUE = 512
#: One listener holding `wait()` (`hold_finish`) adds this: the count is the flags above
#: `_MOVE_DUE`, so a run whose store writer releases it at once makes no `_Rare`.
_ONE_HOLD = 1024
#: The moves a `MovePuller` is told of by `on_moved`, not by `on_transition`.
_PULLED_MOVES = frozenset({_S.QUEUED, _S.STARTING, _S.RUNNING})


def _reads_snapshots(listeners: tuple[RunListener, ...]) -> bool:
    """Whether one of `listeners` reads the snapshot of every transition."""
    if len(listeners) == 1:  # a controller's runs: no generator for one listener
        return bool(getattr(listeners[0], "reads_snapshots", True))
    return any(getattr(listener, "reads_snapshots", True) for listener in listeners)


def _pulls_moves(listeners: tuple[RunListener, ...]) -> bool:
    """Whether every one of `listeners` is a `MovePuller` (none: nobody needs an event)."""
    if len(listeners) == 1:  # a controller's runs: no generator for one listener
        return bool(getattr(listeners[0], "pulls_moves", False))
    return all(getattr(listener, "pulls_moves", False) for listener in listeners)


class _Rare:
    """What few runs ever have: a stop's or a cancellation's reason, a backoff timer,
    progress, log lines, an abandoned body's waiters, upstream values, the inline
    driver's event, the end's snapshot while a listener holds `wait()`. A queued run
    shares `_NOTHING_RARE` and makes its own at the first write (`TaskRun._rare_made`):
    72 bytes less per run (D176)."""

    __slots__ = (
        "abandoned",
        "backoff_timer",
        "cancel_reason",
        "logs",
        "progress",
        "settled",
        "stop_reason",
        "upstream",
        "wakeup",
    )

    def __init__(self) -> None:
        #: while an abandoned body still executes on its thread: who waits for it to return
        self.abandoned: list[Callable[[], None]] | None = None
        self.backoff_timer: TimerHandle | None = None
        self.cancel_reason: str | None = None
        self.logs: deque[str] | None = None
        self.progress: Progress | None = None
        #: the terminal snapshot every listener was told while one held `wait()`
        self.settled: TaskSnapshot | None = None
        self.stop_reason: str | None = None
        self.upstream: Mapping[str, Any] | None = None
        self.wakeup: threading.Event | None = None  # made by the inline driver

    def is_empty(self) -> bool:
        """Whether every field holds its default (the run needs no `_Rare` of its own)."""
        return (  # spelled out: asked at each run's end, a loop over the slots cost 8 calls
            self.abandoned is None
            and self.backoff_timer is None
            and self.cancel_reason is None
            and self.logs is None
            and self.progress is None
            and self.settled is None
            and self.stop_reason is None
            and self.upstream is None
            and self.wakeup is None
        )


class _NoRare(_Rare):
    """The shared `_Rare` of every run that has none of its own: never written."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):  # set once, by `__init__`
            raise AttributeError(f"the shared _Rare is never written ({name}); use _rare_made()")
        object.__setattr__(self, name, value)


_NOTHING_RARE: _Rare = _NoRare()


class TaskRun:
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

    The methods a controller's collaborators call besides those (`admit_now`, `kick`,
    `needs_slot`, `scheduling_snapshot`, `when_body_returns`, `hold_finish` for its
    scheduler; `take_write` for its store writer; `start_unless_ended`,
    `take_claimed_start`, `launch_claimed`, `recipe`, `pause_without_waiting` and
    `start_origin` for the controller and its pipelines) are that narrow interface:
    an application starts, waits, stops, pauses and resumes, and needs none of them.

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
        setup: a `RunSetup` shared with other runs of `fn` (a controller's): the
            executor, retry policy, timeouts, windows, clock, actor and hooks come from
            it, and none of those arguments may be given with it.
    """

    __slots__ = (
        "__weakref__",
        "_args",
        "_attempt",
        "_deadlines",
        "_ended",
        "_final",
        "_finished",
        "_flags",
        "_kwargs",
        "_listeners",
        "_lock",
        "_machine",
        "_outbox",
        "_pauses",
        "_rare",
        "_setup",
        "_task_id",
        "_unwritten",
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
        setup: RunSetup | None = None,
    ) -> None:
        if setup is None:
            setup = RunSetup.make(
                fn,
                executor=executor,
                retry=retry,
                timeout=timeout,
                graceful_stop=graceful_stop,
                pause_timeout=pause_timeout,
                clock=clock,
                artifact_dir=artifact_dir,
                actor=actor,
                admission=admission,
                stored_outcome=stored_outcome,
                launch_gate=launch_gate,
            )
        elif setup.fn is not fn:
            raise ConfigurationError("a run's setup must be made for its own task body")
        elif (
            executor is not None
            or retry is not None
            or timeout is not None
            or clock is not None
            or artifact_dir is not None
            or actor is not None
            or admission is not None
            or stored_outcome is not None
            or launch_gate is not None
            or graceful_stop != 5.0
            or pause_timeout != 5.0
        ):
            raise ConfigurationError(
                "TaskRun takes either a setup or the settings it is made of (executor, retry, "
                "timeout, windows, clock, actor, hooks), not both: pass them to RunSetup.make"
            )
        if not isinstance(args, tuple | list):
            raise ConfigurationError(
                f"args must be a tuple of positional arguments, got {args!r}; "
                "write args=('value',) (note the trailing comma)"
            )
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise ConfigurationError(f"kwargs must be a mapping, got {kwargs!r}")
        self._setup = setup
        self._args = args if type(args) is tuple else tuple(args)
        self._kwargs: Mapping[str, Any] = dict(kwargs) if kwargs else _NO_KWARGS
        setup.executor.validate(fn, self._args, self._kwargs)
        # what few runs ever have, in one object made at its first write (D176)
        self._rare: _Rare = _NOTHING_RARE
        if upstream:
            self._rare_made().upstream = dict(upstream)

        if machine is None and snapshot is not None:
            machine = StateMachine(snapshot, transitions, clock=self._setup.clock)
        if machine is None:
            spec = get_task_spec(fn)
            tag_set = validate_tags(tags) if tags is not None else None
            if tag_set is None:
                tag_set = spec.tags if spec is not None else frozenset()
            machine = StateMachine.create(
                task_id if task_id is not None else f"task-{random_hex12()}",
                name or (spec.name if spec is not None else _callable_name(fn)),
                max_attempts=self._setup.policy.max_attempts,
                label=label,
                description=description or (spec.description if spec is not None else None),
                tags=tag_set,
                priority=priority,
                bucket=bucket,
                bucket_key=bucket_key,
                pipeline_id=pipeline_id,
                node_id=node_id,
                clock=self._setup.clock,
            )
        self._machine = machine
        self._task_id = machine.task_id

        self._lock = threading.Lock()
        self._listeners: tuple[RunListener, ...] = tuple(listeners)
        # the first transition of its machine no store writer has taken yet (`take_write`):
        # those it was made with are in the store already, or written by its maker
        self._unwritten = len(machine.transitions)
        self._outbox: list[RunEvent] | None = None  # events not yet told to the listeners
        # made when first needed: a queued run holds no event, condition or log buffer
        self._finished: threading.Event | None = None
        # the composed terminal snapshot, once told: the run is done (a run made of a
        # finished task is done from the start)
        self._final: TaskSnapshot | None = machine.snapshot if machine.status.is_terminal else None
        # the composed snapshot of its terminal transition: told to the listeners, written
        # as it is (a composition made later could stamp another heartbeat)
        self._ended: TaskSnapshot | None = None
        # the lifecycle
        # the lifecycle's yes-or-no facts: `_START_REQUESTED` and the rest
        self._flags = (_SNAPSHOTS_READ if _reads_snapshots(self._listeners) else 0) | (
            0 if _pulls_moves(self._listeners) else _MOVES_TOLD
        )
        self._attempt: Attempt | None = None
        # the collaborators, made when first needed
        self._deadlines: RunDeadlines | None = None
        self._pauses: PauseControl | None = None

    # ================================================================ public surface
    @property
    def task_id(self) -> str:
        """The task's id."""
        return self._task_id

    @property
    def name(self) -> str:
        """The task's registered name."""
        return self._machine.base.name

    @property
    def executor(self) -> Executor:
        """The executor that carries the attempts."""
        return self._setup.executor

    @property
    def clock(self) -> Clock:
        """The clock of every deadline of this run."""
        return self._setup.clock

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
        logs = self._rare.logs
        return () if logs is None else tuple(logs)

    @property
    def done(self) -> bool:
        """True once the task is terminal and every listener has been told."""
        return self._final is not None

    def add_listener(self, listener: RunListener) -> None:
        """Observe every later transition and side update (see `RunListener`)."""
        with self._lock:
            self._listeners = (*self._listeners, listener)
            if _reads_snapshots((listener,)):
                self._flags |= _SNAPSHOTS_READ
            if not _pulls_moves((listener,)):  # told every move by a transition from now
                self._flags |= _MOVES_TOLD

    def wait(self, timeout: float | None = None) -> TaskOutcome:
        """Block until the task is terminal and return its outcome.

        `timeout` is real seconds the caller is willing to block (it is not a task
        deadline, so it is not measured on the run's clock).

        Raises:
            TimeoutError: still not terminal after `timeout`; the task is left untouched.
        """
        timeout = wait_timeout(timeout)
        if self._final is None:
            with self._lock:
                finished = self._finished
                if finished is None and self._final is None:
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

    def recipe(
        self,
    ) -> tuple[Callable[..., Any], tuple[Any, ...], Mapping[str, Any], dict[str, Any]]:
        """The function, arguments and options to run the same body again
        (`Controller.retry`)."""
        snap = self._machine.base  # fields fixed at creation: read without the lock
        options = {
            "executor": self._setup.executor,
            "retry": self._setup.policy,
            "timeout": None if self._setup.timeout is NO_TIMEOUT else self._setup.timeout,
            "tags": snap.tags,
            "priority": snap.priority,
            "bucket": snap.bucket,
        }
        return self._setup.fn, self._args, self._kwargs, options

    def scheduling_snapshot(self) -> TaskSnapshot:
        """A snapshot without the lock, for fields fixed at creation (priority, tags,
        bucket, pipeline): a reference read is atomic, and those fields never change."""
        return self._machine.base

    # ================================================================ start / dispatch
    def start(self) -> None:
        """Start the supervised execution; returns at once (inline: once terminal).

        Raises:
            ConfigurationError: `start()` was already called, or the task is terminal.
        """
        self._start(None)

    def _start(self, queued_at: datetime | None) -> None:
        with self._lock:
            status = self._machine.status
            if self._flags & _START_REQUESTED:
                raise ConfigurationError(
                    f"TaskRun.start() was already called for task {self._task_id!r}; a run "
                    "starts once (create a new TaskRun with a new task_id to run it again)"
                )
            if status.is_terminal:
                raise ConfigurationError(
                    f"task {self._task_id!r} is already {status.value}; it cannot be started"
                )
            self._flags |= _START_REQUESTED
            if status in {_S.PENDING, _S.BLOCKED}:
                self._record(self._machine.mark_queued(actor=self._setup.actor, at=queued_at))
            if self._setup.timeout.start is not None:
                self._deadlines_made().arm_start()
        try:
            self._deliver()
        except BaseException:  # a listener interrupted the telling: still dispatch it
            if not self._setup.executor.inline:  # (an inline body would hold the interrupt)
                self._dispatch()
            raise
        if self._setup.executor.inline:
            self._drive_inline()
        else:
            self._dispatch()

    def start_unless_ended(self, *, queued_at: datetime | None = None) -> None:
        """`start()` for a run a controller has just made: a stop that reached it first
        (``stop_all()`` or a stop by id from another thread, between its registration and
        this call) ended it before its start, and it stays so.

        `queued_at` stamps its ``queued`` (by default now): a submission passes its
        creation time, since creating and queueing the task are one act (D174).
        """
        try:
            self._start(queued_at)
        except ConfigurationError:
            if not self._machine.status.is_terminal:
                raise

    def take_claimed_start(self) -> None:
        """Take on the ``starting`` a worker's claim wrote for this run (D165): the run is
        started, its attempt is built now and that transition is the first thing its
        listeners are told; `launch_claimed` then carries the body. Call once, before any
        other thread can reach the run (as `_next_attempt` does under the lock).

        Raises:
            ConfigurationError: the run was started already, or its machine's last
                transition is not a ``starting``.
        """
        with self._lock:
            machine = self._machine
            last = machine.transitions[-1] if machine.transitions else None
            if (
                self._flags & _START_REQUESTED
                or machine.status is not _S.STARTING
                or last is None
                or last.to_status is not _S.STARTING
            ):
                raise ConfigurationError(
                    f"task {self._task_id!r} has no claimed start to take: it is "
                    f"{machine.status.value}"
                )
            self._flags |= _START_REQUESTED
            if self._setup.timeout.start is not None:  # it covers the attempt until its body begins
                self._deadlines_made().arm_start()
            self._attempt = self._new_attempt()
            self._record(last)

    def launch_claimed(self) -> None:
        """Tell the claimed start and carry the body through the launch gate (after
        `take_claimed_start`); an attempt a stop ended meanwhile is not carried (D92)."""
        with self._lock:
            attempt = self._attempt
        self._deliver()
        if attempt is not None:
            self._launch(attempt)

    def dispatch(self) -> None:
        """Admit the next attempt (for schedulers that passed ``admission=``).

        Does nothing unless the run is queued: a run paused or ended since the scheduler
        chose it is not started (its admission is void; it asks again when queued).
        """
        if self.admit_now():
            self.kick()

    def needs_slot(self) -> tuple[TaskStatus, bool]:
        """The current status, and whether the run needs its execution slot now: it is
        active, paused in place, or queued with a scheduler's admission. A scheduler asks
        this rather than trusting a status it was told, which may be out of date."""
        with self._lock:
            snap = self._machine.snapshot
            status = snap.status
            if status is _S.QUEUED:
                return status, bool(self._flags & _ADMITTED)
            if status is _S.PAUSED:
                return status, snap.paused_in_place
            if self._rare.abandoned is not None:  # lost, its body still executing (D54)
                return status, True
            return status, status in ACTIVE_STATUSES

    def when_body_returns(self, callback: Callable[[], None]) -> bool:
        """Call `callback` once the body abandoned after its graceful window returns (from
        its thread); False, and no call, when no abandoned body is executing."""
        with self._lock:
            abandoned = self._rare.abandoned
            if abandoned is None:
                return False
            abandoned.append(callback)
            return True

    def admit_now(self) -> bool:
        """Record the scheduler's admission if the run is queued; False otherwise."""
        with self._lock:
            if self._machine.status is not _S.QUEUED:
                return False
            self._flags |= _ADMITTED
            return True

    def kick(self) -> None:
        """Take the next step the run is due (an attempt, or asking the scheduler)."""
        if self._setup.executor.inline:
            wakeup = self._rare.wakeup
            if wakeup is not None:
                wakeup.set()
        else:
            self._dispatch()

    def _drive_inline(self) -> None:
        # The inline executor carries every attempt in this (the caller's) thread;
        # between attempts this thread waits on an event that timers and controls set.
        wakeup = threading.Event()
        with self._lock:
            self._rare_made().wakeup = wakeup
        while True:
            wakeup.clear()
            self._dispatch()
            if self._machine.status.is_terminal:
                break
            wakeup.wait()
        self._deliver()

    def _dispatch(self) -> None:
        with self._lock:
            if self._flags & _DISPATCHING:
                self._flags |= _REDISPATCH
                return
            self._flags |= _DISPATCHING
            try:
                attempt, admission_due = self._next_step()
            except BaseException:  # nothing was told or launched: no kick can be pending
                self._flags &= ~_DISPATCHING
                raise
        try:
            while True:
                try:
                    self._deliver()
                except BaseException:
                    # interrupted while telling (Ctrl-C in a listener on the main thread):
                    # still queue or launch the run, so it is never left starting or
                    # unqueued holding its slot
                    if admission_due and self._setup.admission is not None:
                        self._setup.admission(self)
                    if attempt is not None:
                        self._launch(attempt)
                    raise
                if admission_due and self._setup.admission is not None:
                    self._setup.admission(self)
                if attempt is not None:
                    # launched: a next attempt becomes due only by a kick, which marks
                    # `_REDISPATCH` (checked below) rather than by anything else
                    self._launch(attempt)
                with self._lock:
                    if not self._flags & _REDISPATCH:
                        self._flags &= ~_DISPATCHING
                        return
                    attempt, admission_due = self._next_step()  # a kick came: go round again
        except BaseException:  # interrupted (Ctrl-C in a listener on the main thread)
            with self._lock:
                self._flags &= ~_DISPATCHING
                again = self._flags & _REDISPATCH
            if again:  # a kick that came meanwhile is never lost: another thread takes it
                try:
                    run_elsewhere(self._dispatch, f"chongming-dispatch-{self._task_id}")
                except Exception:  # no thread to be had: take it here first
                    self._dispatch()
            raise

    def _next_step(self) -> tuple[Attempt | None, int]:
        """For `_dispatch`, under the lock: the attempt now due (see `_next_attempt`), and
        whether the scheduler is to be asked for an admission (taken: asked once)."""
        self._flags &= ~_REDISPATCH
        attempt = self._next_attempt()
        flags = self._flags
        self._flags = flags & ~_ADMISSION_DUE
        return attempt, flags & _ADMISSION_DUE

    def _next_attempt(self) -> Attempt | None:
        """Move to ``starting`` and build the next attempt if one is due. Under the lock."""
        status = self._machine.status
        if not self._flags & _START_REQUESTED:
            return None
        if status is _S.RETRY_WAIT:
            if not self._flags & _RETRY_DUE:
                return None
            self._flags &= ~_RETRY_DUE
            if self._setup.admission is not None:
                self._record(self._machine.mark_queued(actor=self._setup.actor, reason="retry due"))
                self._flags &= ~_ADMITTED
                self._flags |= _ADMISSION_DUE
                return None
        elif status is _S.QUEUED:
            if self._setup.admission is not None and not self._flags & _ADMITTED:
                self._flags |= _ADMISSION_DUE
                return None
        else:
            return None
        self._flags &= ~_ADMITTED
        self._record(
            self._machine.mark_starting(executor=self._setup.executor.name, actor=self._setup.actor)
        )
        if self._rare.progress is not None:
            self._rare.progress = None
        attempt = self._new_attempt()
        self._attempt = attempt
        return attempt

    def _launch(self, attempt: Attempt) -> None:
        gate = self._setup.launch_gate
        if gate is None:
            self._carry(attempt)
        else:  # a controller's store: carried once the task's row holds this version (D105)
            gate(self._task_id, self._machine.version, partial(self._carry, attempt))

    def _carry(self, attempt: Attempt) -> None:
        with self._lock:
            # ended while its `starting` was being told (a stop and its window, a start
            # timeout): it was settled then, and no carrier is started for it (D92)
            if attempt.closed:
                return
        try:
            self._setup.executor.launch(attempt)
        except BaseException as exc:  # e.g. no thread or process could be started
            self._attempt_finished(attempt, AttemptResult.raised(exc))

    # ================================================================ stop
    def withdraw(self) -> bool:
        """Start no attempt from now on, if none is under way: True when the run waits
        (queued, or waiting to retry) and no thread is dispatching it; then its backoff is
        cancelled and a later kick starts nothing (the run stays as it is until it is
        stopped). A closing worker withdraws a durable task before it hands the task back
        to the queue (D207); False: an attempt may be beginning, leave the run as it is."""
        with self._lock:
            if self._machine.status not in _WAITING_TO_START or self._flags & _DISPATCHING:
                return False
            # `_next_attempt` starts nothing without it; `start()` is not called again
            self._flags &= ~(_START_REQUESTED | _RETRY_DUE)
            self._cancel_backoff()
            return True

    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """Request a stop; never blocks. Returns False when already terminal or stopping."""
        check_reason(reason)  # written with the stop
        who = actor or self._setup.actor
        with self._lock:
            machine = self._machine
            status = machine.status
            if status.is_terminal or status is _S.STOPPING:
                return False
            if reason is not None or self._rare.stop_reason is not None:
                self._rare_made().stop_reason = reason
            paused_in_place = status is _S.PAUSED and machine.snapshot.paused_in_place
            if status in _BEFORE_START or (status is _S.PAUSED and not paused_in_place):
                self._record(machine.mark_stopped(actor=who, reason=reason))
            else:
                attempt = self._attempt
                assert attempt is not None
                if paused_in_place:  # R3: the body is on the stack and must unwind
                    self._record(
                        machine.mark_running(actor=who, reason=reason, trigger=_STOP_TRIGGER)
                    )
                    self._resume_deadlines(attempt)
                self._record(machine.mark_stopping(actor=who, reason=reason))
                if self._pauses is not None:
                    self._pauses.resolve(False)
                attempt.control.request_stop(reason)
                self._ask_to_unwind(attempt)
        self._deliver()
        return True

    def cancel(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """The orchestration layer gives up on the task (e.g. a pipeline's fail_fast, R16).

        Not yet running -> ``cancelled`` at once. Running -> the attempt's stop flag is
        set (the status stays ``running``: ``stopping`` belongs to operator stops and has
        no edge to ``cancelled``) and the task ends ``cancelled`` once the body unwinds;
        a body that returns its value first ends ``succeeded``. The graceful window and
        its fallback apply as for a stop. Returns False when terminal or already ending.
        """
        check_reason(reason)
        who = actor or self._setup.actor
        text = reason or "cancelled by the orchestration layer"
        with self._lock:
            machine = self._machine
            status = machine.status
            if status.is_terminal or status is _S.STOPPING or self._rare.cancel_reason is not None:
                return False
            self._rare_made().cancel_reason = text
            paused_in_place = status is _S.PAUSED and machine.snapshot.paused_in_place
            if status in _BEFORE_START or (status is _S.PAUSED and not paused_in_place):
                failure = Failure.of(FailureKind.CANCELLED, f"cancelled: {text}", retryable=False)
                self._record(machine.mark_cancelled(failure=failure, actor=who, reason=text))
            else:
                attempt = self._attempt
                assert attempt is not None
                if paused_in_place:  # R3: the body must unwind from its checkpoint
                    self._record(
                        machine.mark_running(actor=who, reason=text, trigger=_CANCEL_TRIGGER)
                    )
                elif status is _S.PAUSING:
                    self._record(machine.abort_pause(actor=who, reason=text))
                if self._pauses is not None:  # a pause under way, or held while starting
                    self._pauses.resolve(False)
                attempt.control.request_stop(text)
                self._ask_to_unwind(attempt)
        self._deliver()
        return True

    # ================================================================ pause / resume
    def pause(self, timeout: float | None = None, *, actor: str | None = None) -> bool:
        """Request a pause and wait until the body is suspended at a checkpoint.

        Returns True once the task is ``paused``; False when the window (`timeout`,
        default ``pause_timeout``) passed without a checkpoint (the status goes back to
        ``running`` with a ``runtime:pause_aborted`` transition), when the executor
        cannot pause (inline), or when the task cannot be paused now. It returns within
        its window: a pause already under way with a longer window is not waited for
        past this one (it goes on, and ends by its own window). A task still
        ``starting`` stays so until its body begins; the pause is applied then, within
        the same window, and is withdrawn without a transition if the window ends first.

        Raises:
            ConfigurationError: `timeout` is not a finite number of seconds > 0.
        """
        window = self._setup.pause_window if timeout is None else pause_window(timeout)
        deadline = self._setup.monotonic() + window
        ticket, result = self._request_pause(window, deadline, actor)
        if ticket is None:
            return result
        pauses = self._pauses
        assert pauses is not None  # every ticket is its
        return pauses.wait(ticket, deadline)

    def pause_without_waiting(self, *, actor: str | None = None) -> bool:
        """Request a pause (default window) and return at once: True when the task is paused
        now or a pause of it is under way (its window ends it; nobody waits for it)."""
        window = self._setup.pause_window
        ticket, result = self._request_pause(window, self._setup.monotonic() + window, actor)
        return ticket is not None or result

    def _request_pause(
        self, window: float, deadline: float, actor: str | None
    ) -> tuple[PauseTicket | None, bool]:
        """Request a pause without waiting for it: the pending ticket (a new one, or the
        one of a pause already under way), or None and whether the task is paused now.
        A command applies a pause so, in the order of its batch (D61)."""
        who = actor or self._setup.actor
        ticket: PauseTicket | None = None
        result = False
        with self._lock:
            machine = self._machine
            status = machine.status
            attempt = self._attempt
            pending = None if self._pauses is None else self._pauses.ticket
            if status in _WAITING_TO_START:  # before start: at once, holds nothing
                self._record(machine.mark_paused(actor=who))
                self._set_aside()
                result = True
            elif status is _S.PAUSED:
                result = True
            elif status in {_S.PAUSING, _S.STARTING} and pending is not None:
                ticket = pending  # under way, or waiting for the body (D90)
            elif (
                status in {_S.STARTING, _S.RUNNING}
                and self._setup.executor.supports_pause
                and attempt is not None
                and not attempt.closed
                and not attempt.control.stop_requested
            ):
                ticket = self._pause_control().open(attempt, window, deadline, who)
        self._deliver()
        return ticket, result

    def _set_aside(self) -> None:
        """Paused before start: give up what the run waited with, a scheduler's admission
        (it ends with the queued state) and its backoff, and keep what is left of its start
        timeout. Under the lock."""
        self._flags &= ~_ADMITTED
        self._cancel_backoff()
        self._flags &= ~_RETRY_DUE
        if self._deadlines is not None:
            self._deadlines.suspend_start()

    def resume(self, *, actor: str | None = None) -> bool:
        """Withdraw a pause: ``running`` for an in-place pause, ``queued`` for a pause before
        start (which then starts normally); a pause asked while ``starting`` is dropped
        before it was applied (the status stays ``starting``, D90). Returns False when not
        paused, pausing or waiting for a pause to be applied."""
        who = actor or self._setup.actor
        with self._lock:
            machine = self._machine
            requeued = machine.status is _S.PAUSED and not machine.snapshot.paused_in_place
            if requeued:
                self._record(machine.resume(actor=who))
                if self._deadlines is not None:
                    self._deadlines.resume_start()
            elif self._pauses is None or not self._pauses.resume(who):
                return False
        self._deliver_then_kick(requeued)  # a run queued again starts normally
        return True

    # ================================================================ executor callbacks
    def _attempt_attached(self, attempt: Attempt, handle: AttemptHandle) -> bool:
        with self._lock:  # ordered against the closing of the attempt (D92)
            if attempt is not self._attempt or attempt.closed:
                return False
            attempt.handle = handle
            return True

    def _attempt_began(self, attempt: Attempt, pid: int | None, *, in_process: bool) -> bool:
        with self._lock:
            if attempt is not self._attempt or attempt.closed:
                return False
            status = self._machine.status
            skip = in_process and (status is _S.STOPPING or self._rare.cancel_reason is not None)
            if not skip:
                attempt.started = True
                attempt.pid = pid
                now = self._setup.monotonic()
                attempt.context.last_beat = now
                deadlines = self._deadlines
                if deadlines is not None:
                    deadlines.end_start()
                if status is _S.STARTING:
                    running = self._machine.mark_running(
                        pid=pid, heartbeat_at=self._setup.clock.now(), actor=self._setup.actor
                    )
                    attempt.beat_shown = now
                    self._record(running)
                    if self._pauses is not None:
                        self._pauses.apply_held(attempt)  # asked while starting (D90)
                if status is not _S.STOPPING:
                    self._arm_deadlines(attempt, now)
        self._deliver()
        if skip:  # stopped before its body began: the body never runs
            self._attempt_finished(attempt, AttemptResult.cancelled())
            return False
        return True

    def _attempt_finished(self, attempt: Attempt, result: AttemptResult) -> None:
        with self._lock:
            late = attempt is not self._attempt or attempt.closed
            if late:
                waiters = self._late_result(attempt)
            else:
                why = "the attempt ended before reaching a checkpoint"
                retry_now = self._end_attempt(attempt, why, result)
            attempt.release()  # its body returned, or never ran
        if late:
            if waiters:  # what the abandoned body held is free now
                call_each(waiters, _log, "could not release what an abandoned body held")
            return
        self._deliver_then_kick(retry_now)

    def _late_result(self, attempt: Attempt) -> list[Callable[[], None]] | None:
        """The result of an attempt already closed is ignored; an abandoned body that
        returns at last gives back who waited for it to return. Call under the lock."""
        _log.debug("ignoring the late result of closed attempt %s", attempt.number)
        if not attempt.abandoned:
            return None
        rare = self._rare
        waiters = rare.abandoned
        if waiters is not None:
            rare.abandoned = None
        return waiters

    def _attempt_paused_remotely(self, attempt: Attempt, generation: int) -> None:
        pauses = self._pauses
        if pauses is not None:  # a child confirms only a pause asked of it
            pauses.confirm_remote(attempt, generation)

    def _hold_at_checkpoint(self, attempt: Attempt) -> None:
        """The body reached a checkpoint with a pause requested: hold it there (see
        `PauseControl.hold`)."""
        pauses = self._pauses
        if pauses is not None:  # a pause is requested only by it
            pauses.hold(attempt)

    # ================================================================ ending an attempt
    def _end_attempt(
        self,
        attempt: Attempt | None,
        why: str,
        result: AttemptResult | None = None,
        *,
        start_timeout: Failure | None = None,
    ) -> bool:
        """End `attempt` as `decide` says: close it, leave a pause (`why` names the reason),
        and record its end; True when the next attempt is due at once. `result` is how the
        body ended (None: it did not, its graceful window passed); `attempt` is None for a
        start timeout that found no attempt under way. Under the lock."""
        if attempt is not None:
            self._close_attempt(attempt)
            if self._pauses is not None:
                self._pauses.leave(why)
        return self._conclude(attempt, self._ending(attempt, result, start_timeout=start_timeout))

    def _ending(
        self,
        attempt: Attempt | None,
        result: AttemptResult | None,
        *,
        start_timeout: Failure | None = None,
    ) -> AttemptEnding:
        """The facts `decide` judges the attempt's end on. Under the lock."""
        machine = self._machine
        return AttemptEnding(
            task_id=self._task_id,
            status=machine.status,
            result=result,
            attempt=machine.attempt,
            max_attempts=machine.max_attempts,
            policy=self._setup.policy,
            graceful=self._setup.graceful,
            stop_reason=self._rare.stop_reason,
            cancel_reason=self._rare.cancel_reason,
            timeout_kind=None if attempt is None else attempt.timeout_kind,
            timeout_message=None if attempt is None else attempt.timeout_message,
            forced=attempt is not None and attempt.forced,
            began=attempt is not None and attempt.started,
            start_timeout=start_timeout,
        )

    def _conclude(self, attempt: Attempt | None, ending: AttemptEnding) -> bool:
        """Enact what `decide` says of `ending`; True when the next attempt is due at once.
        Under the lock."""
        machine = self._machine
        decision = decide(ending)
        if decision.keeps_value:
            assert ending.result is not None
            # the store decides what it can keep, before anyone is told the task succeeded
            # (D68); every reader, this process too, then sees the value it keeps (D69)
            outcome, invalid = keep_result(
                self._task_id, ending.result.value, self._setup.stored_outcome
            )
            if invalid is None:
                self._record(machine.mark_succeeded(outcome=outcome, actor=self._setup.actor))
                return False
            decision = decide(dataclasses.replace(ending, value_refused=invalid))
        status, failure, reason = decision.status, decision.failure, decision.reason
        if status is _S.STOPPED:
            self._record(
                machine.mark_stopped(failure=failure, actor=self._setup.actor, reason=reason)
            )
        elif status is _S.CANCELLED:
            self._record(
                machine.mark_cancelled(failure=failure, actor=self._setup.actor, reason=reason)
            )
        elif status is _S.LOST:
            # its body goes on executing: what its slot stands for stays held until it
            # returns (D54; see `when_body_returns`)
            assert attempt is not None
            attempt.abandoned = True
            self._rare_made().abandoned = []
            self._record(machine.mark_lost(failure, actor=self._setup.actor))
        elif status is _S.RETRY_WAIT:
            assert failure is not None
            return self._wait_to_retry(failure)
        else:
            assert status is _S.FAILED
            assert failure is not None
            self._record(machine.mark_failed(failure, actor=self._setup.actor))
        return False

    def _wait_to_retry(self, failure: Failure) -> bool:
        """``retry_wait`` with the policy's backoff; True when the retry is due at once."""
        machine = self._machine
        delay = max(0.0, float(self._setup.policy.delay_after(machine.attempt)))
        retry_at = self._setup.clock.now() + timedelta(seconds=delay)
        self._record(machine.mark_retry_wait(failure, retry_at=retry_at, actor=self._setup.actor))
        if delay <= 0:
            self._flags |= _RETRY_DUE
            return True
        self._rare_made().backoff_timer = self._setup.clock.call_later(delay, self._backoff_due)
        return False

    def _cancel_backoff(self) -> None:
        """Cancel the backoff timer, if one is armed. Under the lock."""
        rare = self._rare
        if rare.backoff_timer is not None:
            rare.backoff_timer.cancel()
            rare.backoff_timer = None

    def _backoff_due(self) -> None:
        with self._lock:
            self._rare.backoff_timer = None  # armed, so made: never the shared one
            if self._machine.status is not _S.RETRY_WAIT:
                return
            self._flags |= _RETRY_DUE
        self.kick()

    def _close_attempt(self, attempt: Attempt) -> None:
        attempt.closed = True
        attempt.cancel_timers()
        self._wake_held()

    def _on_terminal(self) -> None:
        self._cancel_backoff()
        if self._deadlines is not None:
            self._deadlines.cancel_start()
        self._flags &= ~_RETRY_DUE
        pauses = self._pauses
        if pauses is not None:
            pauses.resolve(False)
            pauses.wake_held()

    # ================================================================ deadlines and pauses
    def _deadlines_made(self) -> RunDeadlines:
        """The run's deadlines, made when first needed. Under the lock."""
        deadlines = self._deadlines
        if deadlines is None:
            deadlines = self._deadlines = RunDeadlines(self)
        return deadlines

    @property
    def start_origin(self) -> float | None:
        """When the start timeout begins to count (monotonic; None: at ``start()``)."""
        deadlines = self._deadlines
        return None if deadlines is None else deadlines.start_origin

    @start_origin.setter
    def start_origin(self, origin: float | None) -> None:
        """Set before ``start()``: a pipeline node's start timeout counts from its
        pipeline's submission, blocked time included (R1)."""
        if self._setup.timeout.start is not None:
            self._deadlines_made().start_origin = origin

    def _arm_deadlines(self, attempt: Attempt, now: float) -> None:
        """The body runs: arm its per-attempt and idle timeouts, if it has any."""
        timeout = self._setup.timeout
        if timeout.per_attempt is not None or timeout.idle is not None:
            self._deadlines_made().arm(attempt, now)

    def _suspend_deadlines(self, attempt: Attempt) -> None:
        """The body is paused: no timeout runs. Under the lock."""
        if self._deadlines is not None:
            self._deadlines.suspend(attempt)

    def _resume_deadlines(self, attempt: Attempt) -> None:
        """The body runs again after a pause: its idle clock restarts and its timeouts are
        re-armed with what was left, unless a timeout or a stop already asked it to stop.
        Under the lock."""
        if attempt.timeout_kind is not None or attempt.control.stop_requested:
            return
        now = self._setup.monotonic()
        attempt.context.last_beat = now
        self._arm_deadlines(attempt, now)

    def _ask_to_unwind(self, attempt: Attempt) -> None:
        """The attempt was asked to stop: its timeouts end, its graceful window begins, and
        a body held at its checkpoint wakes to see the request. Under the lock."""
        deadlines = self._deadlines_made()
        deadlines.cancel(attempt)
        deadlines.keep_graceful_window(attempt)
        self._wake_held()

    def _pause_control(self) -> PauseControl:
        """The run's pause control, made at the first pause of a body. Under the lock."""
        pauses = self._pauses
        if pauses is None:
            pauses = self._pauses = PauseControl(self)
        return pauses

    def _wake_held(self) -> None:
        """Wake a body held at its checkpoint to look again. Under the lock."""
        if self._pauses is not None:
            self._pauses.wake_held()

    # ================================================================ composition
    def _compose(self) -> TaskSnapshot:
        """The machine's snapshot plus the side-path fields. Call under the lock."""
        snap = self._machine.snapshot
        changes: dict[str, Any] = {}
        progress = self._rare.progress
        if progress is not None:
            changes["progress"] = progress
        attempt = self._attempt
        if attempt is not None and attempt.started and attempt.number == snap.attempt:
            beat = attempt.context.last_beat
            if beat != attempt.beat_shown or snap.last_heartbeat_at is None:
                age = max(0.0, self._setup.monotonic() - beat)
                changes["last_heartbeat_at"] = self._setup.clock.now() - timedelta(seconds=age)
            if snap.pid is None and attempt.pid is not None:
                changes["pid"] = attempt.pid
        return snap.evolve(**changes) if changes else snap

    def _rare_made(self) -> _Rare:
        """The run's own `_Rare`, made now if it has none yet. Under the lock (or before
        any other thread can reach the run): two threads making one each would lose a
        write."""
        rare = self._rare
        if rare is _NOTHING_RARE:
            rare = self._rare = _Rare()
        return rare

    def _record(self, transition: Transition) -> None:
        """Queue `transition` for the listeners. Call under the lock."""
        if transition.to_status.is_terminal:
            ended = self._ended = self._compose()
            self._queue_event(RunEvent(ended, transition))
            self._on_terminal()
            wakeup = self._rare.wakeup
            if wakeup is not None:
                wakeup.set()
            return
        flags = self._flags
        if not flags & _MOVES_TOLD and transition.to_status in _PULLED_MOVES:
            self._flags = flags | _MOVE_DUE  # its pullers read the run themselves
            return
        # built for the listeners that read it; a store writer takes the run's state itself
        snapshot = self._compose() if flags & _SNAPSHOTS_READ else None
        self._queue_event(RunEvent(snapshot, transition))

    def take_write(self) -> tuple[TaskSnapshot, tuple[Transition, ...]] | None:
        """For a store writer (`StoreWriter.record_run`): the composed snapshot now and the
        transitions no writer took before, oldest first, now taken; None when there are
        none. Called once per flush that writes the run, whatever it did meanwhile."""
        with self._lock:
            transitions = self._machine.transitions
            start = self._unwritten
            if start >= len(transitions):
                return None
            self._unwritten = len(transitions)
            ended = self._ended
            if ended is not None and ended.status_version == self._machine.version:
                return ended, transitions[start:]  # the end as its listeners are told it
            return self._compose(), transitions[start:]

    def has_unwritten(self) -> bool:
        """Whether the run made a transition no store writer has taken (`take_write`). Read
        without the lock: a move made meanwhile is told by the thread that made it."""
        return len(self._machine.transitions) > self._unwritten

    def _queue_event(self, event: RunEvent) -> None:
        """Queue `event` for `_deliver`. Call under the lock."""
        if self._outbox is None:
            self._outbox = [event]
        else:
            self._outbox.append(event)

    def hold_finish(self) -> Callable[[], None]:
        """For a listener of the terminal transition: ``wait()`` and ``done`` wait until the
        returned callable is called (a store writer calls it once the write is durable)."""
        with self._lock:
            self._flags += _ONE_HOLD
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._flags -= _ONE_HOLD
                settled = None if self._flags >= _ONE_HOLD else self._rare.settled
            if settled is not None:
                self._finish(settled)

        return release

    def _settle_told(self, snapshot: TaskSnapshot) -> None:
        """Every listener has seen the terminal transition; finish unless one holds it."""
        with self._lock:
            held = self._flags >= _ONE_HOLD
            if held:  # by `hold_finish`: kept for the last release
                self._rare_made().settled = snapshot
        if not held:
            self._finish(snapshot)

    def _finish(self, snapshot: TaskSnapshot) -> None:
        """Release the waiters (once)."""
        with self._lock:
            if self._final is not None:
                return
            self._final = snapshot
            # a finished run keeps its trajectory, not the machinery of its last attempt
            # (context, control, closures): fewer live objects for the garbage collector
            self._attempt = None
            rare = self._rare
            if rare.settled is not None:
                rare.settled = None
                if rare.is_empty():  # made only to keep the end's snapshot: not kept
                    self._rare = _NOTHING_RARE
            finished = self._finished
        if finished is not None:
            finished.set()

    def _deliver(self) -> None:
        """Tell the listeners about queued events, in order, outside the lock (never hold it);
        and the pullers about moves (`MovePuller`), before the events queued with them.

        A listener raising a BaseException (SystemExit, KeyboardInterrupt) never leaves the
        run half told: on the main thread (Ctrl-C) the batch under way is finished (a
        terminal event in it still ends the run and tells its waiters), the events queued
        meanwhile are told by another thread, and the exception is raised at once; on any
        other thread it can only end that thread, so it is logged and the telling goes on.
        """
        if not self._outbox and not self._flags & _MOVE_DUE:
            return  # a thread tells what it queued itself, or leaves it to the one telling
        interrupted: BaseException | None = None
        with self._lock:
            flags = self._flags
            if flags & _DELIVERING:
                return  # that one looks again before it stops
            moved = bool(flags & _MOVE_DUE)
            batch = self._take_outbox()
            if batch is None and not moved:
                return
            self._flags = (flags | _DELIVERING) & ~_MOVE_DUE
            listeners = self._listeners
        while moved or batch is not None:
            terminal: TaskSnapshot | None = None
            told = False
            try:
                if moved:
                    for listener in listeners:
                        if not getattr(listener, "pulls_moves", False):
                            continue  # added after the move: it observes later ones
                        try:
                            listener.on_moved(self)  # type: ignore[attr-defined]
                        except Exception:
                            _log.exception("listener %r failed on task %r", listener, self._task_id)
                        except BaseException as exc:
                            interrupted = self._listener_interrupted(listener, exc, interrupted)
                for event in batch or ():
                    snapshot = event.snapshot
                    for listener in listeners:
                        if snapshot is None and getattr(listener, "reads_snapshots", True):
                            continue  # added after this event: it observes later ones
                        if not getattr(listener, "reports_quickly", False):
                            hand_over()  # it may block: an attempt kept here must not wait
                        try:
                            if event.transition is None:
                                assert snapshot is not None  # queued only with one
                                listener.on_side_update(self, snapshot)
                            else:
                                # None only for a listener that reads no snapshots
                                tell = listener.on_transition
                                tell(self, event.transition, snapshot)  # type: ignore[arg-type]
                        except Exception:
                            _log.exception("listener %r failed on task %r", listener, self._task_id)
                        except BaseException as exc:
                            interrupted = self._listener_interrupted(listener, exc, interrupted)
                    if event.transition is not None and event.transition.to_status.is_terminal:
                        terminal = event.snapshot
                told = True
            finally:
                with self._lock:
                    # queued meanwhile by threads that left them to this one: told next
                    flags = self._flags
                    if told and interrupted is None:
                        moved = bool(flags & _MOVE_DUE)
                        batch = self._take_outbox()
                    else:
                        moved, batch = False, None
                    if batch is None and not moved:
                        self._flags = flags & ~_DELIVERING
                    else:
                        self._flags = flags & ~_MOVE_DUE
                        listeners = self._listeners
                if terminal is not None:
                    self._settle_told(terminal)
        if interrupted is not None:
            # queued by threads that left it to this one: never stranded
            if self._outbox or self._flags & _MOVE_DUE:
                try:
                    run_elsewhere(self._deliver, f"chongming-deliver-{self._task_id}")
                except Exception:  # no thread to be had: tell them here first
                    self._deliver()
            raise interrupted

    def _listener_interrupted(
        self, listener: object, exc: BaseException, interrupted: BaseException | None
    ) -> BaseException | None:
        """What `_deliver` raises once told, after `listener` raised the BaseException `exc`:
        the first one on the main thread; on any other thread it is logged, and nothing."""
        if threading.current_thread() is not threading.main_thread():
            _log.exception(
                "listener %r raised %s on task %r; the run goes on",
                listener,
                type(exc).__name__,
                self._task_id,
            )
            return interrupted
        return exc if interrupted is None else interrupted

    def _take_outbox(self) -> list[RunEvent] | None:
        """The events queued and not told yet, now taken; None when there are none. Call
        under the lock."""
        batch, self._outbox = self._outbox, None
        return batch

    def _deliver_then_kick(self, retry_due: bool) -> None:
        """`_deliver`, then, when `retry_due`, take the step the run is due (its next
        attempt; a run queued again), even when a listener interrupts the telling."""
        try:
            self._deliver()
        finally:
            if retry_due:
                self.kick()

    # ================================================================ attempts
    def _new_attempt(self) -> Attempt:
        """Build the next attempt (fresh control token and context). Call under the lock."""
        number = self._machine.attempt
        control = AttemptControl()
        context = RuntimeContext(
            task_id=self._task_id,
            task_name=self._machine.base.name,
            attempt=number,
            control=control,
            monotonic=self._setup.monotonic,
            progress_sink=lambda progress: self._on_progress(number, progress),
            logs=self._rare.logs,
            log_buffer=self._log_buffer,
            artifact_root=self._setup.artifact_root,
            upstream=self._rare.upstream,
        )
        attempt = Attempt(
            self,
            number=number,
            fn=self._setup.fn,
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
            logs = self._rare.logs
            if logs is None:
                logs = self._rare_made().logs = deque(maxlen=LOG_LINES_KEPT)
            return logs

    def _on_progress(self, number: int, progress: Progress) -> None:
        with self._lock:
            attempt = self._attempt
            if attempt is None or attempt.number != number or attempt.closed:
                return
            self._rare_made().progress = progress
            if self._flags & _SNAPSHOTS_READ:
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
