"""What the seeded storms share: the driver threads, the run-down, the trajectory checks.

A storm drives one `Controller` with a few `Driver` threads that make random
calls (submit, stop, pause, resume, retry, wait, stop_all) on random tasks
while the bodies run, then resumes what is paused, closes the controller and
checks what every run and the store say. Each storm supplies its own bodies and
its own submissions (`Driver.submit`, or `Driver.add` for a pipeline's nodes) and
may add calls of its own (`Driver.act`); the checks below hold for all of them.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from chongming_core import (
    TERMINAL_STATUSES,
    TRANSITIONS,
    ConfigurationError,
    FailureKind,
    FixedBackoff,
    InvalidTransition,
    RetryPolicy,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
)
from chongming_runtime import Controller, TaskContext, TaskOutcome, TaskRun
from reliability.reliability_support import history_violations

S = TaskStatus
WAIT = 30.0  # real seconds any phase of a storm may take
EVERYWHERE = "storm"  # the reason of a driver's stop and stop_all()
CLOSED = "storm over"  # the reason of wind_down()'s close()


class Recorded(Protocol):
    """A task as this process recorded it: a `TaskRun`, or a pipeline node never released."""

    @property
    def task_id(self) -> str: ...
    @property
    def snapshot(self) -> TaskSnapshot: ...
    @property
    def transitions(self) -> Sequence[Transition]: ...


class Driver:
    """Random calls on random tasks; remembers what each call answered.

    Subclasses say what to submit (`submit`) and may look at what each `wait()`
    returned (`waited`).
    """

    WEIGHTS: ClassVar[dict[str, float]] = {
        "submit": 6,
        "stop": 3,
        "pause": 3,
        "resume": 3,
        "retry": 2,
        "wait": 1,
        "stop_all": 0.2,
    }

    def __init__(
        self,
        controller: Controller,
        seed: int,
        tasks: list[str],
        lock: threading.Lock,
        *,
        operations: int = 60,
        pause_timeout: float = 0.05,
        pace: float = 0.004,
    ):
        self.controller = controller
        self.rng = random.Random(seed)
        self.tasks = tasks
        self.tasks_lock = lock
        self.operations = operations
        self.pause_timeout = pause_timeout
        self.pace = pace
        self.paused: list[tuple[str, int]] = []  # task id, version when pause() was called
        self.errors: list[str] = []

    def submit(self) -> TaskRun:
        raise NotImplementedError

    def add(self) -> list[str]:
        """Submit what the action ``submit`` submits; returns the task ids the other actions
        may pick from (a pipeline gives its nodes)."""
        return [self.submit().task_id]

    def waited(self, task_id: str, outcome: TaskOutcome) -> None:
        """Called with what each ``wait()`` that did not time out returned."""

    def confirmed(self, task_id: str) -> None:
        """Called after each ``pause()`` that returned True."""

    def _pick(self) -> str | None:
        with self.tasks_lock:
            return self.rng.choice(self.tasks) if self.tasks else None

    def step(self) -> None:
        action = self.rng.choices(list(self.WEIGHTS), weights=list(self.WEIGHTS.values()))[0]
        if action == "submit":
            submitted = self.add()
            with self.tasks_lock:
                self.tasks.extend(submitted)
            return
        if action == "stop_all":
            self.controller.stop_all(reason=EVERYWHERE)
            return
        task_id = self._pick()
        if task_id is None:
            return
        try:
            self.act(action, task_id)
        except (ConfigurationError, InvalidTransition) as exc:  # retry of an unfinished or
            if action != "retry":  # succeeded task: a legal refusal
                self.errors.append(f"{action} {task_id}: {exc}")
        except Exception as exc:
            self.errors.append(f"{action} {task_id}: {type(exc).__name__}: {exc}")

    def act(self, action: str, task_id: str) -> None:
        """Carry out an action of `WEIGHTS` on `task_id` (a subclass adds its own)."""
        controller = self.controller
        if action == "stop":
            controller.stop(task_id, reason=EVERYWHERE)
        elif action == "pause":
            run = controller.run(task_id)
            before = run.snapshot.status_version if run is not None else 0
            if controller.pause(task_id, timeout=self.pause_timeout):
                self.paused.append((task_id, before))
                self.confirmed(task_id)
        elif action == "resume":
            controller.resume(task_id)
        elif action == "retry":
            controller.retry(task_id)
        elif action == "wait":
            with contextlib.suppress(TimeoutError):
                self.waited(task_id, controller.wait(task_id, timeout=0.01))
        else:
            raise ValueError(f"no such action: {action!r}")

    def run(self) -> None:
        for _ in range(self.operations):
            self.step()
            time.sleep(self.rng.random() * self.pace)


def run_drivers(drivers: Sequence[Driver]) -> list[str]:
    """Run every driver on a thread of its own; the violations of those that hung."""
    threads = [
        threading.Thread(target=d.run, name=f"storm-driver-{i}") for i, d in enumerate(drivers)
    ]
    for thread in threads:
        thread.start()
    found: list[str] = []
    for thread in threads:
        thread.join(WAIT)
        if thread.is_alive():
            found.append(f"{thread.name} did not finish its calls in {WAIT}s")
    return found


def resume_all(controller: Controller) -> None:
    """Withdraw every pause, confirmed or still under way."""
    for run in controller.runs():
        if run.status in {S.PAUSED, S.PAUSING}:
            controller.resume(run.task_id)


def wind_down(
    controller: Controller, executing: Callable[[], int], *, resume: bool = True
) -> list[str]:
    """Resume what is paused (unless told not to: ``close()`` then meets the pauses), close
    the controller, then wait for abandoned bodies."""
    if resume:
        resume_all(controller)
    controller.close(reason=CLOSED, timeout=WAIT)
    deadline = time.monotonic() + WAIT
    while executing() and time.monotonic() < deadline:
        time.sleep(0.01)
    left = executing()
    return [f"{left} bodies still executing {WAIT}s after close()"] if left else []


def trajectory_violations(run: Recorded) -> list[str]:
    """The run's trajectory is the contiguous chain of legal moves, ends terminal and says
    ``running`` only once a body began."""
    found = history_violations(run.snapshot, run.transitions)
    for t in run.transitions:
        revived = t.trigger == "control:retry" and t.to_status is S.QUEUED  # R6
        if t.to_status not in TRANSITIONS[t.from_status] and not revived:
            found.append(f"{run.task_id}: v{t.status_version} {t.from_status} -> {t.to_status}")
    if run.snapshot.status not in TERMINAL_STATUSES:
        found.append(f"{run.task_id}: still {run.snapshot.status.value} after close()")
    return found + unbegun_violations(run)


def unbegun_violations(run: Recorded) -> list[str]:
    """No attempt says ``running`` or ``pausing`` before its body began (D90): ``starting``
    is left by the launch (``executor:launched``), a stop, or the attempt's end."""
    found: list[str] = []
    begun = True
    for t in run.transitions:
        if t.to_status is S.STARTING:
            begun = False
        elif t.trigger == "executor:launched":
            begun = True
        elif t.to_status in {S.RUNNING, S.PAUSING} and not begun:
            found.append(
                f"{run.task_id}: v{t.status_version} {t.from_status.value} -> "
                f"{t.to_status.value} ({t.trigger}) before its body began"
            )
            begun = True  # one finding per attempt
    return found


def stored_violations(store: TaskStore, run: Recorded) -> list[str]:
    """The store holds the run's final snapshot and exactly its trajectory."""
    stored = store.get(run.task_id)
    if stored is None:
        return [f"{run.task_id}: not in the store"]
    found: list[str] = []
    if (stored.status, stored.status_version) != (
        run.snapshot.status,
        run.snapshot.status_version,
    ):
        found.append(
            f"{run.task_id}: the store says {stored.status.value} v{stored.status_version}, "
            f"the run {run.snapshot.status.value} v{run.snapshot.status_version}"
        )
    history = [(t.status_version, t.from_status, t.to_status) for t in store.history(run.task_id)]
    mine = [(t.status_version, t.from_status, t.to_status) for t in run.transitions]
    if history != mine:
        found.append(
            f"{run.task_id}: the store's history differs from the run's trajectory: "
            f"{[(v, b.value) for v, _, b in history]} != {[(v, b.value) for v, _, b in mine]}"
        )
    return found


def paused_violations(runs: Mapping[str, Recorded], drivers: Sequence[Driver]) -> list[str]:
    """Every ``pause()`` that returned True is matched by a ``paused`` transition after it."""
    found: list[str] = []
    for driver in drivers:
        for task_id, before in driver.paused:
            paused = [
                t
                for t in runs[task_id].transitions
                if t.to_status is S.PAUSED and t.status_version >= before
            ]
            if not paused:
                trail = [
                    (t.status_version, t.to_status.value, t.trigger)
                    for t in runs[task_id].transitions
                ]
                found.append(
                    f"{task_id}: pause() returned True at v{before}, no paused transition "
                    f"followed: {trail}"
                )
    return found


class Peak:
    """The largest value `read()` returned, sampled on a thread of its own every `interval`
    seconds while inside ``with Peak(read) as peak:`` (e.g. ``active_count``)."""

    def __init__(self, read: Callable[[], int], interval: float = 0.002) -> None:
        self._read = read
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="storm-peak", daemon=True)
        self.value = 0

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            self.value = max(self.value, self._read())

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT)


def live_descendants(root: int) -> dict[int, str]:
    """Every descendant of `root` still alive (not a zombie), read from ``/proc``: pid ->
    command line."""
    parents: dict[int, list[int]] = {}
    alive: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue  # gone meanwhile
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
        if fields[0] not in {"Z", "X"}:
            alive[int(entry.name)] = cmdline.strip()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        for child in parents.get(frontier.pop(), []):
            frontier.append(child)
            if child in alive:
                found[child] = alive[child]
    return found


def process_alive(pid: int) -> bool:
    """True while `pid` names a process that has not ended (a zombie has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] not in {"Z", "X"}


def plan_of(run: TaskRun) -> Any:
    """The first argument the run was submitted with (every storm passes its plan there)."""
    return run._args[0]


# ------------------------------------------------------------------ the control storm's bodies

SLOTS = 3
STUBBORN_FOR = 0.35  # seconds a stubborn body ignores stops (longer than the window)
# a woken body unwinds in well under this, even on a loaded machine (0.1 s was not: a
# checkpointing body starved of the interpreter for longer ended lost, as it should, and
# the check that only stubborn bodies end lost failed)
GRACEFUL = 0.2
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

    def executing_count(self) -> int:
        with self.lock:
            return sum(self.executing.values())

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


class ControlDriver(Driver):
    """Submits quick, looping, fail-once and stubborn bodies, some holding the gpu."""

    def submit(self) -> TaskRun:
        plan = self.rng.choice(["quick", "loop", "loop", "fail-once", "stubborn"])
        gpu = self.rng.random() < 0.3
        return self.controller.submit(
            "work",
            plan,
            1 if plan == "quick" else self.rng.randint(5, 40),
            gpu,
            tags=["gpu"] if gpu else [],
            priority=self.rng.randint(0, 2),
            retry=RETRY,
        )


def control_violations(
    controller: Controller, store: TaskStore, bodies: Bodies, drivers: Sequence[Driver]
) -> list[str]:
    """Slots, the gpu unit, bodies inside attempts, trajectories, the store, lost ends and
    confirmed pauses, after a storm of `ControlDriver`s."""
    found: list[str] = []
    if bodies.peak > SLOTS:
        found.append(f"{bodies.peak} bodies executed at once with {SLOTS} slots")
    if bodies.gpu_peak > 1:
        found.append(f"{bodies.gpu_peak} bodies held the one gpu unit at once")
    runs = {run.task_id: run for run in controller.runs()}
    for task_id, attempt, seen in bodies.entries:
        run = runs[task_id]
        began = sum(1 for t in run.transitions if t.to_status is S.STARTING)
        if attempt < 1 or attempt > began:
            found.append(f"{task_id}: a body ran as attempt {attempt}, {began} attempts began")
        if seen not in {S.STARTING, S.RUNNING, S.STOPPING, S.PAUSING}:
            found.append(f"{task_id}: a body began while its run was {seen.value}")
    for run in runs.values():
        found.extend(trajectory_violations(run))
        statuses = [t.to_status for t in run.transitions]
        if S.STARTING not in statuses and any(e[0] == run.task_id for e in bodies.entries):
            found.append(f"{run.task_id}: its body ran although it never started")
        outcome = run.outcome()
        if outcome.status is S.LOST:
            plan = plan_of(run)
            if plan != "stubborn":
                found.append(f"{run.task_id}: a {plan} body ended lost")
            if outcome.failure is None or outcome.failure.kind is not FailureKind.LOST:
                found.append(f"{run.task_id}: lost without the kind lost")
        found.extend(stored_violations(store, run))
    found.extend(paused_violations(runs, drivers))
    return found
