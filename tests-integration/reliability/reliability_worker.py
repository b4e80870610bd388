"""A worker process of the reliability suite, started by the tests as ``python THIS_FILE ...``.

Two roles:

``crash``
    Runs a seeded mix of tasks (short, long, failing, retry-waiting, paused, stopped,
    pipelines) under one `Controller` until the test kills it with SIGKILL. After every
    ``wait()`` returns, it appends what it observed to the report file (one JSON line,
    written with a single ``os.write`` so a kill never leaves half a line that claims
    anything): the suite then checks that everything reported finished is in the store
    exactly so (durable before told).

``start``
    Submits rounds of tasks whose body marks its beginning with a file and then
    checkpoints until the test creates that task's go file: the test reads the store
    from its own process while the body is held there, or kills this process then.

``serve``
    A worker of durable tasks: registers ``append`` (writes its task id and this
    worker's owner to the report, then returns), ``spin`` (checkpoints until
    stopped, and reports that it unwound) and ``gpu`` (tagged ``gpu``; marks its
    beginning and end, and holds until the file ``--gate`` exists when one is
    given), serves them from the shared store
    until the file ``--hold`` exists, then closes its controller and exits 0 (or until
    the test kills it).

``contend``
    One of several processes sharing one store: it submits, stops, pauses, resumes and
    queries its own and the other processes' tasks for a bounded time, records every
    exception a call raised, then closes its controller and reports the trajectories of
    the tasks it held.

All write only JSON lines: ``{"event": ..., ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from typing import Any

from chongming_core import (
    BucketPolicy,
    ConfigurationError,
    FixedBackoff,
    RetryPolicy,
    TaskCancelled,
    TaskSnapshot,
    TaskStore,
)
from chongming_runtime import Controller, Pipeline, PipelineRun, TaskOutcome, TaskRun

# ------------------------------------------------------------------ reporting


class Report:
    """Appends JSON lines to a file, one ``os.write`` per line (atomic for our sizes)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}, ensure_ascii=False) + "\n"
        with self._lock:
            os.write(self._fd, line.encode("utf-8"))

    def finished(self, snapshot: TaskSnapshot) -> None:
        self.emit(
            "finished",
            task_id=snapshot.task_id,
            status=snapshot.status.value,
            outcome=snapshot.outcome,
            failure_kind=None if snapshot.failure is None else snapshot.failure.kind.value,
            version=snapshot.status_version,
        )


def open_store(args: argparse.Namespace) -> TaskStore:
    """The store named on the command line."""
    if args.db:
        from chongming_store_sqlite import SqliteTaskStore

        return SqliteTaskStore(args.db)
    from chongming_store_postgres import PostgresTaskStore

    return PostgresTaskStore(args.dsn, schema=args.schema, max_size=4)


def close_both(controller: Controller, store: TaskStore, *, timeout: float) -> None:
    """Close `controller` (bounded; a no-op once it is closed), then `store`, even when that
    close failed: a role ends this way whether it returns or raises (a SIGKILL, which the
    tests send, runs none of it)."""
    try:
        controller.close(timeout=timeout)
    finally:
        store.close()


# ------------------------------------------------------------------ task bodies


def short(ctx: Any, n: int) -> dict[str, Any]:
    """A short task: a few checkpoints, then a value with CJK text."""
    for _ in range(3):
        ctx.checkpoint()
        time.sleep(0.005)
    return {"n": n, "text": "短任务-✓"}


def long(ctx: Any, steps: int) -> int:
    """A long task: `steps` checkpoints 20 ms apart, reporting progress."""
    for i in range(steps):
        ctx.checkpoint()
        ctx.progress(i + 1, total=steps, unit="step")
        time.sleep(0.02)
    return steps


def graceful(ctx: Any, steps: int) -> int:
    """Like `long`, but returns its count when stopped (a stop is a request, not a verdict)."""
    done = 0
    for _ in range(steps):
        try:
            ctx.checkpoint()
        except TaskCancelled:
            return done
        done += 1
        time.sleep(0.02)
    return done


def boom(ctx: Any, message: str) -> None:
    """Always fails."""
    ctx.checkpoint()
    raise ValueError(message)


def flaky(ctx: Any, key: str) -> str:
    """Fails its first attempt (so it waits in ``retry_wait``), then succeeds."""
    ctx.checkpoint()
    if ctx.attempt < 2:
        raise ConnectionError(f"transient failure of {key}")
    return key


def relay(ctx: Any, node: str) -> dict[str, Any]:
    """A pipeline node: passes on what its upstream nodes returned."""
    ctx.checkpoint()
    time.sleep(0.01)
    return {"node": node, "upstream": sorted(ctx.upstream)}


def register_all(controller: Controller) -> None:
    """Every task name the workers use."""
    controller.register("short", short)
    controller.register("long", long)
    controller.register("graceful", graceful)
    controller.register("boom", boom)
    controller.register(
        "flaky", flaky, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0.3))
    )
    controller.register("relay", relay)


def keys_for(buckets: list[int] | None, policy: BucketPolicy, count: int) -> list[str]:
    """`count` bucket keys whose buckets are in `buckets` (any key when None)."""
    if buckets is None:
        return [f"key-{i}" for i in range(count)]
    found: list[str] = []
    i = 0
    while len(found) < count:
        key = f"key-{i}"
        if policy.bucket_for(key) in buckets:
            found.append(key)
        i += 1
    return found


# ------------------------------------------------------------------ crash role


def crash(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    report = Report(args.report)
    buckets = (
        None if args.owned_buckets is None else [int(b) for b in args.owned_buckets.split(",")]
    )
    store = open_store(args)
    controller = Controller(
        store=store,
        owner=args.owner,
        max_parallel=3,
        num_buckets=args.num_buckets,
        owned_buckets=buckets,
        lease_ttl=args.lease_ttl,
        touch_interval=min(0.2, args.lease_ttl / 4),
        poll_interval=0.05,
        graceful_stop=0.5,
        pause_timeout=0.5,
    )
    try:
        register_all(controller)
        keys = iter(keys_for(buckets, controller.bucket_policy, 200))
        waiters: list[threading.Thread] = []

        def watch(run: TaskRun) -> None:
            def body() -> None:
                outcome: TaskOutcome = run.wait(60)
                report.finished(outcome.snapshot)

            thread = threading.Thread(target=body, daemon=True)
            thread.start()
            waiters.append(thread)

        def watch_pipeline(prun: PipelineRun) -> None:
            def body() -> None:
                outcome = prun.wait(60)
                for node in outcome.nodes.values():
                    report.finished(node.snapshot)

            thread = threading.Thread(target=body, daemon=True)
            thread.start()
            waiters.append(thread)

        def submit_one(i: int) -> TaskRun | None:
            kind = rng.choice(["short", "short", "long", "long", "graceful", "boom", "flaky"])
            key = next(keys)
            task_id = f"{args.owner}-{i}-{kind}"
            if kind == "short":
                run = controller.submit("short", i, task_id=task_id, bucket_key=key, label="短")
            elif kind in ("long", "graceful"):
                steps = rng.randint(5, 60)
                run = controller.submit(kind, steps, task_id=task_id, bucket_key=key)
            elif kind == "boom":
                run = controller.submit("boom", f"boom {i}", task_id=task_id, bucket_key=key)
            else:
                run = controller.submit("flaky", key, task_id=task_id, bucket_key=key)
            report.emit("submitted", task_id=task_id)
            watch(run)
            return run

        def submit_pipeline(i: int) -> None:
            pipeline = Pipeline(f"{args.owner}-p{i}")
            key = next(keys)
            first = pipeline.node("relay", node="extract", node_id="extract", bucket_key=key)
            mid = pipeline.node(
                "relay", node="transform", node_id="transform", depends_on=[first], bucket_key=key
            )
            if rng.random() < 0.3:
                pipeline.node(
                    "boom", "pipeline boom", node_id="break", depends_on=[mid], bucket_key=key
                )
            else:
                pipeline.node(
                    "relay", node="load", node_id="load", depends_on=[mid], bucket_key=key
                )
            watch_pipeline(controller.submit_pipeline(pipeline))

        runs: list[TaskRun] = []
        for i in range(args.tasks):
            if rng.random() < 0.15:
                submit_pipeline(i)
                continue
            run = submit_one(i)
            if run is not None:
                runs.append(run)
            if i == args.tasks // 2:
                # something is in the store when the test may kill us: non-terminal writes are
                # batched, and a loaded machine can leave the writer's thread unscheduled past
                # the kill (the store was then empty and nothing could be checked)
                controller.flush()
                report.emit("ready")
            if rng.random() < 0.3:
                time.sleep(rng.uniform(0, 0.05))
        hold = None
        if args.hold:
            # a task that runs until the test creates the hold file: this node is mid-run
            hold = controller.submit("graceful", 6000, task_id=f"{args.owner}-hold",
                                     bucket_key=next(keys))  # fmt: skip
            watch(hold)
        report.emit("ready")

        # controls while tasks run: pauses (some left paused a while), resumes and stops
        paused: list[TaskRun] = []
        for _ in range(rng.randint(2, 8)):
            time.sleep(rng.uniform(0.0, 0.15))
            run = rng.choice(runs)
            action = rng.random()
            if action < 0.4:
                if controller.pause(run.task_id, timeout=0.3):
                    paused.append(run)
            elif action < 0.7:
                controller.stop(run.task_id, reason="chaos stop / 混沌")
            elif paused:
                controller.resume(paused.pop(rng.randrange(len(paused))).task_id)
        time.sleep(rng.uniform(0.0, 0.5))
        for run in paused:
            controller.resume(run.task_id)
        if hold is not None:
            deadline = time.monotonic() + 60
            while not os.path.exists(args.hold) and time.monotonic() < deadline:
                time.sleep(0.02)
            controller.stop(hold.task_id, reason="released by the test")
        for thread in waiters:
            thread.join(60)
        report.emit("done", persist_failures=[f.error for f in controller.persist_failures])
    finally:
        close_both(controller, store, timeout=10)
    return 0


# ------------------------------------------------------------------ start role


def marked(ctx: Any, folder: str) -> str:
    """Creates ``<folder>/<task id>.began`` first thing, then checkpoints until
    ``<task id>.go`` exists there (bounded)."""
    base = os.path.join(folder, ctx.task_id)
    with open(base + ".began", "x", encoding="utf-8"):
        pass
    deadline = time.monotonic() + 60
    while not os.path.exists(base + ".go"):
        ctx.checkpoint()
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {base}.go within 60 s")
        time.sleep(0.002)
    return "went"


def start(args: argparse.Namespace) -> int:
    report = Report(args.report)
    store = open_store(args)
    controller = Controller(
        store=store,
        owner=args.owner,
        max_parallel=args.burst,
        lease_ttl=args.lease_ttl,
        poll_interval=0.02,
        graceful_stop=2.0,
    )
    try:
        controller.register("marked", marked)
        report.emit("ready")
        for round_ in range(args.tasks):
            # a round's tasks start at the same moment, each in its own slot
            runs = [
                controller.submit("marked", args.markers, task_id=f"start-{round_}-{i}")
                for i in range(args.burst)
            ]
            for run in runs:
                report.finished(run.wait(120).snapshot)
        report.emit("done", persist_failures=[f.error for f in controller.persist_failures])
    finally:
        close_both(controller, store, timeout=10)
    return 0


# ------------------------------------------------------------------ contention role


def contend(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    report = Report(args.report)
    store = open_store(args)
    controller = Controller(
        store=store,
        owner=args.owner,
        max_parallel=4,
        lease_ttl=30,
        touch_interval=0.1,
        poll_interval=0.05,
        graceful_stop=1.0,
        pause_timeout=0.3,
    )
    try:
        register_all(controller)
        calls = 0
        errors: list[str] = []
        sent: dict[str, int] = {"stop": 0, "pause": 0, "resume": 0}

        def call(what: str, fn: Any, *a: Any, **kw: Any) -> Any:
            nonlocal calls
            calls += 1
            try:
                return fn(*a, **kw)
            except ConfigurationError as exc:
                # a legal refusal (e.g. resume of a task that is no longer paused)
                return exc
            except Exception as exc:
                errors.append(f"{what}: {type(exc).__name__}: {exc}")
                return None

        deadline = time.monotonic() + args.duration
        i = 0
        while time.monotonic() < deadline:
            i += 1
            op = rng.random()
            if op < 0.3:
                kind = rng.choice(["graceful", "long", "short"])
                task_id = f"{args.owner}-{i}"
                arg = rng.randint(3, 40) if kind != "short" else i
                call("submit", controller.submit, kind, arg, task_id=task_id)
                continue
            found = call("list_tasks", controller.list_tasks, status=["queued", "running", "paused",
                         "pausing", "retry_wait"], limit=50)  # fmt: skip
            if not isinstance(found, list) or not found:
                continue
            target: TaskSnapshot = rng.choice(found)
            if op < 0.5:
                if call("stop", controller.stop, target.task_id, reason=f"by {args.owner}") is True:
                    sent["stop"] += 1
            elif op < 0.65:
                call("pause", controller.pause, target.task_id, timeout=0.2)
                sent["pause"] += 1
            elif op < 0.8:
                if call("resume", controller.resume, target.task_id) is True:
                    sent["resume"] += 1
            elif op < 0.9:
                call("get", controller.get, target.task_id)
                call("history", controller.history, target.task_id)
            else:
                call("stats", controller.stats)
            time.sleep(rng.uniform(0, 0.01))
        # resume what is still paused here, so close() can stop it (an in-place pause holds a body)
        for run in controller.runs():
            if not run.done:
                call("resume", run.resume)
        call("close", controller.close, timeout=20)
        for run in controller.runs():
            report.emit(
                "trajectory",
                task_id=run.task_id,
                status=run.status.value,
                transitions=[
                    [t.status_version, t.from_status.value, t.to_status.value, t.trigger, t.actor]
                    for t in run.transitions
                ],
            )
        report.emit(
            "summary",
            calls=calls,
            errors=errors,
            sent=sent,
            persist_failures=[f.error for f in controller.persist_failures],
        )
    finally:
        close_both(controller, store, timeout=20)
    return 0


# ------------------------------------------------------------------ serve role


def serve(args: argparse.Namespace) -> int:
    report = Report(args.report)
    store = open_store(args)
    owned = None
    if args.owned_buckets:
        low, high = (int(part) for part in args.owned_buckets.split("-"))
        owned = range(low, high + 1)
    controller = Controller(
        store=store,
        owner=args.owner,
        max_parallel=args.burst,
        lease_ttl=args.lease_ttl,
        poll_interval=0.02,
        bucket_policy=BucketPolicy(args.num_buckets),
        owned_buckets=owned,
        graceful_stop=2.0,
        fleet_limits={"gpu": args.fleet_gpu} if args.fleet_gpu is not None else None,
    )

    try:

        def append(ctx: Any, n: int) -> int:
            report.emit("ran", task_id=ctx.task_id, owner=args.owner, n=n)
            time.sleep(0.002)
            return n

        def gpu(ctx: Any) -> None:
            report.emit("began", task_id=ctx.task_id, owner=args.owner, at=time.time())
            while args.gate is not None and not os.path.exists(args.gate):
                ctx.checkpoint()
                time.sleep(0.005)
            time.sleep(0.05)
            report.emit("ended", task_id=ctx.task_id, owner=args.owner, at=time.time())

        def spin(ctx: Any) -> None:
            report.emit("spinning", task_id=ctx.task_id, owner=args.owner)
            try:
                while True:
                    ctx.checkpoint()
                    time.sleep(0.005)
            finally:  # a stop reached the body here (a checkpoint raised)
                report.emit("unwound", task_id=ctx.task_id, owner=args.owner)

        controller.register("append", append)
        controller.register("gpu", gpu, tags=["gpu"])
        controller.register("spin", spin)
        controller.serve()
        report.emit("ready", owner=args.owner, pid=os.getpid())
        assert args.hold is not None
        while not os.path.exists(args.hold):
            time.sleep(0.02)
        controller.close(timeout=30)
        report.emit("closed", owner=args.owner)
    finally:
        close_both(controller, store, timeout=30)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["crash", "contend", "start", "serve"])
    parser.add_argument("--db")
    parser.add_argument("--dsn")
    parser.add_argument("--schema", default="chongming")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--lease-ttl", type=float, default=1.0)
    parser.add_argument("--num-buckets", type=int, default=8)
    parser.add_argument("--owned-buckets")
    parser.add_argument("--tasks", type=int, default=14)
    parser.add_argument("--hold", help="run a task until this file exists")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--markers", help="where bodies of the start role mark their beginning")
    parser.add_argument("--burst", type=int, default=4, help="tasks per round (start role)")
    parser.add_argument("--fleet-gpu", type=int, help="fleet limit of the gpu tag (serve role)")
    parser.add_argument("--gate", help="gpu bodies hold until this file exists (serve role)")
    args = parser.parse_args(argv)
    if args.role == "crash":
        return crash(args)
    if args.role == "start":
        return start(args)
    if args.role == "serve":
        return serve(args)
    return contend(args)


if __name__ == "__main__":
    sys.exit(main())
