"""A storm of pause, resume and stop, by id from several threads and in command batches.

Each case (an executor that can pause, a body kind, a seed) drives one
`Controller` over a SQLite file holding a few tasks whose bodies checkpoint and
count a step (one byte in a counter file) every few milliseconds. The storm goes
in rounds. In each, three driver threads make a few random calls at once:
``pause()`` by id (timed), ``resume()``, a resume followed at once by a pause,
now and then ``stop()`` (or a stop, then a new task paused while it is still
starting), and batches of pause/resume (now and then stop) command
rows written to the store's command channel for the controller's poller to
apply. Then the round settles (every command applied, no pause under way,
nothing starting or stopping; a stopped task is replaced by a new one) and every
task is checked:

* ``paused``: its body makes no step while its status stays ``paused``;
* ``running``: its body makes a step;
* nothing changes a settled task's status while it is watched.

Also asserted: every ``pause()`` returned within its window (plus slack for a
loaded machine); every ``pause()`` that returned True was followed by a
``paused`` transition; after ``close()`` no body advances; every trajectory is
legal, contiguous and terminal, says ``running`` only once its body began, and
the store holds exactly it; no write failed.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from chongming_core import Command, FakeClock, TaskStatus
from chongming_runtime import Controller, Executor, ProcessExecutor, TaskRun, ThreadExecutor
from chongming_store_sqlite import SqliteTaskStore
from reliability import reliability_proc_tasks
from reliability.reliability_support import TALLY, seeds
from reliability.storm_support import (
    WAIT,
    Driver,
    paused_violations,
    resume_all,
    run_drivers,
    stored_violations,
    trajectory_violations,
)

S = TaskStatus
WINDOW = 0.25  # every pause window, direct or by command
SLACK = 2.0  # what a loaded machine may add to a pause() beyond its window
HELD = 0.03  # seconds a paused body is watched for a step it must not make
MOVES_WITHIN = 10.0  # a running body makes a step within this (it does every few ms)
ROUNDS = 5
CALLS = 3  # per driver and round
STEPS = 10**6  # a body's steps: it runs until stopped
SETTLED = {S.RUNNING, S.PAUSED}

#: (name, executor factory, body, tasks held at once): every executor that can pause
CASES: list[tuple[str, Callable[[], Executor], Callable[..., Any], int]] = [
    ("thread", ThreadExecutor, reliability_proc_tasks.work, 3),
    ("thread-async", ThreadExecutor, reliability_proc_tasks.awork, 3),
    ("process", ProcessExecutor, reliability_proc_tasks.work, 2),
    ("process-async", ProcessExecutor, reliability_proc_tasks.awork, 2),
]


def _count(counter: Path) -> int:
    try:
        return counter.stat().st_size
    except FileNotFoundError:
        return 0


class PauseStorm:
    """One case: the controller, the tasks held at once and their counter files."""

    def __init__(self, controller: Controller, folder: Path, body: Callable[..., Any]) -> None:
        self.controller = controller
        self.folder = folder
        self.asynchronous = body is reliability_proc_tasks.awork
        self.lock = threading.Lock()
        self.tasks: list[str] = []  # the live tasks the drivers pick from
        self.counters: dict[str, Path] = {}  # task id -> counter file
        self.numbers = itertools.count()
        self.stamps = FakeClock()  # only stamps the command rows
        self.checked = {S.RUNNING: 0, S.PAUSED: 0}

    def submit(self) -> TaskRun:
        counter = self.folder / f"c{next(self.numbers)}"
        if self.asynchronous:
            run = self.controller.submit("work", STEPS, str(counter))
        else:
            run = self.controller.submit("work", "count", STEPS, str(counter))
        with self.lock:
            self.counters[run.task_id] = counter
            self.tasks.append(run.task_id)
        return run

    def command(self, task_id: str, actions: list[str]) -> None:
        """Write `actions` as command rows in one go and wake the poller: one batch."""
        store = self.controller.store
        for action in actions:
            store.submit_command(
                Command(
                    command_id=uuid.uuid4().hex,
                    task_id=task_id,
                    action=action,
                    issued_by="storm-console",
                    issued_at=self.stamps.now(),
                    reason="storm" if action == "stop" else None,
                )
            )
        self.controller._poller.wake()

    def settle(self, held: int) -> list[str]:
        """Wait until every command is applied and every task is running, paused or ended;
        replace ended tasks until `held` are live and running."""
        store = self.controller.store
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            pending = [c for c in store.commands() if not c.is_complete]
            statuses = {t: self._status(t) for t in self.tasks}
            unsettled = [
                t
                for t, status in statuses.items()
                if status not in SETTLED and not status.is_terminal
            ]
            if not pending and not unsettled:
                ended = [t for t, status in statuses.items() if status.is_terminal]
                if not ended and len(self.tasks) >= held:
                    return []
                with self.lock:
                    self.tasks = [t for t in self.tasks if t not in ended]
                while len(self.tasks) < held:
                    self.submit()
                self._await_first_steps()
                continue
            threading.Event().wait(0.005)
        return [f"not settled within {WAIT}s: {len(pending)} commands pending, {unsettled}"]

    def _status(self, task_id: str) -> TaskStatus:
        run = self.controller.run(task_id)
        assert run is not None, f"{task_id} is not held by the storm's controller"
        return run.status

    def _await_first_steps(self) -> None:
        """Until every task made a step, or is paused or ended (one paused while it was
        still starting may have made none)."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if all(
                _count(self.counters[t]) > 0
                or self._status(t) is S.PAUSED
                or self._status(t).is_terminal
                for t in self.tasks
            ):
                return
            threading.Event().wait(0.005)

    def check(self, round_: int) -> list[str]:
        """A settled task's body advances exactly when its status says it may."""
        found: list[str] = []
        for task_id in list(self.tasks):
            run = self.controller.run(task_id)
            assert run is not None
            before = run.snapshot
            counter = self.counters[task_id]
            if before.status is S.PAUSED:
                counted = _count(counter)
                threading.Event().wait(HELD)
                if _count(counter) != counted:
                    found.append(f"round {round_}: {task_id} is paused, but its body advanced")
            elif before.status is S.RUNNING:
                counted = _count(counter)
                deadline = time.monotonic() + MOVES_WITHIN
                while _count(counter) == counted and time.monotonic() < deadline:
                    threading.Event().wait(0.002)
                if _count(counter) == counted:
                    found.append(
                        f"round {round_}: {task_id} is running, but its body made no step in "
                        f"{MOVES_WITHIN:g}s: {_trail(run)}"
                    )
            else:
                found.append(f"round {round_}: {task_id} is {before.status.value} once settled")
                continue
            self.checked[before.status] += 1
            after = run.snapshot
            if after.status_version != before.status_version:
                found.append(
                    f"round {round_}: {task_id} moved from {before.status.value} to "
                    f"{after.status.value} while settled: {_trail(run)}"
                )
        return found


def _trail(run: TaskRun) -> list[tuple[int, str, str]]:
    return [(t.status_version, t.to_status.value, t.trigger) for t in run.transitions[-8:]]


class PauseDriver(Driver):
    """Random pauses, resumes, stops and command batches on the storm's live tasks."""

    WEIGHTS: ClassVar[dict[str, float]] = {
        "pause": 4,
        "resume": 3,
        "resume-pause": 3,
        "batch": 3,
        "stop": 0.3,
        "replace-pause": 0.5,
    }

    def __init__(self, storm: PauseStorm, seed: int) -> None:
        super().__init__(
            storm.controller,
            seed,
            storm.tasks,
            storm.lock,
            operations=CALLS,
            pause_timeout=WINDOW,
            pace=0.01,
        )
        self.storm = storm
        self.batches = 0

    def _pick(self) -> str | None:
        with self.tasks_lock:  # the storm replaces its list of live tasks between rounds
            live = self.storm.tasks
            return self.rng.choice(live) if live else None

    def act(self, action: str, task_id: str) -> None:
        if action == "pause":
            self.timed_pause(task_id)
        elif action == "resume-pause":  # the pause reaches a body still at its checkpoint
            self.controller.resume(task_id)
            self.timed_pause(task_id)
        elif action == "replace-pause":  # a pause of a task still starting (D90)
            self.controller.stop(task_id, reason="storm")
            self.timed_pause(self.storm.submit().task_id)
        elif action == "batch":
            size = self.rng.randint(2, 4)
            actions = self.rng.choices(["pause", "resume", "stop"], weights=[5, 5, 0.3], k=size)
            self.storm.command(task_id, actions)
            self.batches += 1
        else:
            super().act(action, task_id)

    def timed_pause(self, task_id: str) -> None:
        began = time.monotonic()
        super().act("pause", task_id)
        took = time.monotonic() - began
        if took > WINDOW + SLACK:
            self.errors.append(f"pause({task_id}) took {took:.2f}s, its window is {WINDOW:g}s")


def _storm(tmp_path: Path, case: str, seed: int) -> list[str]:
    name, make, body, held = next(c for c in CASES if c[0] == case)
    store = SqliteTaskStore(tmp_path / f"pause-{name}-{seed}.db")
    controller = Controller(
        store=store,
        executor=make(),
        graceful_stop=5.0,  # a body checkpoints every few ms: no stop may end it lost
        pause_timeout=WINDOW,
        poll_interval=0.01,
    )
    controller.register("work", body)
    storm = PauseStorm(controller, tmp_path, body)
    drivers = [PauseDriver(storm, seed * 10 + i) for i in range(3)]
    found: list[str] = []
    try:
        found.extend(storm.settle(held))
        for round_ in range(ROUNDS if not found else 0):
            found.extend(run_drivers(drivers))
            settled = storm.settle(held)
            found.extend(settled)
            if settled:
                break
            found.extend(storm.check(round_))
        resume_all(controller)
        controller.close(reason="storm over", timeout=WAIT)
        counted = {task_id: _count(path) for task_id, path in storm.counters.items()}
        threading.Event().wait(HELD)
        for task_id, path in storm.counters.items():
            if _count(path) != counted[task_id]:
                found.append(f"{task_id}: its body advanced after close() returned")
        for driver in drivers:
            found.extend(driver.errors)
        if controller.persist_failures:
            found.append(f"writes failed: {controller.persist_failures}")
        runs = {run.task_id: run for run in controller.runs()}
        for run in runs.values():
            found.extend(trajectory_violations(run))
            found.extend(stored_violations(store, run))
        found.extend(paused_violations(runs, drivers))
    finally:
        try:
            controller.close(timeout=WAIT)  # a no-op unless the storm raised before its close
        finally:
            store.close()
    TALLY.add(
        pause_storm_tasks=len(storm.counters),
        pause_storm_confirmed=sum(len(d.paused) for d in drivers),
        pause_storm_batches=sum(d.batches for d in drivers),
        pause_storm_checked_paused=storm.checked[S.PAUSED],
        pause_storm_checked_running=storm.checked[S.RUNNING],
    )
    return found


def _cases() -> list[tuple[str, int]]:
    """Two seeds per thread case and one per process case by default (a child takes a
    while to start); 60 and 20 in the soak."""
    made: list[tuple[str, int]] = []
    for name, *_ in CASES:
        process = name.startswith("process")
        made.extend(
            (name, seed) for seed in seeds(ci=1 if process else 2, soak_count=20 if process else 60)
        )
    return made


@pytest.mark.parametrize(("case", "seed"), _cases())
def test_a_storm_of_pauses_resumes_and_stops_keeps_each_body_where_its_status_says(
    tmp_path: Path, case: str, seed: int
) -> None:
    found = _storm(tmp_path, case, seed)
    assert not found, "\n".join(found[:40])
