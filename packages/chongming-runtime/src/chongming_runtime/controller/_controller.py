"""`Controller`: one entry point for many tasks (guide §8).

The controller composes named collaborators, each with one job:

* `TaskRegistry`: the whitelist of task definitions (R10).
* `HeldRuns`: the runs of this process (`TaskRun` handles), one per task id.
* `Scheduler`: the ready queue, the capacity and the controller's lock; every run's
  admission callback, and the accounting of what each transition frees.
* `LeaseKeeper` (with its `Lease`): the touch timer — progress, heartbeats, lease
  renewals.
* `StoreWriter`: the only code that writes to the store: transitions are written
  through (batched; terminal ones durably before ``wait()`` returns), side-path
  fields and leases through ``touch`` on the timer.
* `CommandPoller`: claims the command rows for tasks held here.
* `PipelineCoordinator`: pipelines, through the narrow `PipelineHost` it is handed.
* `Controls` and `Queries`: what the public controls and queries do.

Each `TaskRun` is the only writer of its task's status (through its `StateMachine`);
the controller observes every transition as a listener (`on_transition`), writes it
through and has the scheduler account for it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from chongming_core import (
    SYSTEM_CLOCK,
    BucketPolicy,
    ClaimStart,
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
    Transition,
)
from chongming_runtime.controller._controls import Controls, still_unfinished
from chongming_runtime.controller._enqueue import Enqueuer, Job, as_job
from chongming_runtime.controller._hand_back import hand_back
from chongming_runtime.controller._held_runs import HeldRuns
from chongming_runtime.controller._lease_keeper import Lease, LeaseKeeper
from chongming_runtime.controller._ownership import BucketOwnership
from chongming_runtime.controller._pipeline_host import ControllerHost
from chongming_runtime.controller._queries import Queries, statuses
from chongming_runtime.controller._reconcile import ReconcileReport, reconcile_store
from chongming_runtime.controller._registry import RegisteredTask, TaskRegistry
from chongming_runtime.controller._scheduler import Scheduler
from chongming_runtime.controller._serving import WorkServer
from chongming_runtime.controller._settings import (
    check_artifact_dir,
    check_bucket_limit,
    check_executor,
    check_owner,
    check_store,
    concurrency_of,
    fleet_limits_of,
    policy_of,
    refuse_while_a_child_imports_main,
    touch_interval_of,
)
from chongming_runtime.controller._stats import ControllerStats
from chongming_runtime.controller._task_options import TaskOptions
from chongming_runtime.controller._waiting_reason import waiting_reasons
from chongming_runtime.executors._base import Executor
from chongming_runtime.executors.thread import ThreadExecutor
from chongming_runtime.persistence._commands import CommandPoller
from chongming_runtime.persistence._start_gate import StartGate
from chongming_runtime.persistence._writer import PersistFailure, StoreWriter
from chongming_runtime.pipeline._coordinator import PipelineCoordinator, PipelineRun
from chongming_runtime.pipeline._definition import Pipeline
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._setup import RunSetup, pause_window, seconds, wait_timeout
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.support._ids import random_hex12
from chongming_runtime.support._text import (
    check_reason,
    refuse_unstorable,
)
from chongming_runtime.support._thread_cache import run_elsewhere

__all__ = ["Controller", "default_owner"]

_S = TaskStatus
_STARTING = TaskStatus.STARTING
_RUNNING = TaskStatus.RUNNING
_QUEUED = TaskStatus.QUEUED
#: A held task in these runs no attempt: a durable one is handed back when closing (D207).
_NOT_BEGUN = frozenset({TaskStatus.QUEUED, TaskStatus.RETRY_WAIT})
#: The snapshot a submission's is made from (`TaskSnapshot.evolve` of it with every field a
#: submission sets): the default of every other field, as ``TaskSnapshot(...)`` gives it.
_SUBMITTED = TaskSnapshot(task_id="submitted", name="submitted")
#: distinct run setups a controller keeps (more: per-call options made afresh each time)
_SETUPS_KEPT = 256
_log = logging.getLogger("chongming_task.controller")

#: The reason of the stop of a run whose task another process wrote meanwhile (D177).
MOVED_ON_REASON = (
    "another process wrote this task in the store while this node held it (reconcile "
    "marked it lost while this node was frozen past its lease, say); its record stands, "
    "and the body here was stopped"
)


def default_owner() -> str:
    """``host:pid`` — who this process is, as written into leases and commands."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _arguments(snapshot: TaskSnapshot) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments stored with a durable task."""
    arguments = snapshot.arguments or {}
    return tuple(arguments.get("args", ())), dict(arguments.get("kwargs", {}))


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
        touch_interval: how often progress, heartbeats and leases are flushed (R18);
            default 1 s, or ``lease_ttl / 3`` when that is shorter, so any `lease_ttl`
            alone is accepted (D85). A longer one given explicitly is refused.
        poll_interval: how often the command channel is polled.
        artifact_dir: root of the per-attempt artifact folders.
        serve: claim and run durable tasks of the registered names from the store
            (see `serve`); the default only runs what is submitted here.
        fleet_limits: units per tag for the whole store: the durable tasks holding a tag
            that are starting, running or claimed never exceed it across every worker
            (enforced by the store at each claim).
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
        serve: bool = False,
        fleet_limits: Mapping[str, int] | None = None,
    ) -> None:
        refuse_while_a_child_imports_main()
        check_store(store)
        concurrency = concurrency_of(concurrency, max_parallel)
        check_bucket_limit(max_parallel_per_bucket)
        bucket_policy = policy_of(bucket_policy, num_buckets)
        touch_interval = touch_interval_of(lease_ttl, touch_interval, poll_interval)
        check_executor(executor)
        check_artifact_dir(artifact_dir)
        graceful_stop = seconds("graceful_stop", graceful_stop)  # checked before any submit
        self.store: TaskStore = store if store is not None else InMemoryTaskStore()
        self.owner = check_owner(owner if owner is not None else default_owner(), owner)
        self.concurrency = concurrency
        self.bucket_policy = bucket_policy
        self._ownership = BucketOwnership(bucket_policy, owned_buckets)
        self.max_parallel_per_bucket = max_parallel_per_bucket
        self.lease_ttl = float(lease_ttl)
        self.graceful_stop = graceful_stop
        self.pause_timeout = pause_window(pause_timeout, "pause_timeout")
        self.touch_interval = touch_interval
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._artifact_dir = artifact_dir
        self._options = TaskOptions(
            priority=concurrency.priority,
            ownership=self._ownership,
            executor=executor if executor is not None else ThreadExecutor(),
        )

        self._registry = TaskRegistry()
        runs: dict[str, TaskRun] = {}
        self._scheduler = Scheduler(
            concurrency.max_parallel,
            limits=concurrency.limits,
            max_per_bucket=max_parallel_per_bucket,
            find=runs.get,
            actor=self.owner,
        )
        self._lock = self._scheduler.lock
        self._held = HeldRuns(self._lock, runs)
        self._closing = False
        self._closed = False
        self._lease = Lease(self.owner, self.clock, self.lease_ttl)
        self._writer = StoreWriter(
            self.store, clock=self.clock, decorate=self._lease.stamp, moved_on=self._moved_on
        )
        self._leases = LeaseKeeper(
            self._lease,
            clock=self.clock,
            interval=self.touch_interval,
            writer=self._writer,
            runs=self._held.unfinished,
            executing=self._executing_runs,
        )
        # a body begins once its task's row is in the store; an in-memory store lives and
        # dies with this process, so its bodies need not wait for it (D105)
        self._start_gate = None if self.store.writes_in_memory else StartGate(self._writer)
        # what runs made the same way share (see `_setup_for`)
        self._setups: dict[tuple[Any, ...], RunSetup] = {}
        gate = self._start_gate
        self._gates = None if gate is None else (gate.hand_off, gate.carry)
        self._listening: tuple[Controller] = (self,)
        self._pipelines = PipelineCoordinator(
            ControllerHost(
                owner=self.owner,
                clock=self.clock,
                registry=self._registry,
                options=self._options,
                make_run=self._make_run,
                writer=self._writer,
                refuse_if_closing=self._refuse_if_closing,
            )
        )
        self._leases.add_holder(self._pipelines)
        self._controls = Controls(
            held=self._held,
            pipelines=self._pipelines,
            store=self.store,
            writer=self._writer,
            owner=self.owner,
            clock=self.clock,
            lease_ttl=self.lease_ttl,
            make_run=self._make_run,
            get=self.get,
        )
        self._queries = Queries(
            held=self._held,
            pipelines=self._pipelines,
            store=self.store,
            writer=self._writer,
            stamp=self._lease.stamp,
        )
        self._poller = CommandPoller(
            self.store,
            owner=self.owner,
            handler=self._controls.handle_command,
            clock=self.clock,
            buckets=self._ownership.query_buckets(),
            interval=poll_interval,
            lease_seconds=max(1.0, self.lease_ttl),
            on_error=self._writer.note,  # the operator reads one list (D67)
        )
        self._enqueuer = Enqueuer(
            store=self.store,
            registry=self._registry,
            bucket_policy=bucket_policy,
            clock=self.clock,
            owner=self.owner,
            default_priority=concurrency.priority,
        )
        self._fleet_limits = fleet_limits_of(fleet_limits)
        self._poll_interval = poll_interval
        self._server: WorkServer | None = None
        if serve:
            self.serve()
        if not self._ownership.owns_all_buckets or owned_buckets is not None:
            # a node that declared ownership polls from the start: a stop for one of its
            # queued tasks must not wait until this node happens to submit something
            self._poller.start()

    def __repr__(self) -> str:
        return (
            f"Controller(owner={self.owner!r}, store={self.store!r}, "
            f"max_parallel={self.concurrency.max_parallel}, runs={len(self._held)})"
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
        /,
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
        self._refuse_if_closing()
        options = self._options.resolve(
            registered, label=label, tags=tags, priority=priority, bucket_key=bucket_key,
            retry=retry, timeout=timeout, executor=executor,
        )  # fmt: skip
        task_id = self._new_task_id(name, task_id)
        if not self._leases.ticking:
            self._leases.start()  # renews the lease first: before the first tick it is stale
        now = self.clock.now()
        # every field was validated above (StateMachine.create would validate them again and
        # copy the tag set, which a registered task shares between all its submissions)
        machine = StateMachine(
            _SUBMITTED.evolve(  # what TaskSnapshot(...) makes, without its frozen stores
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
                # stamps nothing (see `Lease.stamp`)
                lease_owner=self.owner,
                lease_until=self._lease.until,
            ),
            clock=self.clock,
        )
        # no write of its own: the first transition the run tells (queued, or stopped when a
        # stop reaches it first) is the write that creates its row (D170)
        run = self._make_run(registered.fn, machine, args, kwargs, options)
        if not self._poller.started:
            self._poller.start()
        run.start_unless_ended(queued_at=now)  # a stop_all() may have reached it first
        return run

    # ================================================================ durable work
    def enqueue(
        self,
        name: str,
        /,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        tags: Iterable[str] | None = None,
        priority: int | None = None,
        bucket_key: str | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
        **kwargs: Any,
    ) -> str:
        """Write a durable task for any serving worker to claim; returns its id.

        Nothing runs here, and `name` need not be registered here: the worker that
        registered it runs it. The task is in the store, ``queued`` and held by nobody,
        when this returns. `delay` (seconds or a timedelta) or `run_at` (an aware
        datetime) keep it from being claimed before then.

        Raises:
            ConfigurationError: an argument that is not JSON (named, with what to pass
                instead), an id that exists, bad options, or a store that keeps no
                durable tasks; nothing was written.
        """
        job = Job(*args, task_id=task_id, **kwargs)
        return self._enqueuer.enqueue(
            name,
            [job],
            label=label,
            tags=tags,
            priority=priority,
            bucket_key=bucket_key,
            delay=delay,
            run_at=run_at,
        )[0]

    def enqueue_many(
        self,
        name: str,
        items: Iterable[Job | tuple[Any, ...] | list[Any] | Mapping[str, Any]],
        *,
        label: str | None = None,
        tags: Iterable[str] | None = None,
        priority: int | None = None,
        bucket_key: str | None = None,
        delay: float | timedelta | None = None,
        run_at: datetime | None = None,
    ) -> list[str]:
        """`enqueue` many tasks of `name` in one write; returns their ids in order.

        Each item is a tuple of positional arguments, a dict of keyword arguments, or a
        `Job` (arguments plus its own ``task_id``, ``label``, ``bucket_key`` or
        ``priority``); the other options apply to every task. An item refused (arguments
        that are not JSON, a bad option) refuses the whole call before anything is written.

        Raises:
            ConfigurationError: a refused item, or a store that keeps no durable tasks.
                When some ``task_id`` already exists, those tasks are not written and the
                others are: the error's ``written`` lists their ids (``taken`` the others).
        """
        given: object = items
        if isinstance(given, str | bytes) or not isinstance(given, Iterable):
            raise ConfigurationError(
                f"enqueue_many() takes an iterable of items (tuples, dicts or Job), got "
                f"{type(given).__name__}"
            )
        jobs = [as_job(item, index) for index, item in enumerate(items)]
        return self._enqueuer.enqueue(
            name,
            jobs,
            label=label,
            tags=tags,
            priority=priority,
            bucket_key=bucket_key,
            delay=delay,
            run_at=run_at,
            many=True,
        )

    def serve(self) -> None:
        """Claim durable tasks of the registered names in the owned buckets, while there is
        room, and run them here until `close()` (returns at once; idempotent).

        Raises:
            ConfigurationError: the store keeps no durable tasks, or this controller is
                closed.
        """
        if not self.store.supports_durable_work:
            raise ConfigurationError(
                f"{type(self.store).__name__} does not keep durable tasks: a worker needs a "
                "store that workers share (SqliteTaskStore or PostgresTaskStore)"
            )
        self._refuse_if_closing()
        if self._server is not None and self._server.stopped:
            raise ConfigurationError(
                "this controller stopped serving (stop_serving); create a new controller to "
                "serve again"
            )
        if self._server is None:
            limits = self.concurrency.limits
            self._server = WorkServer(
                store=self.store,
                owner=self.owner,
                clock=self.clock,
                lease_ttl=self.lease_ttl,
                names=self._registry.names,
                default_tags=self._registry.tags_by_name,
                buckets=self._ownership.query_buckets(),
                room=self._scheduler.claim_room,
                take=self._take_claimed,
                start=self._claim_start,
                fleet_limits=self._fleet_limits,
                capacity={
                    "max_parallel": self.concurrency.max_parallel,
                    "limits": dict(limits) if limits else {},
                    "max_parallel_per_bucket": self.max_parallel_per_bucket,
                    "fleet_limits": dict(self._fleet_limits),
                    # what its buckets are counted in: a producer counting otherwise puts
                    # tasks in buckets no worker owns (the waiting reason says so)
                    "num_buckets": self.bucket_policy.num_buckets,
                },
                interval=self._poll_interval,
                note=self._writer.note,
            )
        if not self._leases.ticking:
            self._leases.start()
        self._poller.start()
        self._server.start()

    def stop_serving(self) -> None:
        """Claim nothing more; the tasks held here go on (a worker's graceful shutdown:
        stop claiming, let what runs finish, then `close`). This worker's row shows it
        gone at once. Idempotent; `serve()` is not possible again afterwards."""
        server = self._server
        if server is not None:
            server.stop()

    @property
    def serving(self) -> bool:
        """True while this controller claims durable work (`serve`)."""
        return self._server is not None and self._server.serving

    def _claimed_machine(
        self, snapshot: TaskSnapshot
    ) -> tuple[RegisteredTask, dict[str, Any], StateMachine]:
        """The registration, options and state machine of a durable task claimed here,
        leased (``queued``) by a store that does not start what it claims."""
        registered = self._registry.get(snapshot.name)
        options = self._options.for_claimed(registered, snapshot)
        # its trajectory so far stays in the store: `history()` reads it there (D149)
        machine = StateMachine(
            snapshot.evolve(
                max_attempts=max(options["retry"].max_attempts, snapshot.attempt + 1),
                description=registered.description,
                tags=options["tags"],
            ),
            clock=self.clock,
        )
        return registered, options, machine

    def _claim_start(self) -> ClaimStart:
        """How a claim starts the tasks it takes for this controller (D165, D189): per
        registered name its retry budget and description, and this controller's
        executor. The store writes each task's ``starting`` with its lease, in the claim,
        so its body begins as soon as the claim returns."""
        return ClaimStart(executor=self._options.executor.name, plans=self._registry.start_plans())

    def _take_claimed(self, snapshot: TaskSnapshot) -> None:
        """Make a durable task this controller claimed a run of its own, and start it: one
        the claim started (`_claim_start`) holds its slot and carries its body at once;
        one only leased (a store that does not start what it claims) is admitted and moves
        to ``starting`` itself."""
        task_id = snapshot.task_id
        live = self._held.get(task_id)
        if live is not None and self._finished_run(task_id) is None:
            # refused before the writer adopts the claimed version: adopted, it would let
            # the live run's stale writes pass its fence and take the row backwards
            self._moved_on(task_id)
            raise ConfigurationError(
                f"task {task_id!r} is claimed while a run of it is live here: the store's "
                "record moved on without it, and that run is stopped"
            )
        if snapshot.status is _QUEUED:
            registered, options, machine = self._claimed_machine(snapshot)
            run = self._make_run(registered.fn, machine, *_arguments(snapshot), options,
                                 claimed=True, replacing=self._finished_run(task_id))  # fmt: skip
            self._writer.adopt(task_id, snapshot.status_version)
            run.start_unless_ended()
            return
        if snapshot.status is not _STARTING or snapshot.lease_owner != self.owner:
            raise ConfigurationError(
                f"the claim returned task {task_id!r} {snapshot.status.value} at version "
                f"{snapshot.status_version} leased to {snapshot.lease_owner!r}, not as this "
                "controller starts it"
            )
        registered = self._registry.get(snapshot.name)
        options = self._options.for_claimed(registered, snapshot)
        # its trajectory before the start stays in the store: `history()` reads it there
        machine = StateMachine(snapshot, (ClaimStart.transition_of(snapshot),), clock=self.clock)
        # in this order, before any other thread can reach the run: its next write is a
        # compare-and-set under the claimed start (its `starting` is not written again: the
        # run's writes begin after the transitions it was made with, `TaskRun.take_write`),
        # and it holds its slot before a stop could account for it
        self._writer.adopt(task_id, snapshot.status_version)
        self._scheduler.hold(task_id, snapshot.tags, snapshot.bucket)
        try:
            run = self._make_run(registered.fn, machine, *_arguments(snapshot), options,
                                 claimed=True, claim_started=True,
                                 replacing=self._finished_run(task_id))  # fmt: skip
        except BaseException:
            self._scheduler.unhold(task_id)
            raise
        run.launch_claimed()

    def _finished_run(self, task_id: str) -> TaskRun | None:
        """The finished run held here under `task_id`, which a claim of the task queued again
        (`requeue`) replaces; None when there is none (a live one is refused by the hold)."""
        run = self._held.get(task_id)
        # ended (its end may still be on its way to its waiters: the store holds it already,
        # or the task could not have been queued again)
        return run if run is not None and (run.done or run.status.is_terminal) else None

    def _new_task_id(self, name: str, task_id: str | None) -> str:
        if task_id is None:
            return f"{name}-{random_hex12()}"  # 48 random bits
        if not isinstance(task_id, str) or not task_id.strip():
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        refuse_unstorable("task_id", task_id)
        held = task_id in self._held
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
        claimed: bool = False,
        claim_started: bool = False,
    ) -> TaskRun:
        run = TaskRun(
            fn,
            args,
            kwargs,
            upstream=upstream,
            machine=machine,
            listeners=self._listening,
            setup=self._setup_for(fn, options, claimed=claimed),
        )
        # a submit or retry that passed the first check while close() took its list of
        # runs would make one that close() never waits for
        check = None if pipeline_node else self._refuse_if_closing
        if claim_started:
            run.take_claimed_start()
            # the claim started it: it is taken even while closing (close() joins the
            # serving thread before it takes its list of runs)
            check = None
        self._held.add(run, replacing=replacing, check=check)
        return run

    def _setup_for(
        self, fn: Callable[..., Any], options: Mapping[str, Any], *, claimed: bool
    ) -> RunSetup:
        """The setup of a run of `fn` with `options`: one per distinct body, executor, retry
        policy, timeout and windows, shared by every run made so (a claimed task's setup has
        a launch gate of its own, and is kept apart)."""
        executor, retry, timeout = options["executor"], options["retry"], options["timeout"]
        # identities: the setup holds each of these objects, so no id is reused while cached
        key = (id(fn), id(executor), id(retry), id(timeout), self.graceful_stop,
               self.pause_timeout, claimed)  # fmt: skip
        setup = self._setups.get(key)
        if setup is None:
            setup = RunSetup.make(
                fn,
                executor=executor,
                retry=retry,
                timeout=timeout,
                graceful_stop=self.graceful_stop,
                pause_timeout=self.pause_timeout,
                clock=self.clock,
                artifact_dir=self._artifact_dir,
                actor=self.owner,
                admission=self._scheduler.admit,
                stored_outcome=self.store.stored_outcome,  # the store decides a result (D68)
                launch_gate=self._launch_gate(executor, claimed=claimed),
            )
            if len(self._setups) >= _SETUPS_KEPT:  # per-call options made afresh each time
                self._setups.clear()
            self._setups[key] = setup
        return setup

    def _executing_runs(self) -> list[TaskRun]:
        """The runs holding an execution slot (what a touch that renews nothing writes)."""
        found = (self._held.get(task_id) for task_id in self._scheduler.holding())
        return [run for run in found if run is not None]

    def _refuse_if_closing(self) -> None:
        """Raise the error of a submit after `close()` began (checked again under the lock
        that orders a submission against close(): D45)."""
        if self._closing:
            raise ConfigurationError("this controller is closed; create a new one to submit")

    # ================================================================ controls
    def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        """Request a stop; never blocks.

        Returns True when a stop was requested (applied here, or sent as a command to the
        holder), False when there is no such task or it has already finished. A stop of a
        task held elsewhere whose earlier stop command its holder has not applied yet sends
        no second one: that one stands (`pending_command` shows it).
        """
        return self._controls.stop(task_id, reason)

    def pending_command(self, task_id: str, action: CommandAction | str) -> Command | None:
        """The oldest command of `action` (``stop``, ``pause``, ``resume``) sent to the
        holder of `task_id` that the holder has not applied yet; None when there is none.

        Raises:
            ConfigurationError: `action` is not a command's action.
        """
        try:
            known = CommandAction(action)
        except ValueError:
            choices = ", ".join(a.value for a in CommandAction)
            raise ConfigurationError(
                f"pending_command() takes an action, one of {choices}; got {action!r}"
            ) from None
        return self._controls.pending(task_id, known)

    def pause(self, task_id: str, *, timeout: float | None = None) -> bool:
        """Request a pause. True only once the task is confirmed ``paused``.

        Across processes there is no receipt: the command is sent and False
        ("not confirmed") is returned — poll `get()` to observe the result.
        """
        return self._controls.pause(task_id, timeout)

    def resume(self, task_id: str) -> bool:
        """Withdraw a pause. True when applied here or accepted for the holder (R14)."""
        return self._controls.resume(task_id)

    def stop_all(self, *, reason: str | None = None) -> int:
        """Request a stop of every unfinished task held here; returns how many requests were sent
        (not how many have stopped: follow with `wait_all`)."""
        return self._controls.stop_all(reason)

    def requeue(self, task_id: str, *, reason: str | None = None) -> TaskSnapshot:
        """Queue a finished durable task again for the workers, from any process.

        A failed, stopped, cancelled or lost durable task goes back to ``queued`` in the
        store, held by nobody and due now, its history kept (``retry`` in its trajectory;
        a spent attempt budget is raised by one, as `StateMachine.retry` does); any worker
        that serves its name and owns its bucket claims it. Returns the stored snapshot.

        Raises:
            ConfigurationError: no such task; not a durable one (`retry` it where it is
                held); not finished, or succeeded; a pipeline node; or another process
                changed it meanwhile (nothing was written).
        """
        return self._controls.requeue(task_id, reason)

    def retry(self, task_id: str, *, reason: str | None = None) -> TaskRun:
        """Run a failed/stopped/cancelled/lost task of this process again under the same id (R6).

        Raises:
            ConfigurationError: the task is not held here (its function and arguments are
                only known where it was submitted), it is not finished, or it is a pipeline
                node (submit the pipeline again).
        """
        return self._controls.retry(task_id, reason)

    def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        """Block until the task is terminal; raises `TimeoutError` (changing nothing) after
        `timeout`. Works for tasks of other processes too (by polling the store)."""
        return self._controls.wait(task_id, timeout)

    def wait_all(self, timeout: float | None = None) -> list[TaskOutcome]:
        """Wait for every task held here; raises `TimeoutError` when some are still unfinished."""
        return self._controls.wait_all(timeout)

    # ================================================================ queries
    def runs(self) -> list[TaskRun]:
        """Every run handle held by this process (continue to control them by id)."""
        return self._held.all()

    def run(self, task_id: str) -> TaskRun | None:
        """The run handle of `task_id` if this process holds it."""
        return self._held.get(task_id)

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The task's snapshot (live for tasks held here, else from the store); None if unknown."""
        return self._queries.get(task_id)

    def history(self, task_id: str) -> list[Transition]:
        """The task's whole trajectory.

        From the store, a `Listing`: a stored transition that cannot be decoded is left
        out and named in its ``unreadable``.
        """
        return self._queries.history(task_id)

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
        """Tasks matching the filters, from the store (so other processes' tasks too).

        Returns a `Listing` (a list): a stored task that cannot be decoded is left out
        and named in its ``unreadable``, so one damaged row never hides the others.
        """
        query = TaskQuery(
            statuses=statuses(status),
            name_prefix=name_prefix,
            tag=tag,
            bucket=bucket,
            buckets=None if buckets is None else frozenset(buckets),
            search=search,
            limit=limit,
            newest_first=newest_first,
        )
        return self._queries.list_tasks(query)

    def stats(self) -> ControllerStats:
        """Per-status counts of every task in the store, plus ``unfinished``; a task whose
        stored status cannot be read is counted under none and named in ``unreadable``."""
        return self._queries.stats()

    def waiting_reasons(
        self, snapshots: Sequence[TaskSnapshot], *, now: datetime | None = None
    ) -> dict[str, str]:
        """Why each durable task among `snapshots` that is queued and held by nobody waits,
        by task id: ``no worker serves 'x'``, ``no live worker owns bucket N``, ``due at
        TIME`` or ``fleet limit 'gpu' is full (4 of 4 held)``, judged from the store's worker
        rows (and, for fleet limits, the tasks holding a slot) at `now` (the clock's now by
        default). A task any live worker could claim now is left out, as is every other
        task."""
        return waiting_reasons(self.store, snapshots, self.clock.now() if now is None else now)

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket (used to decide which node takes which buckets); from the
        store, a `Counts` whose ``unreadable`` names tasks whose bucket cannot be read."""
        return self._queries.bucket_counts()

    @property
    def active_count(self) -> int:
        """Tasks really holding an execution slot in this process (paused in place included)."""
        return self._scheduler.active

    @property
    def queued_count(self) -> int:
        """Tasks of this process waiting for a slot (status ``queued``)."""
        return sum(1 for r in self._held.all() if r.status is _S.QUEUED)

    def active_in_bucket(self, bucket: int) -> int:
        """Slots held by tasks of `bucket` in this process."""
        return self._scheduler.active_in_bucket(bucket)

    def _launch_gate(
        self, executor: Executor, *, claimed: bool = False
    ) -> Callable[[str, int, Callable[[], None]], None] | None:
        """What a run on `executor` launches its attempts through (D105; none in memory).

        A durable task claimed here launches only if its start went in under the claimed
        version: another writer that changed it first (a stop from another process of a
        task it found waiting) decides, and the run is stopped before its body begins."""
        threads = type(executor) is ThreadExecutor
        if not claimed:
            gates = self._gates
            # a thread's launch only hands the body to another thread: the flush makes it
            return None if gates is None else gates[0] if threads else gates[1]
        # in memory too: the start of a claimed task must have won against any other
        # writer of the row before its body begins
        gate = self._start_gate if self._start_gate is not None else StartGate(self._writer)
        opened = gate.hand_off if threads else gate.carry

        def launch_if_still_ours(task_id: str, version: int, launch: Callable[[], None]) -> None:
            def checked() -> None:
                if self._writer.diverged(task_id):
                    run = self._held.get(task_id)
                    if run is not None:
                        run.stop(
                            "another process changed the task in the store before it started "
                            "here; the store's record stands",
                            actor=self.owner,
                        )
                launch()

            opened(task_id, version, checked)

        return launch_if_still_ours

    def _moved_on(self, task_id: str) -> None:
        """The writer found that another process wrote `task_id` in the store while this
        node held it: `reconcile` marked it lost while this node was frozen past its lease,
        say. That record stands, and the run here is stopped, so its body does not go on
        as though nothing happened (D177). Called on the flushing thread, which must not
        wait for the scheduler's lock: the stop is asked on another thread."""
        try:
            run_elsewhere(partial(self._stop_moved_on, task_id), "chongming-moved-on")
        except Exception:  # no thread to be had (a process limit, shutdown)
            _log.exception("could not stop task %r, which another process wrote", task_id)

    def _stop_moved_on(self, task_id: str) -> None:
        run = self._held.get(task_id)
        if run is not None:
            run.stop(MOVED_ON_REASON, actor=self.owner)
        else:  # a pipeline node not released yet, or nothing held here any more
            self._pipelines.stop_unreleased(task_id, MOVED_ON_REASON)

    # ================================================================ pipelines
    def submit_pipeline(self, pipeline: Pipeline) -> PipelineRun:
        """Start a DAG of registered tasks; returns a handle with ``wait(timeout)``."""
        if not isinstance(pipeline, Pipeline):
            raise ConfigurationError(f"submit_pipeline() takes a Pipeline, got {pipeline!r}")
        self._poller.start()
        self._leases.start()
        return self._pipelines.submit(pipeline)

    # ================================================================ run listener
    #: As a run listener it never blocks a report, except in durable store writes, which
    #: pass a kept attempt on by themselves (see `_thread_cache.hand_over`).
    reports_quickly = True
    #: Its writer takes a run's state when it flushes (`StoreWriter.record_run`): a run
    #: builds no snapshot to tell it of a non-terminal transition.
    reads_snapshots = False
    #: A move to queued, starting or running only has the writer take the run's state: the
    #: run queues no event for it (`MovePuller`), it calls `on_moved`.
    pulls_moves = True

    def on_moved(self, run: TaskRun) -> None:
        """Have the writer take the run's state and new transitions at its next flush (a
        `MovePuller`): nothing is accounted on a move to queued, starting or running (see
        `on_transition`). A move the store holds already (the `starting` a claim wrote) has
        nothing to take: no pull is queued for it, and the writer is not woken."""
        if run.has_unwritten():
            self._writer.record_run(run)

    def on_transition(
        self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot | None
    ) -> None:
        """Write the transition through and have the scheduler account for it (a
        `RunListener`).

        A finished task gives its slot back before its terminal write is made durable, so
        the next task starts while the write commits (together with those of the other
        tasks finishing meanwhile: group commit). The finishing thread does not wait for
        the commit either: the run holds ``wait()`` and ``done`` until the writer reports
        the write durable (pipeline nodes are written synchronously, before their
        downstream nodes are released).
        """
        status = transition.to_status
        terminal = status.is_terminal
        task_id = transition.task_id
        if not terminal:
            self._writer.record_run(run)
        if status is _STARTING or status is _RUNNING:
            return  # dispatched by the scheduler: out of the ready queue, holding its slot
        if status is _QUEUED:
            # nothing to account: a run reaches queued holding no slot (from pending,
            # blocked, paused before its start or retry_wait), and its admission queues it;
            # if it has moved on since, that move is told and accounted by itself (D38)
            return
        in_pipeline = run.scheduling_snapshot().pipeline_id is not None
        self._scheduler.account(run, task_id, ended=terminal, keep_one=terminal and not in_pipeline)
        server = self._server
        if server is not None:
            server.slot_freed()
        if not terminal:
            return
        assert snapshot is not None  # a run tells every listener its end's snapshot
        if in_pipeline:
            try:
                self._writer.record_run(run, durable=True)
            finally:  # whatever the write did, what follows the node is decided
                self._pipelines.node_settled(snapshot)
        else:  # this thread goes on at once; wait() returns once the write is durable
            self._writer.record_run(run, on_durable=run.hold_finish())

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        """Progress is flushed on the touch timer, never per call (R18)."""

    # ================================================================ the store
    def flush(self) -> bool:
        """Write everything pending to the store now; True when the store took it all."""
        return self._writer.flush()

    @property
    def persist_failures(self) -> list[PersistFailure]:
        """The latest store failures (at most 20). Tasks are unaffected; the store catches up.

        Besides failed writes: a failed command poll, a command row that could not be read,
        whatever a round of a background thread raised, a pipeline step that failed (D67).
        """
        return self._writer.failures

    # ================================================================ recovery and housekeeping
    def reconcile(self, *, dry_run: bool = False) -> ReconcileReport:
        """Mark tasks of this node's buckets whose supervisor vanished as lost (guide §8.11)."""
        mine = self._held.unfinished_ids() | self._pipelines.held_ids()
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
            # the store is read outside the lock: scheduling goes on meanwhile
            gone = [run for run in self._held.finished() if self.store.get(run.task_id) is None]
            with self._lock:  # a submit under a dropped id writes after the forget
                for run in gone:
                    if self._held.drop(run):  # not retried under its id meanwhile
                        self._writer.forget(run.task_id)
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

        A durable task claimed here that no attempt runs (waiting to retry, or claimed and
        not started) is not stopped: it goes back to the queue, due when it was due, for
        any worker (D207).

        Returns the outcomes of every run held here (pipeline nodes released while closing
        included); raises `TimeoutError` if some task did not finish in `timeout`. A task
        another process wrote while this node held it (D177), or handed back, is reported
        as the store holds it.
        """
        timeout = wait_timeout(timeout, "close timeout")  # checked before anything stops
        check_reason(reason)
        with self._lock:
            if self._closed:
                return []
            self._closing = True
            server = self._server
        if server is not None:  # no claim after this: what it took is in the list below
            server.stop()
        with self._lock:
            self._scheduler.close(reason)
            runs = self._held.all()
        self._leases.stop()  # no touch, no renewal while closing
        self._pipelines.stop_all(reason)
        self._hand_back_waiting(runs, reason)
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
                        outcomes.append(self._controls.outcome_of(run, run.wait(left)))
                    except TimeoutError:
                        then = "each was asked to stop, and the controller is closed"
                        raise TimeoutError(still_unfinished(list(seen), timeout, then)) from None
                # made meanwhile: a node released as its upstream finished
                runs = [run for run in self._held.all() if run not in seen]
        finally:
            with self._lock:
                self._closed = True
            self._poller.stop()
            self._writer.close(flush=True)
            if close_store:
                self.store.close()
        return outcomes

    def _hand_back_waiting(self, runs: list[TaskRun], reason: str) -> None:
        """Give the durable tasks held here that no attempt runs (waiting to retry, or
        claimed and not started) back to the queue, rather than stopping them (D207). Call
        once nothing starts any more (the scheduler is closed)."""
        # withdrawn: none of them begins an attempt from now on (one being dispatched, or
        # admitted before the scheduler closed, is not withdrawn: it stops as usual)
        waiting = [r for r in runs if r.status in _NOT_BEGUN and r.snapshot.durable]
        withdrawn = [r for r in waiting if r.withdraw()]
        if not withdrawn:
            return
        try:
            self._writer.flush()  # the store holds what this process wrote of them
            for run in withdrawn:
                if hand_back(
                    self.store, run.task_id, owner=self.owner, reason=reason, clock=self.clock
                ):
                    # the store's record is the task's now: its stop below is not written
                    self._writer.release(run.task_id)
        except Exception:  # a store's own bug: those not handed back are stopped as usual
            _log.exception("could not hand back the tasks waiting to retry")

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
