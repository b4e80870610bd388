"""Durable work from the shell: ``submit`` enqueues, ``worker`` serves, ``nodes`` lists.

``submit`` writes a durable task by name (its ``--arg`` values converted by the task
function's annotations when the task module can be imported, else as JSON) and
prints its id; with ``--wait`` it waits for a worker to end it, as ``run`` does.
``worker`` registers the tasks of a module and serves them until a signal; then it
stops claiming, lets what runs finish within ``--grace`` seconds, and stops the rest
(``stopped``, or ``lost`` for a body that will not stop).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from chongming_cli._args import (
    ENQUEUE_ARG_NAMES,
    checked_task_id,
    convert_args,
    parse_arg_value,
    split_args,
)
from chongming_cli._commands import Console
from chongming_cli._exit import EXIT_FAILED, EXIT_OK, EXIT_TASK_NOT_SUCCEEDED, CliError
from chongming_cli._hints import suggest
from chongming_cli._holders import holder_gone
from chongming_cli._loading import check_task_args, load_task_module, task_function
from chongming_cli._numbers import whole_number
from chongming_cli._output import (
    format_outcome,
    format_time,
    outcome_document,
    render_rows,
    write_json,
)
from chongming_cli._session import NodeOptions, open_controller
from chongming_cli._stores import open_store
from chongming_cli._when import parse_moment
from chongming_core import InMemoryTaskStore, StoreError, TaskStatus, TaskStore, WorkerRecord
from chongming_runtime import (
    Controller,
    Job,
    ProcessExecutor,
    TaskOutcome,
    TaskRun,
    active_by_worker,
    describe_buckets,
    format_elapsed,
    printable,
    worker_process_gone,
)

__all__ = ["cmd_nodes", "cmd_submit", "cmd_worker"]

#: How often `worker` and `submit --wait` look at received signals.
_TICK = 0.1


# ==================================================================== submit
def _kwargs(args: argparse.Namespace, console: Console) -> tuple[dict[str, Any], bool]:
    """The task's keyword arguments: by its annotations when its module imports, else JSON;
    and whether the module imports. Decided on a controller of its own, in memory, before
    the store is opened: a bad ``--arg`` writes nothing, not even a new empty store."""
    raw = split_args(args.arg, reserved=ENQUEUE_ARG_NAMES)
    if args.tasks is None:
        if raw:
            console.note(
                "note: no --tasks MODULE, so --arg values are read as JSON (text when not "
                "JSON); pass --tasks to convert them by the task's annotations"
            )
        return {key: parse_arg_value(text) for key, text in raw.items()}, False
    checking = Controller(store=InMemoryTaskStore(), owner="chongming-task-submit")
    try:
        try:
            load_task_module(checking, args.tasks)
        except CliError as exc:
            console.note(f"note: {exc.message}; --arg values are read as JSON (text when not JSON)")
            return {key: parse_arg_value(text) for key, text in raw.items()}, False
        fn = task_function(checking, args.task, args.tasks)  # one-line error if absent
        kwargs = convert_args(fn, raw, task=args.task, stored=True)
        check_task_args(args.task, fn, kwargs)
        return kwargs, True
    finally:
        checking.close(close_store=True)


def _due(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    if args.at is None:
        if args.delay:
            try:  # before the store is opened: a mistake writes nothing
                datetime.now(UTC) + timedelta(seconds=args.delay)
            except OverflowError:
                raise CliError(
                    f"--delay {args.delay:g}s puts the task past the year 9999, the last time "
                    "a store keeps; pass a shorter delay"
                ) from None
        return {"delay": args.delay}
    try:
        moment, local = parse_moment(args.at)
    except ValueError as exc:
        raise CliError(f"--at: {exc}") from None
    if local:
        console.note(
            f"note: --at {args.at} names no offset: taken as this machine's local time "
            f"({moment.isoformat()}), i.e. {format_time(moment)}"
        )
    return {"run_at": moment}


def cmd_submit(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Enqueue a durable task by name; print its id (with --wait: its outcome, exit 0 or 3)."""
    if args.timeout is not None and not args.wait:
        raise CliError("--timeout is how long --wait waits: add --wait, or drop --timeout")
    due = _due(args, console)
    if args.priority is not None and not -(2**63) <= args.priority < 2**63:
        raise CliError(  # before the store is opened: a mistake writes nothing
            f"--priority {args.priority} is out of range: stores keep it as a 64-bit integer "
            f"({-(2**63)} to {2**63 - 1})"
        )
    task_id = checked_task_id(args.task_id)
    kwargs, loaded = _kwargs(args, console)
    with open_controller(node, create=True, noted=console.note) as controller:
        if loaded:  # its description, tags and attempt budget are written with the task
            load_task_module(controller, args.tasks)
        # one Job: its keyword arguments travel as a dict, never as keywords of the call
        # (a parameter may be called `name`, `tags`, `delay`...)
        (task_id,) = controller.enqueue_many(
            args.task,
            [Job(task_id=task_id, **kwargs)],
            label=args.label,
            tags=args.tag,
            priority=args.priority,
            bucket_key=args.bucket_key,
            **due,
        )
        if not args.wait:
            if args.json:
                write_json(console.out, {"task_id": task_id})
            else:
                console.say(task_id)
            return EXIT_OK
        console.note(
            f"enqueued task {printable(repr(task_id))} ({printable(args.task)}); waiting for a "
            f"worker to run it (Ctrl-C stops the waiting, not the task)"
        )
        outcome = _wait(controller, task_id, args.timeout, node, console)
    if args.json:
        write_json(console.out, outcome_document(outcome))
    else:
        console.say(format_outcome(outcome, console.palette))
    return EXIT_OK if outcome.ok else EXIT_TASK_NOT_SUCCEEDED


def _wait(
    controller: Controller,
    task_id: str,
    timeout: float | None,
    node: NodeOptions,
    console: Console,
) -> TaskOutcome:
    deadline = None if timeout is None else time.monotonic() + timeout
    follow = suggest(node, "status", task_id)
    warned = False
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise CliError(
                    f"task {printable(repr(task_id))} did not end within {timeout:g}s (it is "
                    f"{_state_of(controller, task_id)}); nothing was changed; follow it with: "
                    f"{follow}"
                )
            try:
                return controller.wait(task_id, 1.0 if left is None else min(1.0, left))
            except TimeoutError:
                pass
            if not warned:  # said once: a frozen worker may come back and renew its lease
                snapshot = controller.get(task_id)
                gone = None if snapshot is None else holder_gone(controller, snapshot)
                if snapshot is not None and gone is not None:
                    warned = True
                    console.note(
                        f"task {printable(repr(task_id))} is {snapshot.status.value}, but "
                        f"{gone}: nobody ends it until {suggest(node, 'reconcile')} marks it "
                        "lost (then `retry` queues it again); still waiting"
                    )
    except KeyboardInterrupt:
        raise CliError(
            f"interrupted: stopped waiting; task {printable(repr(task_id))} "
            f"{_where_it_is(controller, task_id)}, and nothing was changed; follow it with: "
            f"{follow}"
        ) from None


def _state_of(controller: Controller, task_id: str) -> str:
    """``queued: no worker serves 'x'``, ``running``: the status the store holds, and why a
    queued one waits when that is known."""
    snapshot = controller.get(task_id)
    if snapshot is None:
        return "unknown"
    why = controller.waiting_reasons([snapshot]).get(task_id)
    return snapshot.status.value if why is None else f"{snapshot.status.value}: {why}"


def _where_it_is(controller: Controller, task_id: str) -> str:
    """What the store says of an enqueued task, for a wait given up: ``is queued, waiting
    for a worker`` / ``is running, held by 'w-1'``; only what was read."""
    try:
        snapshot = controller.get(task_id)
    except (Exception, KeyboardInterrupt):  # a second Ctrl-C, or a store gone meanwhile
        snapshot = None
    if snapshot is None:
        return "is in the store"
    now = controller.clock.now()
    owner = snapshot.lease_owner
    held = owner is not None and snapshot.lease_until is not None and snapshot.lease_until > now
    if snapshot.status is TaskStatus.QUEUED and not held:
        return "is queued in the store, waiting for a worker"
    state = f"is {snapshot.status.value} in the store"
    return f"{state}, held by {printable(repr(owner))}" if held else state


# ==================================================================== worker
#: A copy of the first signal within this many seconds is the same request delivered
#: twice (GNU `timeout` relays its SIGTERM to the child and to the whole process group),
#: not a second one: no person sends two signals that close together.
_SAME_SIGNAL_WITHIN = 0.1


class _Signals:
    """Counts SIGINT/SIGTERM; the second one ends the process at once."""

    def __init__(self) -> None:
        self.first: str | None = None
        self.first_at = 0.0
        self.received = threading.Event()
        self.owner: str = ""

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        now = time.monotonic()
        if self.first is None:
            self.first, self.first_at = name, now
            self.received.set()
            return
        if name == self.first and now - self.first_at < _SAME_SIGNAL_WITHIN:
            return  # the first one, delivered again
        # written with os.write: the interrupted code may hold the lock of sys.stderr
        os.write(
            2,
            (
                f"chongming-task: received {name} again: exiting at once (exit 1); what "
                f"{self.owner} still ran keeps its lease until it runs out, then reconcile "
                "marks it lost\n"
            ).encode(errors="backslashreplace"),
        )
        os._exit(EXIT_FAILED)

    @contextmanager
    def installed(self) -> Iterator[_Signals]:
        previous = {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _limits(items: Sequence[str]) -> dict[str, int]:
    limits: dict[str, int] = {}
    for item in items:
        tag, sep, count = item.partition("=")
        tag = tag.strip()
        if not sep or not tag:
            raise CliError(f"--fleet-limit {item!r}: write TAG=N, e.g. --fleet-limit gpu=4")
        if tag in limits:
            raise CliError(f"--fleet-limit {tag}=... is given twice; give each tag's limit once")
        try:
            limits[tag] = whole_number(count)
        except ValueError:
            raise CliError(
                f"--fleet-limit {item!r}: {count!r} is not a whole number; write e.g. "
                f"--fleet-limit {tag}=4"
            ) from None
        if limits[tag] < 0:
            raise CliError(f"--fleet-limit {item!r}: the limit must be >= 0")
    return limits


def _stop_claiming(controller: Controller) -> None:
    """Stop claiming new work while the runs held here go on."""
    controller.stop_serving()


#: Runs the drain does not wait for: a paused one cannot end while it stays paused, and
#: one waiting to retry is handed back to the queue by the close. (A queued one is about
#: to start: a slot was free when it was claimed, or its retry just came due.)
_NOT_WAITED_FOR = frozenset({TaskStatus.PAUSED, TaskStatus.RETRY_WAIT})


def _drain(runs: list[TaskRun], grace: float) -> list[TaskRun]:
    """Wait up to `grace` seconds for `runs` to end; returns those still unfinished.

    The wait ends early when only runs it need not wait for are left (`_NOT_WAITED_FOR`;
    one that moves on meanwhile, resumed or retried, is waited for again)."""
    deadline = time.monotonic() + grace
    left_over = [run for run in runs if not run.done]
    while time.monotonic() < deadline:
        moving = [run for run in left_over if run.status not in _NOT_WAITED_FOR]
        if not moving:
            break
        with suppress(TimeoutError):
            moving[0].wait(min(_TICK, max(0.0, deadline - time.monotonic())))
        left_over = [run for run in left_over if not run.done]
    return left_over


#: Held runs that no attempt runs: the close hands them back to the queue (D207).
_HANDED_BACK = frozenset({TaskStatus.RETRY_WAIT, TaskStatus.QUEUED})


def _shown(runs: list[TaskRun]) -> str:
    more = f" and {len(runs) - 10} more" if len(runs) > 10 else ""
    return ", ".join(printable(run.task_id) for run in runs[:10]) + more


def _left_over_notes(left_over: list[TaskRun]) -> list[str]:
    """What the worker says of the runs still held after the grace: those it hands back
    to the queue (no attempt runs: waiting to retry, D207), and those it stops."""
    waiting = [run for run in left_over if run.status in _HANDED_BACK]
    stopped = [run for run in left_over if run.status not in _HANDED_BACK]
    notes = []
    if waiting:
        notes.append(
            f"handing back {len(waiting)} task(s) that run no attempt (waiting to retry, or "
            f"to start) to the queue; any worker runs the next attempt when it is due: "
            f"{_shown(waiting)}"
        )
    if stopped:
        paused = sum(1 for run in stopped if run.status is TaskStatus.PAUSED)
        if paused:
            why = f"{paused} paused, so {'they' if paused > 1 else 'it'} cannot finish"
            notes.append(f"stopping {len(stopped)} task(s) not finished ({why}): {_shown(stopped)}")
        else:
            notes.append(f"stopping {len(stopped)} task(s) still running: {_shown(stopped)}")
    return notes


def _registers_tasks(module: str) -> None:
    """Load `module` into a controller of its own, in memory: a module that does not import
    or registers nothing is reported (one line) before the store is opened or created."""
    checking = Controller(store=InMemoryTaskStore(), owner="chongming-task-worker")
    try:
        load_task_module(checking, module)
    finally:
        checking.close(close_store=True)


def cmd_worker(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """Serve the tasks of a module until SIGTERM or Ctrl-C; then drain and exit 0."""
    fleet = _limits(args.fleet_limit)
    _registers_tasks(args.tasks)  # a module that cannot serve: before any store is made
    signals = _Signals()
    with signals.installed():
        store = open_store(node.location, create=True, noted=console.note)
        try:
            controller = Controller(
                store=store,
                owner=node.owner,
                num_buckets=node.num_buckets,
                owned_buckets=node.owned_buckets,
                max_parallel=args.max_parallel,
                fleet_limits=fleet,
                executor=ProcessExecutor() if args.executor == "process" else None,
            )
        except BaseException:
            store.close()
            raise
        signals.owner = controller.owner
        try:
            names = load_task_module(controller, args.tasks)
            if signals.first is None:
                controller.serve()
                owned = controller.owned_buckets
                buckets = "every bucket" if owned is None else f"buckets {describe_buckets(owned)}"
                console.note(
                    f"worker {printable(controller.owner)} serves {', '.join(names)} "
                    f"({buckets}, up to {args.max_parallel} at once"
                    f"{', each in a child process' if args.executor == 'process' else ''}) from "
                    f"{node.location.label}; stop it with Ctrl-C or SIGTERM (a second one "
                    "stops at once)"
                )
                while not signals.received.wait(_TICK):
                    pass  # a bounded wait: the main thread runs the signal handler
            received = signals.first
            console.note(
                f"received {received}: no new claims; running tasks get {args.grace:g}s to "
                f"finish, then {controller.graceful_stop:g}s to stop"
            )
            _stop_claiming(controller)
            left_over = _drain(controller.runs(), args.grace)
            for line in _left_over_notes(left_over):
                console.note(line)
            outcomes = controller.close(
                reason=f"chongming-task worker received {received}",
                timeout=controller.graceful_stop + 30.0,
            )
            stored = _stored_statuses(controller.store, outcomes)
        finally:
            controller.close(close_store=True)
    summary, differences = ended_summary(outcomes, stored)
    console.note(
        f"worker {printable(controller.owner)} stopped; the tasks it held ended: {summary}"
    )
    for line in differences:
        console.note(line)
    return EXIT_OK


def _stored_statuses(store: TaskStore, outcomes: Sequence[TaskOutcome]) -> dict[str, TaskStatus]:
    """The status the store holds of each task in `outcomes` (those it could read)."""
    found: dict[str, TaskStatus] = {}
    for outcome in outcomes:
        try:
            snapshot = store.get(outcome.task_id)
        except StoreError:
            continue  # the store is down: the summary says what this worker saw
        if snapshot is not None:
            found[outcome.task_id] = snapshot.status
    return found


def ended_summary(
    outcomes: Sequence[TaskOutcome], stored: Mapping[str, TaskStatus]
) -> tuple[str, list[str]]:
    """How the tasks a worker held ended, counted by the status the store holds (the
    truth every other process reads), and a line for each task that ended otherwise here:
    a worker frozen past its lease finds, when it wakes, that `reconcile` marked its task
    ``lost``; it stops the body, but the store's ``lost`` stands."""
    ended: dict[str, int] = {}
    differences: list[str] = []
    for outcome in outcomes:
        status = stored.get(outcome.task_id, outcome.status)
        # unfinished in the store: marked lost while this worker was frozen, queued again
        # and claimed by another worker, which holds it now
        if status.is_terminal:
            key = status.value
        elif status is TaskStatus.QUEUED:  # handed back (D207), or queued again by reconcile
            key = "queued again"
        else:
            key = f"{status.value} under another worker"
        ended[key] = ended.get(key, 0) + 1
        if status is not outcome.status:
            differences.append(
                f"task {printable(repr(outcome.task_id))} ended {outcome.status.value} here, "
                f"but the store holds {status.value}: another process wrote it first "
                "(its record wins)"
            )
    summary = ", ".join(f"{n} {status}" for status, n in sorted(ended.items())) or "none held"
    return summary, differences


# ==================================================================== nodes
def _capacity_text(capacity: Any) -> str:
    parts = []
    if capacity.get("max_parallel") is not None:
        parts.append(f"max_parallel={capacity['max_parallel']}")
    for key in ("limits", "fleet_limits"):
        for tag, n in sorted((capacity.get(key) or {}).items()):
            parts.append(f"{'fleet:' if key == 'fleet_limits' else ''}{tag}={n}")
    return " ".join(parts) or "-"


def _worker_document(worker: WorkerRecord, now: datetime, active: int) -> dict[str, Any]:
    return {
        "owner": worker.owner,
        "host": worker.host,
        "pid": worker.pid,
        "buckets": None if worker.buckets is None else list(worker.buckets),
        "names": list(worker.names),
        "capacity": dict(worker.capacity),
        "started_at": worker.started_at.isoformat(),
        "last_seen": worker.last_seen.isoformat(),
        "lease_until": worker.lease_until.isoformat(),
        "live": worker.is_live(now),
        # a worker of this host whose process no longer runs, its lease not ended yet
        "process_gone": worker_process_gone(worker),
        "active": active,
    }


def _state_text(worker: WorkerRecord, now: datetime) -> str:
    """``live``, ``expired``, or ``gone`` for a worker of this host whose process no
    longer runs though its lease has not ended (it renews nothing any more)."""
    if not worker.is_live(now):
        return "expired"
    return "gone" if worker_process_gone(worker) else "live"


def cmd_nodes(args: argparse.Namespace, node: NodeOptions, console: Console) -> int:
    """List the worker rows of the store, live or expired."""
    with open_controller(node) as controller:
        if not controller.store.supports_durable_work:
            raise CliError(
                f"{node.location.label} keeps no durable work, so it has no workers to list"
            )
        workers = controller.store.workers()
        now = controller.clock.now()
        active = active_by_worker(controller.store, workers)
    if args.json:
        write_json(console.out, [_worker_document(w, now, active[w.owner]) for w in workers])
        return EXIT_OK
    rows = [
        [
            w.owner,
            w.host,
            str(w.pid),
            "all" if w.buckets is None else describe_buckets(w.buckets),
            ", ".join(w.names) or "-",
            _capacity_text(w.capacity),
            str(active[w.owner]),
            format_time(w.started_at),
            f"{format_elapsed(max(0.0, (now - w.last_seen).total_seconds()))} ago",
            _state_text(w, now),
        ]
        for w in workers
    ]
    header = ("OWNER", "HOST", "PID", "BUCKETS", "TASKS", "CAPACITY", "ACTIVE", "STARTED",
              "LAST SEEN")  # fmt: skip
    console.say(render_rows((*header, "STATE"), rows, console.encoding))
    if not workers:
        console.note(
            "no worker has served this store yet; start one with: "
            f"{suggest(node, 'worker', '--tasks', 'MODULE')}"
        )
    return EXIT_OK
