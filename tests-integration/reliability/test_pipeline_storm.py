"""A storm of pipelines (guide §8.12): random DAGs under random controls from two threads.

Each seed drives one `Controller` (three slots, a SQLite file, thread executor)
with two driver threads that submit random DAGs — fan-out and fan-in, every join
mode, both aggregations, nodes that succeed, fail, fail once (and retry) or run
long — while they stop, pause and resume single nodes, stop whole pipelines and
call ``stop_all()``. Then every pause is withdrawn, every pipeline waited for
and the controller closed; in half the seeds ``close()`` comes at once instead,
in the middle of it all.

Asserted afterwards, for every seed:

* the table of §8.12: a ``skipped`` node never ran and its upstream did not let
  it (or fail_fast began before its release); a ``cancelled`` node was released
  and its pipeline is fail_fast with a real failure; a ``stopped`` node was the
  target of a stop (by id, of its pipeline, ``stop_all()`` or ``close()``);
  a node whose upstream let it run was not skipped, and nothing is ``cancelled``
  under all_settled;
* a body begins only when its join holds (read from the upstream nodes as the
  body begins), with the succeeded upstream values as ``ctx.upstream``;
* under fail_fast, a body that begins once a node of its pipeline failed is
  cancelled (it was released before the failure's pass; no node is released
  after it);
* blocked nodes take no slot: never more bodies than slots, ``active_count``
  never above the slots, and every pipeline finishes (more nodes wait than there
  are slots);
* ``PipelineRun.wait()`` gives the overall status of R16/D32 over the nodes'
  final statuses, and each node's outcome is its final snapshot, in definition
  order; a second ``wait()`` after ``close()`` says the same;
* every trajectory is legal, contiguous and terminal, the store holds it and the
  same final snapshot; every confirmed pause was recorded; no write failed.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from chongming_core import (
    AggregationPolicy,
    ConcurrencyPolicy,
    ConfigurationError,
    FailureKind,
    FixedBackoff,
    InvalidTransition,
    JoinMode,
    RetryPolicy,
    TaskSnapshot,
    TaskStatus,
    Timeout,
    Transition,
)
from chongming_runtime import (
    Controller,
    Pipeline,
    PipelineNode,
    PipelineOutcome,
    PipelineRun,
    TaskContext,
    TaskOutcome,
)
from chongming_runtime.pipeline._definition import JoinDecision, join_decision
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import TALLY, seeds
from reliability.storm_support import (
    CLOSED,
    EVERYWHERE,
    WAIT,
    Driver,
    Peak,
    Recorded,
    paused_violations,
    resume_all,
    run_drivers,
    stored_violations,
    trajectory_violations,
    wind_down,
)

S = TaskStatus
SLOTS = 3
OPERATIONS = 40  # per driver thread
CANCEL_WAIT = 10.0  # how long a body that began after a failure waits for its cancel
GRACEFUL = 0.2  # a woken body unwinds in well under this, even on a loaded machine
STUBBORN_FOR = 0.3  # seconds a stubborn body ignores stops (longer than the window)
FAILING = frozenset({S.FAILED, S.LOST})
ONCE_MORE = RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))


@dataclass
class Storm:
    """What one seed submitted and did, and what its bodies saw."""

    controller: Controller
    lock: threading.Lock = field(default_factory=threading.Lock)
    definitions: dict[str, Pipeline] = field(default_factory=dict)  # pipeline name -> DAG
    runs: list[PipelineRun] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)  # every node's task id
    pipeline_of: dict[str, PipelineRun] = field(default_factory=dict)  # task id -> its run
    outcomes: dict[str, PipelineOutcome] = field(default_factory=dict)  # what wait() told
    executing: int = 0
    peak: int = 0
    entries: list[str] = field(default_factory=list)  # task ids whose body began
    problems: list[str] = field(default_factory=list)  # seen by bodies as they ran
    failed_once: set[str] = field(default_factory=set)
    stopped_by: dict[str, set[str]] = field(default_factory=dict)  # task id -> stop reasons
    everywhere: set[str] = field(default_factory=lambda: {EVERYWHERE, CLOSED})  # stop_all, close
    reasons: itertools.count[int] = field(default_factory=itertools.count)

    def reason(self, what: str) -> str:
        return f"{what} #{next(self.reasons)}"

    # ------------------------------------------------------------------ the body of every node
    def body(self, ctx: TaskContext, plan: str, steps: int) -> dict[str, str]:
        pipeline_id, node_id = ctx.task_id.split(":", 1)
        with self.lock:
            self.executing += 1
            self.peak = max(self.peak, self.executing)
            self.entries.append(ctx.task_id)
        try:
            seen = self._check_entry(ctx, pipeline_id, node_id)
            if seen is not None:  # fail_fast began: this node was released before, so
                self._await_cancel(ctx, seen)  # the failure's pass cancels it
            if plan == "stubborn":
                time.sleep(STUBBORN_FOR)  # no checkpoint: a stop or a cancel cannot reach it
            for step in range(steps):
                ctx.checkpoint()
                time.sleep(0.001)  # a slice of work
                if step == steps // 2 and plan in {"fail", "fail-once"}:
                    with self.lock:
                        first = ctx.task_id not in self.failed_once
                        self.failed_once.add(ctx.task_id)
                    if plan == "fail" or first:
                        raise ValueError(f"{node_id} fails")
            ctx.checkpoint()
            return {"node": node_id}
        finally:
            with self.lock:
                self.executing -= 1

    def _check_entry(self, ctx: TaskContext, pipeline_id: str, node_id: str) -> str | None:
        """What the body sees as it begins; returns the failed node if fail_fast began."""
        c = self.controller
        pipeline = self.definitions[pipeline_id.rsplit("-", 1)[0]]
        node = next(n for n in pipeline.nodes if n.node_id == node_id)
        run = c.run(ctx.task_id)
        mine = run.status if run is not None else None
        problems = []
        if mine not in {S.STARTING, S.RUNNING, S.STOPPING, S.PAUSING}:
            problems.append(f"{ctx.task_id}: a body began while its run was {mine}")
        upstream: dict[str, TaskSnapshot] = {}
        for dep in node.depends_on:
            snap = c.get(f"{pipeline_id}:{dep}")
            assert snap is not None
            upstream[dep] = snap
        statuses = [s.status for s in upstream.values()]
        if node.depends_on and join_decision(node.join, statuses) is not JoinDecision.RELEASE:
            problems.append(
                f"{ctx.task_id}: began under join {node.join.value} while its upstream was "
                f"{[s.value for s in statuses]}"
            )
        succeeded = {d: s.outcome for d, s in upstream.items() if s.status is S.SUCCEEDED}
        given = dict(ctx.upstream)
        if any(succeeded.get(d) != v for d, v in given.items()) or (
            node.join is JoinMode.ALL_SUCCEEDED and given != succeeded
        ):
            problems.append(f"{ctx.task_id}: ctx.upstream is {given}, succeeded: {succeeded}")
        failed = None
        if pipeline.aggregation.is_fail_fast:
            for other in pipeline.nodes:
                snap = c.get(f"{pipeline_id}:{other.node_id}")
                if snap is not None and snap.status in FAILING:
                    failed = other.node_id
        with self.lock:
            self.problems.extend(problems)
        return failed

    def _await_cancel(self, ctx: TaskContext, failed: str) -> None:
        deadline = time.monotonic() + CANCEL_WAIT
        while time.monotonic() < deadline:
            ctx.checkpoint()  # raises TaskCancelled once the cancel (or a stop) arrives
            time.sleep(0.001)
        with self.lock:
            self.problems.append(
                f"{ctx.task_id}: began after node {failed!r} failed under fail_fast and was "
                f"not cancelled within {CANCEL_WAIT}s"
            )


def random_pipeline(driver: Driver, name: str) -> Pipeline:
    rng = driver.rng
    aggregation = rng.choice([AggregationPolicy.fail_fast(), AggregationPolicy.all_settled()])
    pipeline = Pipeline(name, aggregation=aggregation)
    ids: list[str] = []
    for index in range(rng.randint(3, 8)):
        deps = rng.sample(ids, k=min(len(ids), rng.choice([0, 1, 1, 2, 2, 3])))
        plan = rng.choices(
            ["ok", "long", "fail", "fail-once", "stubborn"], weights=[5, 3, 1.2, 0.8, 0.6]
        )[0]
        steps = {"ok": rng.randint(1, 4), "long": rng.randint(15, 50)}.get(plan, rng.randint(2, 8))
        join = rng.choices(list(JoinMode), weights=[2, 1, 1])[0]
        node = pipeline.node(
            "node",
            plan,
            steps,
            node_id=f"n{index}",
            depends_on=deps,
            join=join,
            retry=ONCE_MORE if plan == "fail-once" else None,
            # counted from the pipeline's submission, blocked time included (R1)
            timeout=Timeout(start=rng.uniform(0.01, 0.3)) if rng.random() < 0.12 else None,
        )
        ids.append(node.node_id)
    return pipeline


class PipelineDriver(Driver):
    """Random calls on random pipelines and nodes."""

    WEIGHTS: ClassVar[dict[str, float]] = {
        "submit": 3,
        "stop": 2,
        "pause": 2,
        "resume": 2,
        "stop_pipeline": 0.6,
        "wait": 1,
        "stop_all": 0.12,
        "retry": 0.5,
    }

    def __init__(self, storm: Storm, seed: int, index: int) -> None:
        super().__init__(storm.controller, seed, storm.tasks, storm.lock, operations=OPERATIONS)
        self.storm = storm
        self.index = index
        self.submitted = 0

    def add(self) -> list[str]:
        storm = self.storm
        name = f"p{self.index}x{self.submitted}"
        self.submitted += 1
        pipeline = random_pipeline(self, name)
        with storm.lock:
            storm.definitions[name] = pipeline
        prun = self.controller.submit_pipeline(pipeline)
        with storm.lock:
            storm.runs.append(prun)
            for task_id in prun.task_ids.values():
                storm.pipeline_of[task_id] = prun
        return list(prun.task_ids.values())

    def confirmed(self, task_id: str) -> None:
        after = self.controller.get(task_id)  # blocked all along: it has no pause (D47)
        if after is not None and after.status is S.BLOCKED:
            self.errors.append(f"pause {task_id}: confirmed on a node still blocked")

    def act(self, action: str, task_id: str) -> None:
        storm, c = self.storm, self.controller
        prun = storm.pipeline_of[task_id]
        if action == "stop_pipeline":
            reason = storm.reason(f"stop {prun.pipeline_id}")
            with storm.lock:
                for tid in prun.task_ids.values():
                    storm.stopped_by.setdefault(tid, set()).add(reason)
            prun.stop(reason)
        elif action == "stop":
            reason = storm.reason(f"stop {task_id}")
            with storm.lock:
                storm.stopped_by.setdefault(task_id, set()).add(reason)
            c.stop(task_id, reason=reason)
        elif action == "retry":
            try:
                c.retry(task_id)
            except ConfigurationError:  # a node is never retried alone (D46)
                return
            except InvalidTransition as exc:
                self.errors.append(f"retry {task_id}: refused as a task, not as a node: {exc}")
                return
            self.errors.append(f"retry {task_id}: a pipeline node was retried alone")
        elif action == "wait":
            with contextlib.suppress(TimeoutError):
                prun.wait(timeout=0.01)
        else:
            super().act(action, task_id)


@dataclass(frozen=True)
class Unreleased:
    """A node never released: the trajectory its pipeline kept (it has no run)."""

    task_id: str
    snapshot: TaskSnapshot
    transitions: Sequence[Transition]


def _recorded(c: Controller, prun: PipelineRun, node_id: str) -> Recorded:
    """A node as this process recorded it (its run, or, never released, the trajectory its
    pipeline kept)."""
    run = c.run(prun.task_ids[node_id])
    if run is not None:
        return run
    machine = prun._nodes[node_id].machine
    assert machine is not None
    return Unreleased(prun.task_ids[node_id], machine.snapshot, machine.transitions)


def expected_status(statuses: list[TaskStatus]) -> TaskStatus:
    """R16/D32, written out again: failed > stopped > succeeded > cancelled."""
    if any(s in FAILING for s in statuses):
        return S.FAILED
    if S.STOPPED in statuses:
        return S.STOPPED
    if all(s is S.SUCCEEDED for s in statuses):
        return S.SUCCEEDED
    return S.CANCELLED


@dataclass
class Settled:
    """A settled pipeline as the checks read it."""

    storm: Storm
    prun: PipelineRun
    finals: dict[str, TaskSnapshot]
    recorded: dict[str, Recorded]

    @property
    def statuses(self) -> dict[str, TaskStatus]:
        return {n: s.status for n, s in self.finals.items()}

    @property
    def failure_pass(self) -> bool:
        """fail_fast, and a node failed or was lost: its pass cancelled and skipped."""
        failing = any(s in FAILING for s in self.statuses.values())
        return self.prun.pipeline.aggregation.is_fail_fast and failing


def _said(outcome: TaskOutcome) -> tuple[object, ...]:
    """What an outcome tells: status, value, failure, at which version."""
    return outcome.status, outcome.value, outcome.failure, outcome.snapshot.status_version


def _pipeline_checks(
    storm: Storm, store: SqliteTaskStore, prun: PipelineRun, outcome: PipelineOutcome
) -> list[str]:
    c = storm.controller
    finals = prun.snapshots()
    settled = Settled(storm, prun, finals, {n: _recorded(c, prun, n) for n in finals})
    statuses = settled.statuses
    TALLY.add(**Counter(f"pipeline_storm_{s.value}" for s in statuses.values()))
    found: list[str] = []
    pid = prun.pipeline_id
    if list(outcome.nodes) != [n.node_id for n in prun.pipeline.nodes]:
        found.append(f"{pid}: outcome nodes {list(outcome.nodes)} not in definition order")
    want = expected_status(list(statuses.values()))
    if outcome.status is not want:
        found.append(f"{pid}: wait() says {outcome.status.value}, {statuses} is {want.value}")
    for node in prun.pipeline.nodes:
        snap, recorded = finals[node.node_id], settled.recorded[node.node_id]
        found.extend(trajectory_violations(recorded))
        found.extend(stored_violations(store, recorded))
        told = outcome.nodes.get(node.node_id)
        mine = TaskOutcome.from_snapshot(snap)
        if told is None or _said(told) != _said(mine):
            found.append(f"{snap.task_id}: wait() gave {told!r}, the final snapshot is {mine!r}")
        found.extend(_node_violations(settled, node))
    return found


def _node_violations(settled: Settled, node: PipelineNode) -> list[str]:
    """The table of §8.12 (R1, R16) for one node: why it ended as it did."""
    nid = node.node_id
    snap, history = settled.finals[nid], settled.recorded[nid].transitions
    tid, status, plan = snap.task_id, snap.status, node.args[0]
    statuses = settled.statuses
    entered = settled.storm.entries.count(tid)
    reached = {t.to_status for t in history}
    trail = [(t.to_status.value, t.trigger, t.reason) for t in history]
    released = S.QUEUED in reached
    kind = snap.failure.kind if snap.failure is not None else None
    timed_out = kind is FailureKind.TIMEOUT_START  # R1: its start timeout expired
    upstream = [statuses[d] for d in node.depends_on]
    join = join_decision(node.join, upstream)
    found: list[str] = []
    if entered and S.STARTING not in reached:
        found.append(f"{tid}: its body ran although it never started")
    if status is S.SKIPPED:
        if released or entered:
            found.append(f"{tid}: skipped, but it was released: {trail}")
        if join is not JoinDecision.SKIP and not settled.failure_pass:
            found.append(f"{tid}: skipped, though its upstream {upstream} let it run")
        if kind is not FailureKind.DEPENDENCY_FAILED:
            found.append(f"{tid}: skipped with the kind {kind}")
    elif status is S.CANCELLED and not timed_out:
        if not settled.failure_pass:
            found.append(f"{tid}: cancelled, but no fail_fast failure in {statuses}")
        if not released:
            found.append(f"{tid}: cancelled, but never released: {trail}")
        if kind is not FailureKind.CANCELLED:
            found.append(f"{tid}: cancelled with the kind {kind}")
    elif status is S.STOPPED:
        aimed = settled.storm.stopped_by.get(tid, set()) | settled.storm.everywhere
        if not any(t.reason in aimed for t in history):
            found.append(f"{tid}: stopped, no stop was aimed at it: {trail}")
    elif status is S.FAILED and not timed_out:
        # a fail-once node fails on its first attempt only when it was asked to end (a
        # stop, or fail_fast's cancel after another node's failure): no retry follows then
        others = [n for n, s in statuses.items() if n != nid and s in FAILING]
        asked = S.STOPPING in reached or (settled.prun.pipeline.aggregation.is_fail_fast and others)
        # an attempt whose start timeout expired before its body began spent the retry
        # (R1): the body's first run was then the last attempt (a loaded host delays starts)
        unbegun = sum(
            1
            for a in snap.attempts
            if a.failure is not None and a.failure.kind is FailureKind.TIMEOUT_START
        )
        if plan not in {"fail", "fail-once"} or (
            plan == "fail-once" and entered + unbegun < 2 and not asked
        ):
            found.append(f"{tid}: a {plan} node failed ({entered} attempts ran): {trail}")
    elif status is S.LOST and (plan != "stubborn" or kind is not FailureKind.LOST):
        found.append(f"{tid}: a {plan} node ended lost with the kind {kind}: {trail}")
    # (a lost body may begin late: its thread began the attempt, then was scheduled late)
    if status in {S.SUCCEEDED, S.FAILED} and not entered and not timed_out:
        found.append(f"{tid}: {status.value} without its body running")
    if timed_out:
        return found
    if settled.failure_pass and not released and status not in {S.SKIPPED, S.STOPPED}:
        found.append(f"{tid}: never released under fail_fast after a failure, yet {status}")
    failure_pass = settled.failure_pass
    if join is JoinDecision.RELEASE and not failure_pass and status in {S.SKIPPED, S.CANCELLED}:
        found.append(f"{tid}: {status.value} though its upstream {upstream} released it")
    return found


def _settle_all(storm: Storm, store: SqliteTaskStore) -> list[str]:
    """Withdraw every pause and wait for every pipeline; what each ``wait()`` told is in the
    store already (durable before told, D32)."""
    resume_all(storm.controller)
    found: list[str] = []
    for prun in storm.runs:
        try:
            told = prun.wait(WAIT)
        except TimeoutError as exc:
            found.append(f"{prun.pipeline_id}: {exc} ({prun.snapshots()})")
            continue
        storm.outcomes[prun.pipeline_id] = told
        for node in told.nodes.values():
            kept = store.get(node.task_id)
            if kept is None or kept.status is not node.status:
                found.append(f"{node.task_id}: wait() told {node.status}, the store has {kept}")
    return found


def _storm(tmp_path: Path, seed: int) -> list[str]:
    store = SqliteTaskStore(tmp_path / f"pipelines-{seed}.db")
    controller = Controller(
        store=store,
        concurrency=ConcurrencyPolicy(max_parallel=SLOTS),
        graceful_stop=GRACEFUL,
        pause_timeout=0.05,
    )
    storm = Storm(controller)
    controller.register("node", storm.body)
    drivers = [PipelineDriver(storm, seed * 10 + i, i) for i in range(2)]
    found: list[str] = []
    try:
        with Peak(lambda: controller.active_count) as active:  # blocked nodes hold no slot
            found.extend(run_drivers(drivers))
        # odd seeds: close() in the middle of it all, pauses and all; it stops and settles
        # every pipeline (the stubborn bodies it abandons return within STUBBORN_FOR)
        if seed % 2 == 0:
            found.extend(_settle_all(storm, store))
        found.extend(wind_down(controller, lambda: storm.executing, resume=seed % 2 == 0))
        for prun in storm.runs:
            if not prun.done:
                found.append(f"{prun.pipeline_id}: not done once close() returned")
            else:
                storm.outcomes.setdefault(prun.pipeline_id, prun.wait(0))
        for driver in drivers:
            found.extend(driver.errors)
        found.extend(storm.problems)
        if storm.peak > SLOTS:
            found.append(f"{storm.peak} bodies executed at once with {SLOTS} slots")
        if active.value > SLOTS:
            found.append(f"active_count reached {active.value} with {SLOTS} slots")
        if controller.persist_failures:
            found.append(f"writes failed: {controller.persist_failures}")
        for prun in storm.runs:
            if prun.pipeline_id not in storm.outcomes:
                continue
            if prun.wait(0) != storm.outcomes[prun.pipeline_id]:
                found.append(f"{prun.pipeline_id}: wait() after close() says otherwise")
            found.extend(_pipeline_checks(storm, store, prun, storm.outcomes[prun.pipeline_id]))
        recorded = {
            tid: _recorded(controller, prun, nid)
            for prun in storm.runs
            for nid, tid in prun.task_ids.items()
        }
        found.extend(paused_violations(recorded, drivers))
    finally:
        try:
            controller.close(timeout=WAIT)  # a no-op unless the storm raised before its close
        finally:
            store.close()
    TALLY.add(
        pipeline_storm_pipelines=len(storm.runs),
        pipeline_storm_nodes=sum(len(p.task_ids) for p in storm.runs),
        pipeline_storm_pauses=sum(len(d.paused) for d in drivers),
    )
    return found


@pytest.mark.parametrize("seed", seeds(ci=4, soak_count=150))
def test_a_storm_of_pipelines_keeps_every_join_and_every_end_honest(
    tmp_path: Path, seed: int
) -> None:
    found = _storm(tmp_path, seed)
    assert not found, "\n".join(found[:40])
