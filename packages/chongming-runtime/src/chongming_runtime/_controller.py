"""`Controller`: one entry point for many tasks (guide §8).

Who owns what:

* The controller holds the whitelist of task definitions, the runs of this
  process (`TaskRun` handles), the execution capacity and the ready queue.
* Each `TaskRun` is the only writer of its task's status (through its
  `StateMachine`); the controller observes every transition as a listener and
  gates every attempt through the run's admission callback.
* The `StoreWriter` is the only code that writes to the store: transitions are
  written through (batched; terminal ones durably before ``wait()`` returns),
  side-path fields and leases through ``touch`` on a timer.
* Reads (`get`, `list_tasks`, `stats`, `bucket_counts`) go to the store, so they
  see other processes' tasks. Controls for tasks held elsewhere become command
  rows, claimed by their holder's `CommandPoller`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from chongming_core import (
    ACTIVE_STATUSES,
    SYSTEM_CLOCK,
    BucketPolicy,
    Clock,
    Command,
    CommandAction,
    ConcurrencyPolicy,
    ConfigurationError,
    InMemoryTaskStore,
    RetryPolicy,
    StateMachine,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Timeout,
    TimerHandle,
    TouchUpdate,
    Transition,
    validate_tags,
)
from chongming_runtime._capacity import Capacity, ReadyQueue
from chongming_runtime._commands import NOT_HELD, CommandPoller, new_command
from chongming_runtime._outcome import TaskOutcome
from chongming_runtime._ownership import BucketOwnership
from chongming_runtime._pipeline import Pipeline
from chongming_runtime._pipeline_run import PipelineCoordinator, PipelineRun
from chongming_runtime._reconcile import ReconcileReport, reconcile_store
from chongming_runtime._registry import RegisteredTask, TaskRegistry
from chongming_runtime._stats import ControllerStats
from chongming_runtime._task_run import TaskRun
from chongming_runtime._writer import PersistFailure, StoreWriter
from chongming_runtime.executors._base import Executor
from chongming_runtime.executors.thread import ThreadExecutor

__all__ = ["Controller"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.controller")


def default_owner() -> str:
    """``host:pid`` — who this process is, as written into leases and commands."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _holds_slot(snapshot: TaskSnapshot) -> bool:
    if snapshot.status in ACTIVE_STATUSES:
        return True
    return snapshot.status is _S.PAUSED and snapshot.paused_in_place


def _statuses(
    status: TaskStatus | str | Iterable[TaskStatus | str] | None,
) -> frozenset[TaskStatus] | None:
    if status is None:
        return None
    if isinstance(status, TaskStatus | str):
        status = [status]
    try:
        return frozenset(TaskStatus(s) for s in status)
    except ValueError as exc:
        known = ", ".join(s.value for s in TaskStatus)
        raise ConfigurationError(f"{exc}; statuses are: {known}") from None


class Controller:
    """Manage many tasks: register names, submit, query, control, recover.

    Example::

        controller = Controller(max_parallel=2)
        controller.register("transform", transform)
        controller.submit("transform", 100, task_id="t0", label="转换-1")
        print(render_table(controller.list_tasks()))
        controller.stop("t0", reason="manual")
        controller.wait_all(timeout=60)

    Args:
        store: where tasks live (default: in memory, this process only).
        owner: this node's name in leases and commands (default ``host:pid``).
        max_parallel: tasks executing at once (or pass `concurrency`).
        concurrency: `ConcurrencyPolicy` with named-resource limits and default priority.
        max_parallel_per_bucket: per-bucket limit, so one busy bucket cannot starve others.
        num_buckets / bucket_policy: how bucket keys map to buckets (default 64).
        owned_buckets: the buckets this node is responsible for (None: all).
        lease_ttl: how long a lease lasts; a crash is detectable this long after it.
        graceful_stop: seconds a body gets to unwind after a stop.
        pause_timeout: default window of ``pause()``.
        executor: the executor of every task (default `ThreadExecutor`).
        clock: the clock of every deadline (`FakeClock` in tests).
        touch_interval: how often progress, heartbeats and leases are flushed (R18).
        poll_interval: how often the command channel is polled.
        artifact_dir: root of the per-attempt artifact folders.
    """

    def __init__(
        self,
        *,
        store: TaskStore | None = None,
        owner: str | None = None,
        max_parallel: int | None = None,
        concurrency: ConcurrencyPolicy | None = None,
        max_parallel_per_bucket: int | None = None,
        num_buckets: int | None = None,
        bucket_policy: BucketPolicy | None = None,
        owned_buckets: Iterable[int] | None = None,
        lease_ttl: float = 30.0,
        graceful_stop: float = 5.0,
        pause_timeout: float = 5.0,
        executor: Executor | None = None,
        clock: Clock | None = None,
        touch_interval: float = 1.0,
        poll_interval: float = 0.1,
        artifact_dir: str | Path | None = None,
    ) -> None:
        if store is not None and not isinstance(store, TaskStore):
            raise ConfigurationError(
                f"store must be a TaskStore (InMemoryTaskStore, SqliteTaskStore, "
                f"PostgresTaskStore, ...), got {store!r}"
            )
        if concurrency is None:
            concurrency = ConcurrencyPolicy(
                max_parallel=4 if max_parallel is None else max_parallel
            )
        elif not isinstance(concurrency, ConcurrencyPolicy):
            raise ConfigurationError(
                f"concurrency must be a ConcurrencyPolicy, got {concurrency!r}"
            )
        elif max_parallel is not None and max_parallel != concurrency.max_parallel:
            raise ConfigurationError(
                f"max_parallel={max_parallel} contradicts concurrency.max_parallel="
                f"{concurrency.max_parallel}; pass one of them"
            )
        if max_parallel_per_bucket is not None and (
            isinstance(max_parallel_per_bucket, bool)
            or not isinstance(max_parallel_per_bucket, int)
            or max_parallel_per_bucket < 1
        ):
            raise ConfigurationError(
                f"max_parallel_per_bucket must be an integer >= 1, got {max_parallel_per_bucket!r}"
            )
        if bucket_policy is None:
            bucket_policy = BucketPolicy() if num_buckets is None else BucketPolicy(num_buckets)
        elif num_buckets is not None and num_buckets != bucket_policy.num_buckets:
            raise ConfigurationError(
                f"num_buckets={num_buckets} contradicts bucket_policy.num_buckets="
                f"{bucket_policy.num_buckets}; pass one of them"
            )
        for name, value in (
            ("lease_ttl", lease_ttl),
            ("touch_interval", touch_interval),
            ("poll_interval", poll_interval),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigurationError(f"{name} must be > 0 seconds, got {value!r}")
        if executor is not None and getattr(executor, "inline", False):
            raise ConfigurationError(
                "a Controller cannot use InlineExecutor: it runs the task in the caller's "
                "thread, so submit() would block until the task ends and no scheduling is "
                "possible; use ThreadExecutor() or ProcessExecutor()"
            )
        self.store: TaskStore = store if store is not None else InMemoryTaskStore()
        self.owner = owner if owner is not None else default_owner()
        if not isinstance(self.owner, str) or not self.owner.strip():
            raise ConfigurationError(f"owner must be a non-empty string, got {owner!r}")
        self.concurrency = concurrency
        self.bucket_policy = bucket_policy
        self._ownership = BucketOwnership(bucket_policy, owned_buckets)
        self.max_parallel_per_bucket = max_parallel_per_bucket
        self.lease_ttl = float(lease_ttl)
        self.graceful_stop = graceful_stop
        self.pause_timeout = pause_timeout
        self.touch_interval = float(touch_interval)
        self._executor: Executor = executor if executor is not None else ThreadExecutor()
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._artifact_dir = artifact_dir

        self._lock = threading.RLock()
        self._registry = TaskRegistry()
        self._runs: dict[str, TaskRun] = {}
        self._recipes: dict[
            str, tuple[RegisteredTask, tuple[Any, ...], dict[str, Any], dict[str, Any]]
        ] = {}
        self._queue_meta: dict[str, tuple[int, frozenset[str], int | None]] = {}
        self._capacity = Capacity(
            concurrency.max_parallel,
            limits=concurrency.limits,
            max_per_bucket=max_parallel_per_bucket,
        )
        self._ready = ReadyQueue()
        self._closing = False
        self._closed = False
        self._lease_until = self.clock.now() + timedelta(seconds=self.lease_ttl)
        self._next_renewal = self.clock.monotonic() + self.lease_ttl / 3
        self._writer = StoreWriter(self.store, clock=self.clock, decorate=self._stamp_lease)
        self._tick_timer: TimerHandle | None = None
        self._pipelines = PipelineCoordinator(self)
        self._poller = CommandPoller(
            self.store,
            owner=self.owner,
            handler=self._handle_command,
            clock=self.clock,
            buckets=self._ownership.query_buckets(),
            interval=poll_interval,
            lease_seconds=max(1.0, self.lease_ttl),
        )
        if not self._ownership.owns_all_buckets or owned_buckets is not None:
            # a node that declared ownership polls from the start: a stop for one of its
            # queued tasks must not wait until this node happens to submit something
            self._poller.start()

    def __repr__(self) -> str:
        return (
            f"Controller(owner={self.owner!r}, store={self.store!r}, "
            f"max_parallel={self.concurrency.max_parallel}, runs={len(self._runs)})"
        )

    # ================================================================ registration
    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        tags: Iterable[str] | None = None,
        description: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
    ) -> None:
        """Allow `fn` to run under `name`; only registered names can ever be started."""
        with self._lock:
            self._registry.register(
                name, fn, tags=tags, description=description, retry=retry, timeout=timeout
            )

    def register_module(self, module: ModuleType) -> list[str]:
        """Register every ``@task`` function of `module`; returns the names."""
        with self._lock:
            return [r.name for r in self._registry.register_module(module)]

    def register_all(self, *fns: Callable[..., Any]) -> list[str]:
        """Register several ``@task`` functions under their spec names."""
        with self._lock:
            return [self._registry.register_task(fn).name for fn in fns]

    @property
    def task_names(self) -> list[str]:
        """The registered names, sorted."""
        return self._registry.names()

    def definitions(self) -> list[RegisteredTask]:
        """The registered definitions, by name."""
        return sorted(self._registry, key=lambda r: r.name)

    def registered(self, name: str) -> RegisteredTask:
        """The definition of `name` (ConfigurationError when unknown)."""
        return self._registry.get(name)

    # ================================================================ buckets
    @property
    def owned_buckets(self) -> frozenset[int] | None:
        """The buckets this node owns (None: not restricted)."""
        return self._ownership.owned

    @property
    def owns_all_buckets(self) -> bool:
        """True when this node's ownership is not a partition."""
        return self._ownership.owns_all_buckets

    def owns_bucket(self, bucket: int) -> bool:
        """Whether `bucket` belongs to this node."""
        return self._ownership.owns_bucket(bucket)

    # ================================================================ submit
    def submit(
        self,
        name: str,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        tags: Iterable[str] | None = None,
        priority: int | None = None,
        bucket_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: Executor | None = None,
        **kwargs: Any,
    ) -> TaskRun:
        """Submit the registered task `name` with `args`/`kwargs`; returns its run handle.

        Raises:
            ConfigurationError: unknown name, duplicate id, a bucket this node does not
                own, bad tags or options.
        """
        registered = self._registry.get(name)
        options = self._options(
            registered, label=label, tags=tags, priority=priority, bucket_key=bucket_key,
            retry=retry, timeout=timeout, executor=executor,
        )  # fmt: skip
        task_id = self._new_task_id(name, task_id)
        machine = StateMachine.create(
            task_id,
            name,
            max_attempts=options["retry"].max_attempts,
            label=label,
            description=registered.description,
            tags=options["tags"],
            priority=options["priority"],
            bucket=options["bucket"],
            bucket_key=bucket_key,
            clock=self.clock,
        )
        run = self._make_run(registered, machine, args, kwargs, options)
        self._writer.record(run.snapshot)
        self._poller.start()
        self._ensure_tick()
        run.start()
        return run

    def _options(
        self,
        registered: RegisteredTask,
        *,
        label: str | None,
        tags: Iterable[str] | None,
        priority: int | None,
        bucket_key: str | None,
        retry: RetryPolicy | None,
        timeout: Timeout | None,
        executor: Executor | None,
    ) -> dict[str, Any]:
        if self._closing:
            raise ConfigurationError("this controller is closed; create a new one to submit")
        if label is not None and not isinstance(label, str):
            raise ConfigurationError(f"label must be a string, got {label!r}")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ConfigurationError(f"priority must be an integer, got {priority!r}")
        if bucket_key is not None and not isinstance(bucket_key, str):
            raise ConfigurationError(
                f"bucket_key must be a string, got {bucket_key!r} ({type(bucket_key).__name__})"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
        if timeout is not None and not isinstance(timeout, Timeout):
            raise ConfigurationError(f"timeout must be a Timeout, got {timeout!r}")
        if executor is not None and getattr(executor, "inline", False):
            raise ConfigurationError(
                "a Controller cannot use InlineExecutor (it would block submit()); "
                "use ThreadExecutor() or ProcessExecutor()"
            )
        return {
            "tags": validate_tags(tags) if tags is not None else registered.tags,
            "priority": self.concurrency.priority if priority is None else priority,
            "bucket": self._ownership.bucket_for_submit(bucket_key),
            "retry": retry or registered.retry or RetryPolicy(max_attempts=1),
            "timeout": timeout or registered.timeout,
            "executor": executor or self._executor,
        }

    def _new_task_id(self, name: str, task_id: str | None) -> str:
        if task_id is None:
            return f"{name}-{uuid.uuid4().hex[:12]}"
        if not isinstance(task_id, str) or not task_id.strip():
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        with self._lock:
            held = task_id in self._runs or self._pipelines.holds(task_id)
        if held or self.store.get(task_id) is not None:
            raise ConfigurationError(
                f"task id {task_id!r} already exists; ids are never reused (the old trajectory "
                "would be overwritten) — submit under a new id"
            )
        return task_id

    def _make_run(
        self,
        registered: RegisteredTask,
        machine: StateMachine,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        *,
        upstream: Mapping[str, Any] | None = None,
    ) -> TaskRun:
        run = TaskRun(
            registered.fn,
            tuple(args),
            dict(kwargs),
            executor=options["executor"],
            retry=options["retry"],
            timeout=options["timeout"],
            graceful_stop=self.graceful_stop,
            pause_timeout=self.pause_timeout,
            clock=self.clock,
            artifact_dir=self._artifact_dir,
            upstream=upstream,
            actor=self.owner,
            machine=machine,
            listeners=[self],
            admission=self._admit,
        )
        snap = machine.snapshot
        with self._lock:
            self._runs[snap.task_id] = run
            self._recipes[snap.task_id] = (registered, tuple(args), dict(kwargs), dict(options))
            self._queue_meta[snap.task_id] = (snap.priority, snap.tags, snap.bucket)
        return run

    # ================================================================ scheduling
    def _admit(self, run: TaskRun) -> None:
        """Admission callback of every run: it is ready for an attempt; queue it."""
        with self._lock:
            if self._closing:
                return
            priority, tags, bucket = self._queue_meta[run.task_id]
            self._ready.push(run.task_id, priority=priority, tags=tags, bucket=bucket)
        self._schedule()

    def _schedule(self) -> None:
        """Dispatch queued runs while capacity allows (scanning past blocked heads)."""
        while True:
            with self._lock:
                if self._closing:
                    return
                item = self._ready.pop_fitting(self._capacity)
                if item is None:
                    return
                run = self._runs.get(item.task_id)
                if run is None or run.status is not _S.QUEUED:
                    continue
                self._capacity.acquire(item.task_id, item.tags, item.bucket)
            run.dispatch()

    # ================================================================ run listener
    def on_transition(self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Write the transition through and keep the capacity account (a `RunListener`)."""
        status = transition.to_status
        self._writer.record(snapshot, (transition,), durable=status.is_terminal)
        released = False
        with self._lock:
            if status is not _S.QUEUED:
                self._ready.remove(snapshot.task_id)
            if not _holds_slot(snapshot):
                released = self._capacity.release(snapshot.task_id)
        if status.is_terminal and snapshot.pipeline_id is not None:
            self._pipelines.node_settled(snapshot)
        if released:
            self._schedule()

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        """Progress is flushed on the touch timer, never per call (R18)."""

    # ================================================================ leases and touches
    def _stamp_lease(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        if snapshot.is_terminal:
            return snapshot.evolve(lease_owner=self.owner, lease_until=None)
        return snapshot.evolve(lease_owner=self.owner, lease_until=self._lease_until)

    def _ensure_tick(self) -> None:
        with self._lock:
            if self._tick_timer is None and not self._closing:
                self._tick_timer = self.clock.call_later(self.touch_interval, self._tick)

    def _tick(self) -> None:
        """Every `touch_interval`: flush progress and heartbeats; renew leases when due."""
        with self._lock:
            self._tick_timer = None
            if self._closing:
                return
            runs = [r for r in self._runs.values() if not r.done]
        renew = self.clock.monotonic() >= self._next_renewal
        if renew:
            self._lease_until = self.clock.now() + timedelta(seconds=self.lease_ttl)
            self._next_renewal = self.clock.monotonic() + self.lease_ttl / 3
        for run in runs:
            status = run.status
            if status.is_terminal:
                continue
            if status in ACTIVE_STATUSES or status is _S.PAUSED:
                snap = run.snapshot
                self._writer.touch(
                    TouchUpdate(
                        snap.task_id,
                        progress=snap.progress,
                        heartbeat_at=snap.last_heartbeat_at,
                        pid=snap.pid,
                        **self._lease_fields(renew),
                    )
                )
            elif renew:
                self._writer.touch(TouchUpdate(run.task_id, **self._lease_fields(True)))
        self._pipelines.renew(renew)
        self._writer.request_flush()
        self._ensure_tick()

    def _lease_fields(self, renew: bool) -> dict[str, Any]:
        if not renew:
            return {}
        return {"lease_owner": self.owner, "lease_until": self._lease_until}

    def flush(self) -> bool:
        """Write everything pending to the store now; True when the store took it all."""
        return self._writer.flush()

    @property
    def persist_failures(self) -> list[PersistFailure]:
        """The latest store failures (at most 20). Tasks are unaffected; the store catches up."""
        return self._writer.failures

    # ================================================================ queries
    def runs(self) -> list[TaskRun]:
        """Every run handle held by this process (continue to control them by id)."""
        with self._lock:
            return list(self._runs.values())

    def run(self, task_id: str) -> TaskRun | None:
        """The run handle of `task_id` if this process holds it."""
        with self._lock:
            return self._runs.get(task_id)

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The task's snapshot (live for tasks held here, else from the store); None if unknown."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return self._stamp_lease(run.snapshot)
        held = self._pipelines.snapshot(task_id)
        if held is not None:
            return held
        return self.store.get(task_id)

    def history(self, task_id: str) -> list[Transition]:
        """The task's whole trajectory."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return list(run.transitions)
        self._writer.flush()
        return self.store.history(task_id)

    def list_tasks(
        self,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        *,
        name_prefix: str | None = None,
        tag: str | None = None,
        bucket: int | None = None,
        buckets: Iterable[int] | None = None,
        search: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[TaskSnapshot]:
        """Tasks matching the filters, from the store (so other processes' tasks too)."""
        query = TaskQuery(
            statuses=_statuses(status),
            name_prefix=name_prefix,
            tag=tag,
            bucket=bucket,
            buckets=None if buckets is None else frozenset(buckets),
            search=search,
            limit=limit,
            newest_first=newest_first,
        )
        self._writer.flush()
        found = self.store.query(query)
        with self._lock:
            live = {s.task_id: self._runs[s.task_id] for s in found if s.task_id in self._runs}
        if not live:
            return found
        result = []
        for snap in found:
            run = live.get(snap.task_id)
            fresh = self._stamp_lease(run.snapshot) if run is not None else snap
            result.append(fresh if query.matches(fresh) else snap)
        return result

    def stats(self) -> ControllerStats:
        """Per-status counts of every task in the store, plus ``unfinished``."""
        self._writer.flush()
        return ControllerStats(self.store.status_counts())

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket (used to decide which node takes which buckets)."""
        self._writer.flush()
        return self.store.bucket_counts()

    @property
    def active_count(self) -> int:
        """Tasks really holding an execution slot in this process (paused in place included)."""
        with self._lock:
            return self._capacity.active

    @property
    def queued_count(self) -> int:
        """Tasks of this process waiting for a slot (status ``queued``)."""
        with self._lock:
            runs = list(self._runs.values())
        return sum(1 for r in runs if r.status is _S.QUEUED)

    def active_in_bucket(self, bucket: int) -> int:
        """Slots held by tasks of `bucket` in this process."""
        with self._lock:
            return self._capacity.active_in_bucket(bucket)

    # ================================================================ controls
    def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        """Request a stop; never blocks.

        Returns True when a stop was requested (applied here, or sent as a command to the
        holder), False when there is no such task or it has already finished.
        """
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.stop(reason, actor=self.owner)
        if self._pipelines.holds(task_id):
            return self._pipelines.stop_unreleased(task_id, reason)
        return self._send(task_id, CommandAction.STOP, reason)

    def pause(self, task_id: str, *, timeout: float | None = None) -> bool:
        """Request a pause. True only once the task is confirmed ``paused``.

        Across processes there is no receipt: the command is sent and False
        ("not confirmed") is returned — poll `get()` to observe the result.
        """
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.pause(timeout, actor=self.owner)
        self._send(task_id, CommandAction.PAUSE, None)
        return False

    def resume(self, task_id: str) -> bool:
        """Withdraw a pause. True when applied here or accepted for the holder (R14)."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.resume(actor=self.owner)
        snapshot = self.store.get(task_id)
        if snapshot is None or snapshot.status not in {_S.PAUSED, _S.PAUSING}:
            return False
        return self._send(task_id, CommandAction.RESUME, None)

    def _send(self, task_id: str, action: CommandAction, reason: str | None) -> bool:
        snapshot = self.store.get(task_id)
        if snapshot is None or snapshot.is_terminal:
            return False
        self.store.submit_command(
            new_command(
                task_id=task_id,
                action=action.value,
                issued_by=self.owner,
                clock=self.clock,
                reason=reason,
                bucket=snapshot.bucket,
            )
        )
        return True

    def stop_all(self, *, reason: str | None = None) -> int:
        """Request a stop of every unfinished task held here; returns how many requests were sent
        (not how many have stopped: follow with `wait_all`)."""
        with self._lock:
            runs = list(self._runs.values())
        sent = sum(1 for run in runs if run.stop(reason, actor=self.owner))
        return sent + self._pipelines.stop_all(reason)

    def retry(self, task_id: str, *, reason: str | None = None) -> TaskRun:
        """Run a failed/stopped/cancelled/lost task of this process again under the same id (R6).

        Raises:
            ConfigurationError: the task is not held here (its function and arguments are
                only known where it was submitted), or it is not finished.
        """
        with self._lock:
            run = self._runs.get(task_id)
            recipe = self._recipes.get(task_id)
        if run is None or recipe is None:
            where = "in the store" if self.store.get(task_id) is not None else "anywhere"
            raise ConfigurationError(
                f"task {task_id!r} is not held by this process (found {where}); its function "
                "and arguments are only known where it was submitted — resubmit it under a "
                "new task id"
            )
        if not run.done:
            raise ConfigurationError(
                f"task {task_id!r} is still {run.status.value}; wait for it to finish first"
            )
        registered, args, kwargs, options = recipe
        machine = StateMachine(run.snapshot, run.transitions, clock=self.clock)
        transition = machine.retry(actor=self.owner, reason=reason)
        revived = self._make_run(registered, machine, args, kwargs, options)
        self._writer.record(machine.snapshot, (transition,))
        revived.start()
        return revived

    def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        """Block until the task is terminal; raises `TimeoutError` (changing nothing) after
        `timeout`. Works for tasks of other processes too (by polling the store)."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return run.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while True:
            snapshot = self.get(task_id)
            if snapshot is None:
                raise ConfigurationError(f"no task {task_id!r} in the store")
            if snapshot.is_terminal:
                return TaskOutcome.from_snapshot(snapshot)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"task {task_id!r} is still {snapshot.status.value} after {timeout:g}s; "
                    "wait() changed nothing"
                )
            time.sleep(
                delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            )
            delay = min(delay * 2, 0.2)

    def wait_all(self, timeout: float | None = None) -> list[TaskOutcome]:
        """Wait for every task held here; raises `TimeoutError` when some are still unfinished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._pipelines.wait_all(deadline)
        outcomes = []
        for run in self.runs():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            outcomes.append(run.wait(left))
        return outcomes

    # ================================================================ commands
    def _handle_command(self, command: Command) -> str | None:
        action = command.known_action()
        if action is None:
            _log.warning(
                "rejected command %s: unknown action %r for task %r (issued by %r)",
                command.command_id,
                command.action,
                command.task_id,
                command.issued_by,
            )
            return f"rejected: unknown action {command.action!r}"
        with self._lock:
            run = self._runs.get(command.task_id)
        who = f"{command.issued_by} (command)"
        if run is None:
            if self._pipelines.holds(command.task_id) and action is CommandAction.STOP:
                self._pipelines.stop_unreleased(command.task_id, command.reason)
                return "applied"
            snapshot = self.store.get(command.task_id)
            if snapshot is None:
                return f"rejected: no task {command.task_id!r} in the store"
            if snapshot.is_terminal:
                return f"ignored: task is already {snapshot.status.value}"
            return NOT_HELD
        if action is CommandAction.STOP:
            done = run.stop(command.reason, actor=who)
        elif action is CommandAction.RESUME:
            done = run.resume(actor=who)
        else:
            threading.Thread(
                target=run.pause, kwargs={"actor": who}, name="chongming-pause", daemon=True
            ).start()
            return "applied: pause requested"
        return "applied" if done else f"ignored: task is {run.status.value}"

    # ================================================================ pipelines
    def submit_pipeline(self, pipeline: Pipeline) -> PipelineRun:
        """Start a DAG of registered tasks; returns a handle with ``wait(timeout)``."""
        if not isinstance(pipeline, Pipeline):
            raise ConfigurationError(f"submit_pipeline() takes a Pipeline, got {pipeline!r}")
        self._poller.start()
        self._ensure_tick()
        return self._pipelines.submit(pipeline)

    # ================================================================ recovery and housekeeping
    def reconcile(self, *, dry_run: bool = False) -> ReconcileReport:
        """Mark tasks of this node's buckets whose supervisor vanished as lost (guide §8.11)."""
        with self._lock:
            mine = {t for t, r in self._runs.items() if not r.done}
        mine |= self._pipelines.held_ids()
        return reconcile_store(
            self.store,
            actor=self.owner,
            clock=self.clock,
            buckets=self._ownership.query_buckets(),
            dry_run=dry_run,
            skip_task_ids=mine,
        )

    def prune(self, keep_terminal: int) -> int:
        """Drop all but the newest `keep_terminal` finished tasks from the store and from
        this controller's memory (R15); returns how many were dropped."""
        self._writer.flush()
        dropped = self.store.prune(keep_terminal)
        if dropped:
            with self._lock:
                for task_id, run in list(self._runs.items()):
                    if run.done and self.store.get(task_id) is None:
                        del self._runs[task_id]
                        self._recipes.pop(task_id, None)
                        self._queue_meta.pop(task_id, None)
                        self._writer.forget(task_id)
        return dropped

    def close(
        self,
        *,
        reason: str = "controller closed",
        timeout: float | None = None,
        close_store: bool = False,
    ) -> list[TaskOutcome]:
        """Stop everything held here and wait for it: queued tasks end ``stopped`` without their
        body ever running (R4); running ones get their graceful window.

        Returns the outcomes; raises `TimeoutError` if some task did not finish in `timeout`.
        """
        with self._lock:
            if self._closed:
                return []
            self._closing = True
            runs = list(self._runs.values())
        self._pipelines.stop_all(reason)
        for run in runs:
            run.stop(reason, actor=self.owner)
        deadline = None if timeout is None else time.monotonic() + timeout
        outcomes = []
        try:
            for run in runs:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                outcomes.append(run.wait(left))
        finally:
            with self._lock:
                self._closed = True
                timer, self._tick_timer = self._tick_timer, None
            if timer is not None:
                timer.cancel()
            self._poller.stop()
            self._writer.close(flush=True)
            if close_store:
                self.store.close()
        return outcomes

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
