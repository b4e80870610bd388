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
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from chongming_core import (
    SYSTEM_CLOCK,
    BucketPolicy,
    Clock,
    ConcurrencyPolicy,
    ConfigurationError,
    InMemoryTaskStore,
    RetryPolicy,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Timeout,
    TimerHandle,
    validate_tags,
)
from chongming_core.backend import safe_repr
from chongming_runtime.controller._capacity import Capacity, ReadyQueue
from chongming_runtime.controller._controls import ControllerControls, still_unfinished
from chongming_runtime.controller._flow import ControllerFlow
from chongming_runtime.controller._ownership import BucketOwnership
from chongming_runtime.controller._queries import ControllerQueries
from chongming_runtime.controller._reconcile import ReconcileReport, reconcile_store
from chongming_runtime.controller._registry import RegisteredTask, TaskRegistry
from chongming_runtime.controller._scheduling_lock import SchedulingLock
from chongming_runtime.executors._base import Executor
from chongming_runtime.executors.thread import ThreadExecutor
from chongming_runtime.persistence._commands import CommandPoller
from chongming_runtime.persistence._start_gate import StartGate
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.pipeline._coordinator import PipelineCoordinator, PipelineRun
from chongming_runtime.pipeline._definition import Pipeline
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._pausing import pause_window
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.support._ids import random_hex12
from chongming_runtime.support._text import refuse_unstorable

__all__ = ["Controller"]

_S = TaskStatus
_log = logging.getLogger("chongming_task.controller")
_ONE_ATTEMPT = RetryPolicy(max_attempts=1)


#: A lease spans at least this many touch intervals: it is renewed on the touch timer.
_RENEWALS_PER_LEASE = 3
#: The touch interval when `lease_ttl` leaves room for it (R18).
_DEFAULT_TOUCH_INTERVAL = 1.0


def default_touch_interval(lease_ttl: float) -> float:
    """The touch interval a `lease_ttl` gets when none is given: 1 s (R18), or a third of
    the lease when that is shorter, so the lease is always renewed in time (D85)."""
    return min(_DEFAULT_TOUCH_INTERVAL, lease_ttl / _RENEWALS_PER_LEASE)


def default_owner() -> str:
    """``host:pid`` — who this process is, as written into leases and commands."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Controller(ControllerControls, ControllerQueries, ControllerFlow):
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
        touch_interval: how often progress, heartbeats and leases are flushed (R18);
            default 1 s, or ``lease_ttl / 3`` when that is shorter, so any `lease_ttl`
            alone is accepted (D85). A longer one given explicitly is refused.
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
        touch_interval: float | None = None,
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
            if value is None and name == "touch_interval":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigurationError(f"{name} must be > 0 seconds, got {value!r}")
        if touch_interval is None:
            touch_interval = default_touch_interval(lease_ttl)
        elif touch_interval * _RENEWALS_PER_LEASE > lease_ttl:
            raise ConfigurationError(
                f"lease_ttl ({lease_ttl:g} s) must be at least 3 x touch_interval "
                f"({touch_interval:g} s): leases are renewed on the touch timer, so a shorter "
                "lease could expire while its holder is alive, and reconcile() would call its "
                f"tasks lost; raise lease_ttl, lower touch_interval to at most "
                f"{lease_ttl / _RENEWALS_PER_LEASE:g} s, or leave touch_interval out (its "
                "default follows lease_ttl)"
            )
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
        refuse_unstorable("owner", self.owner)  # written in every lease, transition, command
        self.concurrency = concurrency
        self.bucket_policy = bucket_policy
        self._ownership = BucketOwnership(bucket_policy, owned_buckets)
        self.max_parallel_per_bucket = max_parallel_per_bucket
        self.lease_ttl = float(lease_ttl)
        self.graceful_stop = graceful_stop
        self.pause_timeout = pause_window(pause_timeout, "pause_timeout")
        self.touch_interval = float(touch_interval)
        self._executor: Executor = executor if executor is not None else ThreadExecutor()
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._artifact_dir = artifact_dir

        self._lock = SchedulingLock(self._start_here, self._start_elsewhere)
        self._registry = TaskRegistry()
        self._runs: dict[str, TaskRun] = {}
        self._capacity = Capacity(
            concurrency.max_parallel,
            limits=concurrency.limits,
            max_per_bucket=max_parallel_per_bucket,
        )
        self._ready = ReadyQueue()
        self._closing = False
        self._close_reason = "controller closed"
        self._closed = False
        self._lease_until = self.clock.now() + timedelta(seconds=self.lease_ttl)
        self._next_renewal = self.clock.monotonic() + self.lease_ttl / 3
        self._ticking = False
        self._writer = StoreWriter(self.store, clock=self.clock, decorate=self._stamp_lease)
        # a body begins once its task's row is in the store; an in-memory store lives and
        # dies with this process, so its bodies need not wait for it (D105)
        self._start_gate = None if self.store.writes_in_memory else StartGate(self._writer)
        self._admission = self._admit  # one bound method shared by every run
        self._listening: tuple[Controller] = (self,)
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
            on_error=self._writer.note,  # the operator reads one list (D67)
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
        if not self._ticking:
            self._ensure_tick()  # renews the lease first: before the first tick it is stale
        now = self.clock.now()
        # every field was validated above (StateMachine.create would validate them again and
        # copy the tag set, which a registered task shares between all its submissions)
        machine = StateMachine(
            TaskSnapshot(
                task_id=task_id,
                name=name,
                max_attempts=options["retry"].max_attempts,
                label=label,
                description=registered.description,
                tags=options["tags"],
                priority=options["priority"],
                bucket=options["bucket"],
                bucket_key=bucket_key,
                created_at=now,
                updated_at=now,
                # the lease it is written with: carried by every transition, so the writer
                # stamps nothing (see `_stamp_lease`)
                lease_owner=self.owner,
                lease_until=self._lease_until,
            ),
            clock=self.clock,
        )
        run = self._make_run(registered.fn, machine, args, kwargs, options)
        self._writer.record(machine.snapshot)
        if not self._poller.started:
            self._poller.start()
        run._start_unless_ended()  # a stop_all() may have reached it first
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
        self._refuse_if_closing()
        if label is not None and not isinstance(label, str):
            raise ConfigurationError(f"label must be a string, got {label!r}")
        refuse_unstorable("label", label)
        refuse_unstorable("bucket_key", bucket_key)
        for tag in tags if tags is not None and not isinstance(tags, str) else ():
            refuse_unstorable("tag", tag)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ConfigurationError(f"priority must be an integer, got {priority!r}")
        if priority is not None and not -(2**63) <= priority < 2**63:
            raise ConfigurationError(
                f"priority {safe_repr(priority)} is out of range: stores keep it as a 64-bit "
                f"integer ({-(2**63)} to {2**63 - 1})"
            )
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
            "retry": retry or registered.retry or _ONE_ATTEMPT,
            "timeout": timeout or registered.timeout,
            "executor": executor or self._executor,
        }

    def _new_task_id(self, name: str, task_id: str | None) -> str:
        if task_id is None:
            return f"{name}-{random_hex12()}"  # 48 random bits
        if not isinstance(task_id, str) or not task_id.strip():
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        refuse_unstorable("task_id", task_id)
        with self._lock:
            held = task_id in self._runs
        # a pipeline's own lock is never taken under the controller's (its node releases
        # take them the other way round)
        if held or self._pipelines.holds(task_id) or self.store.get(task_id) is not None:
            raise ConfigurationError(
                f"task id {task_id!r} already exists; ids are never reused (the old trajectory "
                "would be overwritten) — submit under a new id"
            )
        return task_id

    def _make_run(
        self,
        fn: Callable[..., Any],
        machine: StateMachine,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        *,
        upstream: Mapping[str, Any] | None = None,
        replacing: TaskRun | None = None,
        pipeline_node: bool = False,
    ) -> TaskRun:
        run = TaskRun(
            fn,
            args,
            kwargs,
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
            listeners=self._listening,
            admission=self._admission,
            stored_outcome=self.store.stored_outcome,  # the store decides a result (D68)
            launch_gate=self._launch_gate(options["executor"]),
        )
        task_id = machine.task_id
        with self._lock:
            if not pipeline_node:
                # a submit or retry that passed the first check while close() took its
                # list of runs would make one that close() never waits for
                self._refuse_if_closing()
            # one run per id: a second submit under the same explicit id, or a second retry
            # of the same finished run, loses the race here instead of orphaning a run
            if self._runs.get(task_id) is not replacing:
                raise ConfigurationError(
                    f"task id {task_id!r} is already taken by a run held here; ids are never "
                    "reused — submit under a new id"
                    if replacing is None
                    else f"task {task_id!r} was retried already; wait for that run instead"
                )
            self._runs[task_id] = run
        return run

    def _launch_gate(
        self, executor: Executor
    ) -> Callable[[str, int, Callable[[], None]], None] | None:
        """What a run on `executor` launches its attempts through (D105; none in memory)."""
        gate = self._start_gate
        if gate is None:
            return None
        # a thread's launch only hands the body to another thread: the flush makes it
        return gate.hand_off if type(executor) is ThreadExecutor else gate.carry

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
                finished = [(t, r) for t, r in self._runs.items() if r.done]
            # the store is read outside the lock: scheduling goes on meanwhile
            gone = [(t, r) for t, r in finished if self.store.get(t) is None]
            with self._lock:
                for task_id, run in gone:
                    if self._runs.get(task_id) is run:  # not retried under its id meanwhile
                        del self._runs[task_id]
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

        Returns the outcomes of every run held here (pipeline nodes released while closing
        included); raises `TimeoutError` if some task did not finish in `timeout`.
        """
        with self._lock:
            if self._closed:
                return []
            self._closing = True
            self._close_reason = reason
            runs = list(self._runs.values())
        self._pipelines.stop_all(reason)
        deadline = None if timeout is None else time.monotonic() + timeout
        outcomes = []
        seen: set[TaskRun] = set()  # by identity: a run compares equal only to itself
        try:
            while runs:
                seen.update(runs)
                for run in runs:
                    run.stop(reason, actor=self.owner)
                for run in runs:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    try:
                        outcomes.append(run.wait(left))
                    except TimeoutError:
                        then = "each was asked to stop, and the controller is closed"
                        raise TimeoutError(still_unfinished(list(seen), timeout, then)) from None
                with self._lock:  # made meanwhile: a node released as its upstream finished
                    runs = [run for run in self._runs.values() if run not in seen]
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
