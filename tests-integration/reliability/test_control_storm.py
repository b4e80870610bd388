"""A storm of controls in one process: two threads submit, stop, pause, resume and retry.

Each seed drives one `Controller` (three slots, a named resource of one unit,
retries with no backoff, a short graceful window) over a SQLite file with two
driver threads making random calls on random tasks while the bodies run: quick
ones, ones that checkpoint in a loop, ones that fail once, and stubborn ones
that ignore stops for longer than the graceful window. Then everything is
resumed and the controller closed.

Asserted afterwards, for every seed:

* never more bodies executing at once than slots, nor more than one holding the
  resource (an abandoned body counts until it returns: D54);
* a body runs only inside an attempt its run recorded as running, and a task
  stopped before it started never ran its body;
* every ``pause()`` that returned True is matched by a ``paused`` transition
  recorded after the call began;
* every trajectory is the contiguous chain 1..n of legal moves (the transition
  table) and ends terminal, and the store holds exactly that trajectory and the
  same final snapshot; no write failed;
* every ``lost`` end is a stubborn body's, with the kind ``lost``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from chongming_core import (
    ConcurrencyPolicy,
    ConfigurationError,
    FailureKind,
    FixedBackoff,
    InvalidTransition,
    RetryPolicy,
    TaskStatus,
)
from chongming_runtime import Controller, TaskContext
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import (
    TALLY,
    StormDriver,
    assert_calm,
    confirmed_pauses,
    drive,
    seeds,
    stored_as_told_violations,
    trajectory_violations,
    unconfirmed_pause_violations,
)

S = TaskStatus
SLOTS = 3
OPERATIONS = 60  # per driver thread
STUBBORN_FOR = 0.25  # seconds a stubborn body ignores stops (longer than the window)
GRACEFUL = 0.1
WAIT = 30.0
RETRY = RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))


class Bodies:
    """Counts the bodies executing, and what each saw when it began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executing: Counter[str] = Counter()  # task id -> bodies of it executing
        self.peak = 0
        self.gpu = 0
        self.gpu_peak = 0
        self.entries: list[tuple[str, int, S]] = []  # task id, attempt, status seen
        self.failed_once: set[str] = set()

    def _enter(self, ctx: TaskContext, run_status: S, gpu: bool) -> None:
        with self.lock:
            self.executing[ctx.task_id] += 1
            self.peak = max(self.peak, sum(self.executing.values()))
            if gpu:
                self.gpu += 1
                self.gpu_peak = max(self.gpu_peak, self.gpu)
            self.entries.append((ctx.task_id, ctx.attempt, run_status))

    def _leave(self, ctx: TaskContext, gpu: bool) -> None:
        with self.lock:
            self.executing[ctx.task_id] -= 1
            if gpu:
                self.gpu -= 1

    def body(self, ctx: TaskContext, plan: str, steps: int, gpu: bool) -> int:
        controller = CURRENT[0]
        run = controller.run(ctx.task_id)
        self._enter(ctx, run.status if run is not None else S.PENDING, gpu)
        try:
            if plan == "stubborn":
                time.sleep(STUBBORN_FOR)  # no checkpoint: a stop cannot reach it
                return 0
            for step in range(steps):
                ctx.checkpoint()
                time.sleep(0.001)  # a slice of work
                if plan == "fail-once" and step == steps // 2:
                    with self.lock:
                        first = ctx.task_id not in self.failed_once
                        self.failed_once.add(ctx.task_id)
                    if first:
                        raise ValueError("the first attempt fails")
            ctx.checkpoint()
            return steps
        finally:
            self._leave(ctx, gpu)


#: the controller of the seed being run (the body finds its run through it)
CURRENT: list[Controller] = []


class Driver(StormDriver):
    """Random calls on random tasks; remembers what each call answered."""

    operations = OPERATIONS
    actions = {  # noqa: RUF012 - a table read by run()
        "submit": 6,
        "stop": 3,
        "pause": 3,
        "resume": 3,
        "retry": 2,
        "wait": 1,
        "stop_all": 0.2,
    }

    def __init__(self, controller: Controller, seed: int, tasks: list[str], lock: threading.Lock):
        super().__init__(seed)
        self.controller = controller
        self.tasks = tasks
        self.tasks_lock = lock

    def _pick(self) -> str | None:
        with self.tasks_lock:
            return self.rng.choice(self.tasks) if self.tasks else None

    def _submit(self) -> None:
        plan = self.rng.choice(["quick", "loop", "loop", "fail-once", "stubborn"])
        gpu = self.rng.random() < 0.3
        run = self.controller.submit(
            "work",
            plan,
            1 if plan == "quick" else self.rng.randint(5, 40),
            gpu,
            tags=["gpu"] if gpu else [],
            priority=self.rng.randint(0, 2),
            retry=RETRY,
        )
        with self.tasks_lock:
            self.tasks.append(run.task_id)

    def step(self, action: str) -> None:
        if action == "submit":
            self._submit()
            return
        if action == "stop_all":
            self.controller.stop_all(reason="storm")
            return
        task_id = self._pick()
        if task_id is None:
            return
        controller = self.controller
        try:
            if action == "stop":
                controller.stop(task_id, reason="storm")
            elif action == "pause":
                run = controller.run(task_id)
                before = run.snapshot.status_version if run is not None else 0
                if controller.pause(task_id, timeout=0.05):
                    self.paused.append((task_id, before))
            elif action == "resume":
                controller.resume(task_id)
            elif action == "retry":
                controller.retry(task_id)
            else:
                with contextlib.suppress(TimeoutError):
                    controller.wait(task_id, timeout=0.01)
        except (ConfigurationError, InvalidTransition) as exc:  # retry of an unfinished or
            if action != "retry":  # succeeded task: a legal refusal
                self.errors.append(f"{action} {task_id}: {exc}")


def _storm(tmp_path: Path, seed: int) -> list[str]:
    bodies = Bodies()
    store = SqliteTaskStore(tmp_path / f"storm-{seed}.db")
    controller = Controller(
        store=store,
        concurrency=ConcurrencyPolicy(max_parallel=SLOTS, limits={"gpu": 1}),
        graceful_stop=GRACEFUL,
        pause_timeout=0.05,
    )
    CURRENT[:] = [controller]
    controller.register("work", bodies.body)
    tasks: list[str] = []
    lock = threading.Lock()
    drivers = [Driver(controller, seed * 10 + i, tasks, lock) for i in range(2)]
    found: list[str] = []
    try:
        found.extend(drive(drivers, WAIT))
        for run in controller.runs():
            if run.status in {S.PAUSED, S.PAUSING}:
                controller.resume(run.task_id)
        controller.close(reason="storm over", timeout=WAIT)
        # the stubborn bodies abandoned by close() return within STUBBORN_FOR
        deadline = time.monotonic() + WAIT
        while True:
            with bodies.lock:
                executing = sum(bodies.executing.values())
            if not executing or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if executing:
            found.append(f"{executing} bodies still executing {WAIT}s after close()")
        for driver in drivers:
            found.extend(driver.errors)
        found.extend(_checks(controller, store, bodies, drivers))
    finally:
        CURRENT.clear()
        store.close()
    TALLY.add(storm_tasks=len(tasks), storm_pauses=sum(len(d.paused) for d in drivers))
    return found


def _checks(
    controller: Controller, store: SqliteTaskStore, bodies: Bodies, drivers: list[Driver]
) -> list[str]:
    found: list[str] = []
    if bodies.peak > SLOTS:
        found.append(f"{bodies.peak} bodies executed at once with {SLOTS} slots")
    if bodies.gpu_peak > 1:
        found.append(f"{bodies.gpu_peak} bodies held the one gpu unit at once")
    if controller.persist_failures:
        found.append(f"writes failed: {controller.persist_failures}")
    runs = {run.task_id: run for run in controller.runs()}
    for task_id, attempt, seen in bodies.entries:
        run = runs[task_id]
        began = sum(1 for t in run.transitions if t.to_status is S.STARTING)
        if attempt < 1 or attempt > began:
            found.append(f"{task_id}: a body ran as attempt {attempt}, {began} attempts began")
        if seen not in {S.STARTING, S.RUNNING, S.STOPPING, S.PAUSING}:
            found.append(f"{task_id}: a body began while its run was {seen.value}")
    for run in runs.values():
        found.extend(trajectory_violations(run.snapshot, run.transitions))
        statuses = [t.to_status for t in run.transitions]
        if S.STARTING not in statuses and any(e[0] == run.task_id for e in bodies.entries):
            found.append(f"{run.task_id}: its body ran although it never started")
        outcome = run.outcome()
        if outcome.status is S.LOST:
            plan = run._args[0]
            if plan != "stubborn":
                found.append(f"{run.task_id}: a {plan} body ended lost")
            if outcome.failure is None or outcome.failure.kind is not FailureKind.LOST:
                found.append(f"{run.task_id}: lost without the kind lost")
        found.extend(stored_as_told_violations(store, run.snapshot, run.transitions))
    paused = confirmed_pauses(drivers)
    found.extend(unconfirmed_pause_violations(paused, lambda tid: runs[tid].transitions))
    return found


@pytest.mark.parametrize("seed", seeds(ci=6, soak_count=200))
def test_a_storm_of_controls_keeps_every_trajectory_and_every_limit(
    tmp_path: Path, seed: int
) -> None:
    assert_calm(_storm(tmp_path, seed))
