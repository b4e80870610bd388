"""A storm of controls while a `FakeClock` jumps: timeouts, retries and backoff under pauses.

Each seed drives one `Controller` on a `FakeClock` (three slots, a graceful window
of 2 s) over a SQLite file. Tasks carry random `Timeout(start=, per_attempt=,
idle=)` and `RetryPolicy(max_attempts=, backoff=FixedBackoff(...))`; their bodies
work for a while in fake time (checkpointing), fail (retryably or not), return a
value as soon as a stop is asked, or sleep through their budget without a
checkpoint. Two driver threads make random calls (pause, resume, stop, retry,
...) while a clock thread advances the clock by random steps, each shorter than
the graceful window and the idle limits. Between two steps the clock thread
waits until every body has seen the new time (checkpointed or looked at the
clock) or is suspended in a confirmed pause, so that in fake time every body is
as prompt as it is written to be.

Asserted, for every seed (§4.2, §5, §6, R1, R2, D2, D9):

* trajectories are legal, contiguous and terminal, the store holds them, every
  confirmed pause has its ``paused`` transition;
* paused time does not count: a body that checkpoints at every step never
  times out idle, and a ``timeout_attempt`` comes only after the attempt ran
  (not paused) for its whole budget; a ``timeout_start`` only for a task that
  waited (not paused) for its whole start limit and never ran;
* a timeout's kind is that of the deadline that fired first for a sleeping body,
  and a value returned after a timeout asked the body to stop ends as the
  timeout's failure (an attempt succeeds from ``running`` only within its budget);
* retries follow only retryable failures, never a stop or a cancellation, and
  every retryable failure with attempts left and no stop is retried; a backoff
  is spent in ``retry_wait`` (``retry_wait -> starting`` no sooner than the delay);
* attempt numbers and `AttemptRecord`\\ s match the trajectory;
* nothing ends ``lost`` unless its body was still sleeping, without a
  checkpoint, when the graceful window ended.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from chongming_core import (
    ACTIVE_STATUSES,
    Failure,
    FailureKind,
    FakeClock,
    FixedBackoff,
    RetryPolicy,
    TaskStatus,
    Timeout,
    Transition,
)
from chongming_runtime import Controller, TaskContext, TaskRun
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import TALLY, seeds
from reliability.storm_support import (
    WAIT,
    Driver,
    paused_violations,
    plan_of,
    run_drivers,
    stored_violations,
    trajectory_violations,
    wind_down,
)

S = TaskStatus
K = FailureKind
SLOTS = 3
GRACEFUL = 2.0  # fake seconds
STEP = (0.05, 0.6)  # fake seconds of one advance: shorter than GRACEFUL and every idle limit
EPS = 1e-6
OPERATIONS = int(os.environ.get("CHONGMING_STORM_OPERATIONS", "40"))  # per driver thread
COOPERATIVE = frozenset({"work", "fail", "fatal", "polite"})


class Flaky(Exception):
    """A retryable failure of a body."""


class Fatal(Exception):
    """A failure the retry policy gives up on."""


@dataclass
class Body:
    """One executing body, as the clock thread sees it."""

    task_id: str
    attempt: int
    seen: int  # the last clock step the body looked at
    inside: bool = False  # in ctx.checkpoint() (maybe suspended by a pause)
    ended_at: datetime | None = None


@dataclass
class Bodies:
    """The executing bodies and the steps of the clock; bodies wait for the clock's steps."""

    clock: FakeClock
    cond: threading.Condition = field(default_factory=threading.Condition)
    step: int = 0
    live: dict[tuple[str, int], Body] = field(default_factory=dict)
    ended: dict[tuple[str, int], Body] = field(default_factory=dict)
    peak: int = 0

    def executing_count(self) -> int:
        with self.cond:
            return len(self.live)

    def _saw(self, me: Body, step: int) -> None:
        with self.cond:
            me.seen = step
            self.cond.notify_all()

    def _next_step(self, me: Body) -> None:
        """Wait (bounded) until the clock moved past the step the body saw."""
        with self.cond:
            self.cond.wait_for(lambda: self.step > me.seen, timeout=0.5)

    def _checkpoint(self, ctx: TaskContext, me: Body) -> float:
        """`ctx.checkpoint()`; returns the fake seconds it held the body (a pause)."""
        with self.cond:
            step = self.step
            me.inside = True
        before = self.clock.monotonic()
        try:
            ctx.checkpoint()
        finally:
            with self.cond:
                me.inside = False
        held = self.clock.monotonic() - before
        self._saw(me, step)
        return held

    def body(self, ctx: TaskContext, plan: str, length: float) -> float:
        key = (ctx.task_id, ctx.attempt)
        with self.cond:
            me = self.live[key] = Body(ctx.task_id, ctx.attempt, self.step)
            self.peak = max(self.peak, len(self.live))
        try:
            return self._work(ctx, me, plan, length)
        finally:
            with self.cond:
                me.ended_at = self.clock.now()
                self.ended[key] = self.live.pop(key)
                self.cond.notify_all()

    def _work(self, ctx: TaskContext, me: Body, plan: str, length: float) -> float:
        clock = self.clock
        began = clock.monotonic()
        if plan == "sleep":  # no checkpoint at all: a stop or a timeout cannot reach it
            while True:
                with self.cond:
                    step = self.step
                if clock.monotonic() - began >= length:
                    return length
                self._saw(me, step)
                self._next_step(me)
        paused = 0.0
        while True:
            if plan == "polite" and ctx.is_stop_requested:
                return -1.0  # §4.5: asked to stop, it returns what it has
            paused += self._checkpoint(ctx, me)
            if clock.monotonic() - began - paused >= length:
                break
            self._next_step(me)
        if plan == "fail":
            raise Flaky("a retryable failure")
        if plan == "fatal":
            raise Fatal("a failure not worth a retry")
        return length

    def quiet(self, runs: dict[str, TaskRun]) -> list[Body]:
        """The bodies that did not yet see the current step (nor wait in a confirmed pause)."""
        with self.cond:
            step = self.step
            waiting = [b for b in self.live.values() if b.seen < step]
        late = []
        for body in waiting:
            run = runs.get(body.task_id)
            snap = run.snapshot if run is not None else None
            if (
                body.inside
                and snap is not None
                and snap.status is S.PAUSED
                and snap.paused_in_place
                and snap.attempt == body.attempt
            ):
                continue
            late.append(body)
        return late

    def reported(self, runs: dict[str, TaskRun]) -> list[Body]:
        """Bodies that ended but whose end the run has not recorded yet, and attempts whose
        body has not begun (its thread may not have been scheduled yet)."""
        with self.cond:
            ended = list(self.ended.values())
            known = set(self.live) | set(self.ended)
        late = [
            Body(run.task_id, run.snapshot.attempt, -1)
            for run in runs.values()
            if run.snapshot.status in ACTIVE_STATUSES
            and (run.task_id, run.snapshot.attempt) not in known
        ]
        for body in ended:
            run = runs.get(body.task_id)
            if run is None:
                continue
            snap = run.snapshot
            if snap.attempt == body.attempt and snap.status in ACTIVE_STATUSES:
                late.append(body)
        return late


class ClockThread(threading.Thread):
    """Advances the clock by random steps, each once every body saw the one before."""

    def __init__(self, controller: Controller, bodies: Bodies, seed: int) -> None:
        super().__init__(name="storm-clock")
        import random

        self.controller = controller
        self.bodies = bodies
        self.rng = random.Random(seed)
        self.halt = threading.Event()
        self.errors: list[str] = []
        self.steps = 0

    def _settle(self) -> None:
        deadline = time.monotonic() + WAIT
        while not self.halt.is_set():
            runs = {run.task_id: run for run in self.controller.runs()}
            late = self.bodies.quiet(runs) + self.bodies.reported(runs)
            if not late:
                return
            if time.monotonic() > deadline:
                self.errors.append(
                    f"bodies did not see step {self.bodies.step} in {WAIT}s: "
                    f"{[(b.task_id, b.attempt, b.inside, _state(runs[b.task_id])) for b in late]}"
                )
                self.halt.set()
                return
            with self.bodies.cond:
                self.bodies.cond.wait(0.005)

    def run(self) -> None:
        while not self.halt.is_set():
            self._settle()
            self.bodies.clock.advance(self.rng.uniform(*STEP))
            self.steps += 1
            with self.bodies.cond:
                self.bodies.step += 1
                self.bodies.cond.notify_all()
            time.sleep(0.001)  # room for the drivers' calls between two steps


def _state(run: TaskRun | None) -> object:
    """What a stuck run looks like (for the report)."""
    if run is None:
        return None
    attempt = run._attempt
    control = None if attempt is None else attempt.control
    flags = (
        None
        if control is None
        else (control.pause_requested, control.stop_requested, attempt.closed)  # type: ignore[union-attr]
    )
    trail = [(t.to_status.value, t.trigger) for t in run.transitions]
    return (run.snapshot.status.value, run.snapshot.paused_in_place, flags, trail)


class DeadlineDriver(Driver):
    """Submits bodies with random timeouts and retry policies."""

    def submit(self) -> TaskRun:
        rng = self.rng
        plan = rng.choice(["work", "work", "fail", "fatal", "polite", "sleep", "sleep"])
        length = {
            "work": rng.choice([0.5, 1.5, 12.0]),
            "fail": rng.choice([0.5, 1.5]),
            "fatal": 0.5,
            "polite": 12.0,
            "sleep": rng.choice([0.5, 4.5, 15.0]),
        }[plan]
        timeout = Timeout(
            start=rng.choice([None, 2.5, 6.0]),
            per_attempt=rng.choice([None, 4.0, 9.0]),
            idle=rng.choice([None, 3.0, 7.0]),
        )
        retry = RetryPolicy(
            max_attempts=rng.randint(1, 3),
            backoff=FixedBackoff(rng.choice([0, 0.5, 3.0])),
            give_up_on=(Fatal,),
        )
        return self.controller.submit(
            "work", plan, length, retry=retry, timeout=timeout, priority=rng.randint(0, 2)
        )


def _storm(tmp_path: Path, seed: int) -> list[str]:
    clock = FakeClock()
    bodies = Bodies(clock)
    store = SqliteTaskStore(tmp_path / f"deadlines-{seed}.db")
    controller = Controller(
        store=store,
        max_parallel=SLOTS,
        graceful_stop=GRACEFUL,
        pause_timeout=1.0,
        clock=clock,
    )
    controller.register("work", bodies.body)
    tasks: list[str] = []
    lock = threading.Lock()
    drivers = [
        DeadlineDriver(
            controller, seed * 10 + i, tasks, lock, operations=OPERATIONS, pause_timeout=1.0
        )
        for i in range(2)
    ]
    ticker = ClockThread(controller, bodies, seed)
    try:
        ticker.start()
        found = run_drivers(drivers)
        found.extend(wind_down(controller, bodies.executing_count))
        ticker.halt.set()
        ticker.join(WAIT)
        found.extend(ticker.errors)
        for driver in drivers:
            found.extend(driver.errors)
        runs = {run.task_id: run for run in controller.runs()}
        if bodies.peak > SLOTS:
            found.append(f"{bodies.peak} bodies executed at once with {SLOTS} slots")
        for run in runs.values():
            found.extend(trajectory_violations(run))
            found.extend(stored_violations(store, run))
            found.extend(_deadline_violations(run, bodies))
        found.extend(paused_violations(runs, drivers))
    finally:
        try:
            # before the clock halts: a close waits for deadlines that only the clock advances
            controller.close(timeout=WAIT)  # a no-op unless the storm raised before its close
        finally:
            ticker.halt.set()
            store.close()
    kinds = Counter(
        f"deadline_storm_{r.status.value}_{r.failure.kind.value if r.failure else 'ok'}"
        for run in controller.runs()
        for r in run.snapshot.attempts
    )
    TALLY.add(deadline_storm_tasks=len(tasks), deadline_storm_steps=ticker.steps, **kinds)
    return found


# ------------------------------------------------------------------ the checks


@dataclass
class Attempt:
    """One attempt as the trajectory tells it."""

    number: int
    began: Transition  # -> starting
    transitions: list[Transition] = field(default_factory=list)  # from `began` on
    end: Transition | None = None  # the move out of the active statuses (not to paused)

    def running_for(self) -> float:
        """Fake seconds between ``running`` and the end, less the time paused in place."""
        total = 0.0
        since: datetime | None = None
        for t in self.transitions:
            if t.to_status is S.RUNNING and since is None:
                since = t.at
            elif t.to_status is S.PAUSED and since is not None:
                total += (t.at - since).total_seconds()
                since = None
            if t is self.end:
                break
        if since is not None and self.end is not None:
            total += (self.end.at - since).total_seconds()
        return total

    @property
    def stopped(self) -> bool:
        return any(t.to_status is S.STOPPING for t in self.transitions)


def _attempts(run: TaskRun) -> Iterator[Attempt]:
    current: Attempt | None = None
    number = 0
    for t in run.transitions:
        if t.to_status is S.STARTING:
            number += 1
            if current is not None:
                yield current
            current = Attempt(number, t)
        if current is None:
            continue
        current.transitions.append(t)
        if (
            current.end is None
            and t.from_status in ACTIVE_STATUSES
            and t.to_status not in ACTIVE_STATUSES
            and t.to_status is not S.PAUSED
        ):
            current.end = t
    if current is not None:
        yield current


def _waited_for_start(transitions: Sequence[Transition], until: datetime) -> float:
    """Fake seconds from the first ``queued`` to `until`, less the time paused before start."""
    total = 0.0
    since: datetime | None = None
    for t in transitions:
        if t.at > until:
            break
        if t.to_status is S.QUEUED and since is None:
            since = t.at
        elif t.to_status is S.PAUSED and since is not None:
            total += (t.at - since).total_seconds()
            since = None
    if since is not None:
        total += (until - since).total_seconds()
    return total


def _first_since_submitted(run: TaskRun, attempt: Attempt) -> bool:
    """Whether `attempt` is the first since the task was submitted or revived by ``retry()``
    (R6): the start timeout covers only that one."""
    first = True
    for t in run.transitions:
        if t is attempt.began:
            return first
        if t.to_status is S.STARTING:
            first = False
        elif t.trigger == "control:retry" and t.to_status is S.QUEUED:
            first = True
    return False


def _budget(run: TaskRun, attempt: Attempt) -> int:
    """The attempt budget when `attempt` ended: the policy's, raised by each ``retry()`` that
    found it spent (D2)."""
    budget = run._setup.policy.max_attempts
    began = 0
    for t in run.transitions:
        if t is attempt.end:
            break
        if t.to_status is S.STARTING:
            began += 1
        elif t.trigger == "control:retry" and t.to_status is S.QUEUED:
            budget = max(budget, began + 1)
    return budget


#: how the failure of a thread body abandoned after a timeout names the timeout (R2)
_NAMED = {K.TIMEOUT_IDLE: "idle timeout", K.TIMEOUT_ATTEMPT: "per-attempt timeout"}


def _sleeper_violations(
    where: str, end: TaskStatus, failure: Failure | None, timeout: Timeout, length: float
) -> list[str]:
    """A body sleeping `length` fake seconds without a checkpoint, and not stopped: the deadline
    that falls first while it sleeps is the one that ends the attempt (§6)."""
    limits = [(timeout.idle, K.TIMEOUT_IDLE), (timeout.per_attempt, K.TIMEOUT_ATTEMPT)]
    due = [(limit, kind) for limit, kind in limits if limit is not None and limit <= length]
    if not due or end is S.STOPPED or (failure is None and end is not S.SUCCEEDED):
        return []
    first = min(due)[1]
    if end is S.SUCCEEDED:
        return [f"{where}: its value was kept after a {first.value} asked it to stop"]
    assert failure is not None
    if failure.kind is K.TIMEOUT_START:
        return []
    if end is S.LOST:
        if _NAMED[first] not in failure.message:
            return [f"{where}: lost after a {first.value}, not saying so: {failure.message}"]
    elif failure.kind is not first:
        return [f"{where}: {failure.kind.value} though {first.value} was due first"]
    return []


def _deadline_violations(run: TaskRun, bodies: Bodies) -> list[str]:
    found: list[str] = []
    tid = run.task_id
    snap = run.snapshot
    plan = plan_of(run)
    length = run._args[1]
    timeout = run._setup.timeout
    policy = run._setup.policy
    attempts = list(_attempts(run))
    # ------------------------------------------------ attempt numbers and records (D9)
    if snap.attempt != len(attempts):
        found.append(f"{tid}: attempt {snap.attempt}, {len(attempts)} attempts began")
    records = list(snap.attempts)
    if [r.number for r in records] != list(range(1, len(records) + 1)):
        found.append(f"{tid}: attempt records numbered {[r.number for r in records]}")
    ended = [a for a in attempts if a.end is not None]
    if len(records) != len(ended):
        found.append(f"{tid}: {len(records)} attempt records, {len(ended)} attempts ended")
    for attempt, record in zip(ended, records, strict=False):
        assert attempt.end is not None
        if (record.status, record.ended_at) != (attempt.end.to_status, attempt.end.at):
            found.append(
                f"{tid}: attempt {attempt.number} ended {attempt.end.to_status.value} at "
                f"{attempt.end.at}, its record says {record.status.value} at {record.ended_at}"
            )
    for attempt, record in zip(ended, records, strict=False):
        assert attempt.end is not None
        end = attempt.end.to_status
        failure = record.failure
        kind = failure.kind if failure is not None else None
        where = f"{tid} ({plan} {length}, {timeout}) attempt {attempt.number}"
        # ------------------------------------------------ retries (§5, §5.1)
        if end is S.RETRY_WAIT:
            if failure is None or not failure.retryable or kind is K.CANCELLED:
                found.append(f"{where}: retried after a failure not retryable: {failure}")
            if attempt.stopped:
                found.append(f"{where}: retried after a stop")
        if (
            end is S.FAILED
            and failure is not None
            and failure.retryable
            and not attempt.stopped
            and record.number < _budget(run, attempt)
        ):
            found.append(f"{where}: a retryable failure with attempts left was not retried")
        # ------------------------------------------------ timeouts (§6, R2)
        running = attempt.running_for()
        if kind is K.TIMEOUT_ATTEMPT and (
            timeout.per_attempt is None or running < timeout.per_attempt - EPS
        ):
            found.append(f"{where}: timeout_attempt after running {running:g}s (not paused)")
        if kind is K.TIMEOUT_IDLE and (timeout.idle is None or plan in COOPERATIVE):
            found.append(f"{where}: timeout_idle, though it checkpointed at every step")
        if kind is K.TIMEOUT_START and (
            timeout.start is None
            or not _first_since_submitted(run, attempt)
            or any(t.to_status is S.RUNNING for t in attempt.transitions)
        ):
            steps = [(t.to_status.value, t.trigger, str(t.at.time())) for t in run.transitions]
            found.append(f"{where}: timeout_start after it ran: {steps}")
        if (
            end is S.SUCCEEDED
            and attempt.end is not None
            and attempt.end.from_status is not S.STOPPING
            and timeout.per_attempt is not None
            and running > timeout.per_attempt + EPS
        ):
            found.append(
                f"{where}: succeeded after running {running:g}s, past its budget "
                f"{timeout.per_attempt:g}s"
            )
        if plan == "sleep" and not attempt.stopped:
            found.extend(_sleeper_violations(where, end, failure, timeout, length))
        # ------------------------------------------------ lost only for a stuck body (§4.1)
        if end is S.LOST:
            body = bodies.ended.get((tid, attempt.number)) or bodies.live.get((tid, attempt.number))
            if plan != "sleep":
                found.append(f"{where}: a {plan} body that checkpoints at every step ended lost")
            elif body is not None and body.ended_at is not None and body.ended_at < attempt.end.at:
                found.append(
                    f"{where}: lost at {attempt.end.at}, its body had returned at {body.ended_at}"
                )
            if kind is not K.LOST:
                found.append(f"{where}: lost with the kind {kind}")
    # ------------------------------------------------ backoff is spent in retry_wait
    trail = run.transitions
    for before, after in itertools.pairwise(trail):
        if before.to_status is S.RETRY_WAIT and after.to_status is S.STARTING:
            delay = float(policy.delay_after(1))
            if after.at - before.at < timedelta(seconds=delay - EPS):
                found.append(
                    f"{tid}: retried {(after.at - before.at).total_seconds():g}s after the "
                    f"failure, the backoff is {delay:g}s"
                )
    # ------------------------------------------------ the start timeout (R1)
    failure = snap.failure
    if failure is not None and failure.kind is K.TIMEOUT_START and snap.status is S.CANCELLED:
        waited = _waited_for_start(trail, trail[-1].at)
        if timeout.start is None or waited < timeout.start - EPS:
            found.append(f"{tid}: start timeout after waiting {waited:g}s (not paused)")
    return found


@pytest.mark.parametrize("seed", seeds(ci=4, soak_count=150))
def test_a_storm_of_controls_on_a_jumping_clock_keeps_every_deadline(
    tmp_path: Path, seed: int
) -> None:
    found = _storm(tmp_path, seed)
    assert not found, "\n".join(found[:40])
