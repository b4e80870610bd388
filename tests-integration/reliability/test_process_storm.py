"""A storm of controls on `ProcessExecutor` tasks (guide §7.4): stop, pause, resume, force.

Each seed drives one `Controller` (two slots, a SQLite file, child processes,
a short graceful window and a short ``kill_after``) with two driver threads
that submit a few tasks and stop, pause and resume them, wait for them and call
``stop_all()``. Every body appends a byte per step to a counter file; stubborn
bodies ignore SIGTERM, start a grandchild that ignores it too, and never reach a
checkpoint, so only a force stop ends them early. Then every pause is withdrawn
and the controller closed.

Asserted, for every seed:

* a child confirmed paused does not advance: its counter stays put for as long
  as its trajectory shows no move since the pause;
* a task stopped by force has no process left (neither the child nor the
  grandchild) once ``wait()`` returns it ``stopped``; it ends ``stopped`` with the
  kind ``cancelled`` (R9), never ``lost``;
* no body advances once ``close()`` returned, and no process the tasks started
  (children, grandchildren) survives it;
* every confirmed pause was recorded; every trajectory is legal, contiguous and
  terminal, the store holds it and the same final snapshot; no write failed.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from chongming_core import (
    ConcurrencyPolicy,
    FailureKind,
    FixedBackoff,
    RetryPolicy,
    TaskStatus,
    Timeout,
)
from chongming_runtime import Controller, ProcessExecutor, TaskOutcome, TaskRun
from chongming_store_sqlite import SqliteTaskStore
from reliability import reliability_proc_tasks
from reliability.reliability_support import TALLY, seeds
from reliability.storm_support import (
    WAIT,
    Driver,
    Peak,
    live_descendants,
    paused_violations,
    process_alive,
    run_drivers,
    stored_violations,
    trajectory_violations,
    wind_down,
)

S = TaskStatus
SLOTS = 2
OPERATIONS = 10  # per driver thread
GRACEFUL = 0.1
KILL_AFTER = 0.2
IDLE = 1.0  # far above the few milliseconds between two checkpoints
PAUSE_WINDOW = 0.3  # a child confirms a pause within a few tens of milliseconds (§7.4)
GONE_WAIT = 10.0  # how long a child that has reported its end may take to exit
RETRY = RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))


def _count(counter: Path) -> int:
    try:
        return counter.stat().st_size
    except FileNotFoundError:
        return 0


class ProcessDriver(Driver):
    """Random calls on a few process tasks; checks what can be seen while they run."""

    WEIGHTS: ClassVar[dict[str, float]] = {
        "submit": 3,
        "stop": 2,
        "pause": 3,
        "resume": 1.5,
        "retry": 0.7,
        "wait": 1.5,
        "still": 1.5,
        "stop_all": 0.15,
    }

    def __init__(self, storm: ProcessStorm, seed: int) -> None:
        super().__init__(
            storm.controller,
            seed,
            storm.tasks,
            storm.lock,
            operations=OPERATIONS,
            pause_timeout=PAUSE_WINDOW,
            pace=0.05,
        )
        self.storm = storm
        #: task id -> (version, counter) while confirmed paused
        self.frozen: dict[str, tuple[int, int]] = {}

    def submit(self) -> TaskRun:
        return self.storm.submit(self.rng)

    def act(self, action: str, task_id: str) -> None:
        if action == "still":
            self.check_frozen()
        else:
            super().act(action, task_id)

    def confirmed(self, task_id: str) -> None:
        self.freeze(task_id)

    def waited(self, task_id: str, outcome: TaskOutcome) -> None:
        self.storm.check_forced(outcome)

    def _still_paused(self, task_id: str) -> tuple[int, int] | None:
        """(version, counter) read while the task stayed paused, else None."""
        c = self.storm.controller
        first = c.get(task_id)
        counted = _count(self.storm.counters[task_id])
        then = c.get(task_id)
        if first is None or then is None or first.status is not S.PAUSED:
            return None
        if first.status_version != then.status_version:
            return None
        return first.status_version, counted

    def freeze(self, task_id: str) -> None:
        seen = self._still_paused(task_id)
        if seen is not None:
            self.frozen[task_id] = seen

    def check_frozen(self) -> None:
        for task_id, (version, counted) in list(self.frozen.items()):
            seen = self._still_paused(task_id)
            if seen is None or seen[0] != version:
                del self.frozen[task_id]  # it moved on since: resumed, stopped
            elif seen[1] != counted:
                self.errors.append(
                    f"{task_id}: paused at v{version} with {counted} steps, now {seen[1]} steps"
                )
                del self.frozen[task_id]


class ProcessStorm:
    """One seed: the controller, the tasks and their counter files."""

    def __init__(self, controller: Controller, folder: Path) -> None:
        self.controller = controller
        self.folder = folder
        self.lock = threading.Lock()
        self.tasks: list[str] = []  # what the drivers pick from
        self.counters: dict[str, Path] = {}  # task id -> counter file
        self.plans: dict[str, str] = {}
        self.problems: list[str] = []
        self.forced = 0
        self.numbers = itertools.count()

    def submit(self, rng: random.Random, plan: str | None = None) -> TaskRun:
        if plan is None:
            plan = rng.choices(["count", "stubborn", "fail", "exit"], weights=[4, 1.5, 1, 0.5])[0]
        steps = 400 if plan == "stubborn" else rng.randint(40, 150)
        counter = self.folder / f"c{next(self.numbers)}"
        timeout = None
        if plan == "stubborn" and rng.random() < 0.4:  # ended by force at its limit (R2)
            timeout = Timeout(per_attempt=rng.uniform(0.1, 0.4))
        elif rng.random() < 0.5:  # never reached while it checkpoints: paused time is not idle
            timeout = Timeout(idle=IDLE)
        run = self.controller.submit(
            "work",
            plan,
            steps,
            str(counter),
            retry=RETRY if rng.random() < 0.5 else None,
            timeout=timeout,
        )
        with self.lock:
            self.counters[run.task_id] = counter
            self.plans[run.task_id] = plan
        return run

    def pids(self, task_id: str) -> list[int]:
        """The child and grandchild pids a stubborn body wrote down (one line per attempt)."""
        path = Path(f"{self.counters[task_id]}.pids")
        if not path.exists():
            return []
        return [int(p) for line in path.read_text().splitlines() for p in line.split()]

    def check_forced(self, outcome: TaskOutcome) -> None:
        """A task just told it was ended by force (a stop, a timeout) has no process left."""
        failure = outcome.failure
        if failure is None or "by force" not in failure.message:
            return
        self.forced += 1
        left = [pid for pid in self.pids(outcome.task_id) if process_alive(pid)]
        if left:
            with self.lock:
                self.problems.append(
                    f"{outcome.task_id}: {outcome.status.value} by force, processes {left} "
                    "still alive"
                )


def _storm(tmp_path: Path, seed: int) -> list[str]:
    store = SqliteTaskStore(tmp_path / f"processes-{seed}.db")
    controller = Controller(
        store=store,
        executor=ProcessExecutor(kill_after=KILL_AFTER),
        concurrency=ConcurrencyPolicy(max_parallel=SLOTS),
        graceful_stop=GRACEFUL,
        pause_timeout=PAUSE_WINDOW,
    )
    controller.register("work", reliability_proc_tasks.work)
    storm = ProcessStorm(controller, tmp_path)
    drivers = [ProcessDriver(storm, seed * 10 + i) for i in range(2)]
    before = set(live_descendants(os.getpid()))
    found: list[str] = []
    try:
        with Peak(lambda: controller.active_count) as active:
            _begin(storm, random.Random(seed))
            found.extend(run_drivers(drivers))
        if active.value > SLOTS:
            found.append(f"active_count reached {active.value} with {SLOTS} slots")
        for driver in drivers:
            driver.check_frozen()
        found.extend(wind_down(controller, lambda: 0))  # _survivors waits for the children
        for run in controller.runs():
            storm.check_forced(run.outcome())
        counted = {task_id: _count(path) for task_id, path in storm.counters.items()}
        found.extend(_survivors(storm, before))
        for task_id, path in storm.counters.items():
            if _count(path) != counted[task_id]:
                found.append(f"{task_id}: its body advanced after close() returned")
        for driver in drivers:
            found.extend(driver.errors)
        found.extend(storm.problems)
        found.extend(_checks(storm, store, drivers))
    finally:
        try:
            controller.close(timeout=WAIT)  # a no-op unless the storm raised before its close
        finally:
            store.close()
    TALLY.add(
        process_storm_tasks=len(storm.counters),
        process_storm_pauses=sum(len(d.paused) for d in drivers),
        process_storm_forced=storm.forced,
    )
    return found


def _begin(storm: ProcessStorm, rng: random.Random) -> None:
    """A stubborn task and a counting one, running before the drivers begin: a child takes
    a while to start (it imports the runtime), and the controls are meant for running ones."""
    for plan in ("stubborn", "count"):
        storm.tasks.append(storm.submit(rng, plan).task_id)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        statuses = [run.status for run in storm.controller.runs()]
        if S.RUNNING in statuses or all(s.is_terminal for s in statuses):
            return
        time.sleep(0.01)


def _survivors(storm: ProcessStorm, before: set[int]) -> list[str]:
    """The processes the tasks started that are still alive once their children have had
    time to exit (a child that reported its end exits on its own, a moment later): children
    and grandchildren of this process, and the pids stubborn bodies wrote down (a grandchild
    whose parent was killed belongs to init)."""
    recorded = {pid for task_id in storm.counters for pid in storm.pids(task_id)}
    deadline = time.monotonic() + GONE_WAIT
    while True:
        left = {
            pid: cmd
            for pid, cmd in live_descendants(os.getpid()).items()
            if pid not in before and "resource_tracker" not in cmd
        }
        left.update((pid, "recorded by a stubborn body") for pid in recorded if process_alive(pid))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return [f"process {pid} ({cmd}) survived close()" for pid, cmd in left.items()]


def _checks(storm: ProcessStorm, store: SqliteTaskStore, drivers: list[ProcessDriver]) -> list[str]:
    c = storm.controller
    found: list[str] = []
    if c.persist_failures:
        found.append(f"writes failed: {c.persist_failures}")
    runs = {run.task_id: run for run in c.runs()}
    for task_id, run in runs.items():
        snap, history = run.snapshot, run.transitions
        found.extend(trajectory_violations(run))
        found.extend(stored_violations(store, run))
        kind = snap.failure.kind if snap.failure is not None else None
        plan = storm.plans[task_id]
        trail = [(t.to_status.value, t.trigger, t.reason) for t in history]
        if snap.status is S.LOST:
            found.append(f"{task_id}: a process task ended lost: {trail}")
        if snap.status is S.STOPPED and kind not in {None, FailureKind.CANCELLED}:
            found.append(f"{task_id}: stopped with the kind {kind}")
        timed_out = kind is FailureKind.TIMEOUT_ATTEMPT and plan == "stubborn"
        if snap.status is S.FAILED and plan not in {"fail", "exit"} and not timed_out:
            found.append(f"{task_id}: a {plan} task failed ({kind}): {snap.failure}")
        if snap.status is S.FAILED and plan == "exit" and kind is not FailureKind.NONZERO_EXIT:
            found.append(f"{task_id}: an os._exit() ended with the kind {kind}")
    found.extend(paused_violations(runs, drivers))
    return found


@pytest.mark.parametrize("seed", seeds(ci=2, soak_count=40))
def test_a_storm_of_controls_on_child_processes_leaves_nothing_running(
    tmp_path: Path, seed: int
) -> None:
    found = _storm(tmp_path, seed)
    assert not found, "\n".join(found[:40])
