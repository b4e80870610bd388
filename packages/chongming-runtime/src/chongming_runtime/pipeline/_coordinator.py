"""Executing pipelines (guide §8.12): release nodes as their joins allow, settle the whole.

A node that waits for upstream nodes is a real task in status ``blocked``: it is
in the store and visible to every console, but it has no run, takes no slot and
is not queued. When its join releases it, it becomes a normal run of the
controller (``blocked -> queued``) with the succeeded upstream values as
``ctx.upstream``. Under ``fail_fast`` the first real failure (``failed`` or
``lost``; never ``cancelled``) cancels every released node and skips every node
not yet released (R16).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from chongming_core import (
    Failure,
    FailureKind,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    TimerHandle,
    Transition,
)
from chongming_runtime.pipeline._definition import (
    FAIL_FAST_TRIGGERS,
    JoinDecision,
    Pipeline,
    PipelineNode,
    join_decision,
    pipeline_status,
)
from chongming_runtime.pipeline._host import PipelineHost, TaskDefinition
from chongming_runtime.run._deadlines import start_timeout_failure
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._setup import wait_timeout
from chongming_runtime.support._background import carry_on
from chongming_runtime.support._text import check_reason

if TYPE_CHECKING:
    from chongming_runtime.run._task_run import TaskRun

__all__ = ["PipelineCoordinator", "PipelineOutcome", "PipelineRun"]

_log = logging.getLogger("chongming_task.controller")

_S = TaskStatus


@dataclass(frozen=True, slots=True)
class PipelineOutcome:
    """How a pipeline ended: the overall status and every node's outcome, in definition order."""

    pipeline_id: str
    status: TaskStatus
    nodes: Mapping[str, TaskOutcome]

    @property
    def ok(self) -> bool:
        """True when every node succeeded."""
        return self.status is _S.SUCCEEDED


@dataclass(slots=True)
class _Node:
    definition: PipelineNode
    task_id: str
    registered: TaskDefinition
    options: dict[str, Any]
    machine: StateMachine | None = None  # before release
    run: TaskRun | None = None  # after release
    final: TaskSnapshot | None = None
    downstream: list[str] = field(default_factory=list)
    start_timer: TimerHandle | None = None  # its start timeout while it is blocked (R1)

    def snapshot(self) -> TaskSnapshot:
        if self.final is not None:
            return self.final
        if self.run is not None:
            return self.run.snapshot
        assert self.machine is not None
        return self.machine.snapshot

    @property
    def status(self) -> TaskStatus:
        if self.final is not None:
            return self.final.status
        if self.run is not None:
            return self.run.status
        assert self.machine is not None
        return self.machine.status

    @property
    def settled_status(self) -> TaskStatus:
        """The status downstream decisions rely on: terminal only once the node settled
        (its terminal write was made durable); until then a terminal status counts as
        still running, and the node's own settling re-decides what follows it."""
        if self.final is not None:
            return self.final.status
        status = self.status
        return _S.RUNNING if status.is_terminal else status


class PipelineRun:
    """A submitted pipeline: wait for it, stop it, look at its nodes."""

    def __init__(self, pipeline: Pipeline, pipeline_id: str) -> None:
        self.pipeline = pipeline
        self.pipeline_id = pipeline_id
        self.name = pipeline.name
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {}
        self._failing: str | None = None
        self._submitted: float = 0.0  # monotonic: start timeouts count from here (R1)
        self._done = threading.Event()
        self._coordinator: PipelineCoordinator | None = None

    def __repr__(self) -> str:
        return f"<PipelineRun {self.pipeline_id!r} {self.status.value}>"

    @property
    def task_ids(self) -> dict[str, str]:
        """node id -> task id."""
        return {n: node.task_id for n, node in self._nodes.items()}

    @property
    def done(self) -> bool:
        """True once every node has settled (is terminal, its end written to the store)."""
        return self._done.is_set()

    @property
    def status(self) -> TaskStatus:
        """``running`` until every node is terminal, then the overall status (R16)."""
        with self._lock:
            statuses = [node.status for node in self._nodes.values()]
        if not all(s.is_terminal for s in statuses):
            return _S.RUNNING
        return pipeline_status(statuses)

    def snapshots(self) -> dict[str, TaskSnapshot]:
        """node id -> the node's current snapshot."""
        with self._lock:
            return {n: node.snapshot() for n, node in self._nodes.items()}

    def outcome(self) -> PipelineOutcome:
        """The outcome now (meaningful once `done`)."""
        with self._lock:
            nodes = {
                n: TaskOutcome.from_snapshot(node.snapshot()) for n, node in self._nodes.items()
            }
        return PipelineOutcome(self.pipeline_id, self.status, nodes)

    def stop(self, reason: str | None = None) -> int:
        """Stop every unfinished node (released or not); returns how many stops were sent."""
        check_reason(reason)
        with self._lock:
            nodes = list(self._nodes.values())
        sent = 0
        for node in nodes:
            if node.run is not None:
                sent += int(node.run.stop(reason))
            elif self._coordinator is not None:
                sent += int(self._coordinator.stop_unreleased(node.task_id, reason))
        return sent

    def wait(self, timeout: float | None = None) -> PipelineOutcome:
        """Block until every node is terminal.

        Raises:
            TimeoutError: still running after `timeout`; nothing is changed.
        """
        timeout = wait_timeout(timeout)
        if not self._done.wait(timeout):
            raise TimeoutError(
                f"pipeline {self.pipeline_id!r} is still running after {timeout:g}s; "
                "wait() changed nothing"
            )
        return self.outcome()


class PipelineCoordinator:
    """The controller's pipeline engine (one per controller), which reaches its controller
    only through the `PipelineHost` it is handed."""

    def __init__(self, host: PipelineHost) -> None:
        self._host = host
        self._lock = threading.RLock()
        self._pipelines: dict[str, PipelineRun] = {}
        self._by_task: dict[str, tuple[PipelineRun, str]] = {}

    # ------------------------------------------------------------------ lookup
    def holds(self, task_id: str) -> bool:
        """True for a node of a live pipeline that has not been released yet."""
        with self._lock:
            entry = self._by_task.get(task_id)
        if entry is None:
            return False
        prun, node_id = entry
        with prun._lock:
            node = prun._nodes[node_id]
            return node.run is None and not node.status.is_terminal

    def held_ids(self) -> set[str]:
        """Ids of unreleased, unfinished nodes (this process manages them)."""
        with self._lock:
            ids = list(self._by_task)
        return {t for t in ids if self.holds(t)}

    def snapshot(self, task_id: str) -> TaskSnapshot | None:
        """The snapshot of an unreleased node held here."""
        with self._lock:
            entry = self._by_task.get(task_id)
        if entry is None:
            return None
        prun, node_id = entry
        with prun._lock:
            node = prun._nodes[node_id]
            if node.run is not None:
                return None
            return node.snapshot()

    # ------------------------------------------------------------------ submit
    def submit(self, pipeline: Pipeline) -> PipelineRun:
        c = self._host
        order = pipeline.validate()
        for node in pipeline.nodes:
            c.definition(node.task_name)  # only registered names, checked before anything runs
        pipeline_id = f"{pipeline.name}-{uuid.uuid4().hex[:8]}"
        prun = PipelineRun(pipeline, pipeline_id)
        prun._coordinator = self
        nodes: dict[str, _Node] = {}
        for definition in pipeline.nodes:
            registered = c.definition(definition.task_name)
            opts = dict(definition.options)
            options = c.node_options(definition.task_name, opts)
            task_id = f"{pipeline_id}:{definition.node_id}"
            machine = StateMachine.create(
                task_id,
                definition.task_name,
                max_attempts=options["retry"].max_attempts,
                label=opts.get("label") or definition.node_id,
                description=registered.description,
                tags=options["tags"],
                priority=options["priority"],
                bucket=options["bucket"],
                bucket_key=opts.get("bucket_key"),
                pipeline_id=pipeline_id,
                node_id=definition.node_id,
                clock=c.clock,
            )
            if definition.depends_on:
                machine.mark_blocked(
                    actor=c.owner, reason="waiting for " + ", ".join(definition.depends_on)
                )
            nodes[definition.node_id] = _Node(definition, task_id, registered, options, machine)
        for node_id, downstream in pipeline.downstream().items():
            nodes[node_id].downstream = downstream
        with prun._lock:
            prun._nodes = {n.definition.node_id: n for n in nodes.values()}
        with self._lock:
            # checked again under the lock `close()` stops pipelines under, and the pipeline
            # registered, written and timed in one go: a submit that passed the first check
            # while close() ran would register a pipeline whose nodes close() never stops or
            # waits for, or write them after close() stopped them (D45)
            c.refuse_if_closing()
            self._pipelines[pipeline_id] = prun
            for item in nodes.values():
                self._by_task[item.task_id] = (prun, item.definition.node_id)
            for item in nodes.values():
                assert item.machine is not None
                c.write(item.machine.snapshot, item.machine.transitions)
            self._arm_start_timeouts(prun)
        for node_id in order:
            if not nodes[node_id].definition.depends_on:
                self._release(prun, node_id)
        return prun

    def _arm_start_timeouts(self, prun: PipelineRun) -> None:
        """A node's start timeout counts from the pipeline's submission (R1): one that
        expires while the node is still blocked cancels it there."""
        clock = self._host.clock
        with prun._lock:
            prun._submitted = clock.monotonic()
            for node_id, node in prun._nodes.items():
                timeout = node.options["timeout"]
                if node.definition.depends_on and timeout is not None and timeout.start:
                    node.start_timer = clock.call_at(
                        prun._submitted + timeout.start,
                        partial(self._start_timeout_passed, prun, node_id),
                    )

    def _start_timeout_passed(self, prun: PipelineRun, node_id: str) -> None:
        """A blocked node's start timeout expired: ``blocked -> cancelled`` (R1)."""
        c = self._host
        with prun._lock:
            node = prun._nodes[node_id]
            machine = node.machine
            node.start_timer = None
            if node.run is not None or machine is None or machine.status.is_terminal:
                return  # released (its run counts the rest) or settled meanwhile
            message, _, failure = start_timeout_failure(
                node.task_id, node.options["timeout"].start, node.options["retry"]
            )
            transition = machine.mark_cancelled(failure=failure, actor=c.owner, reason=message)
            snapshot = machine.snapshot
        self._write_and_settle(snapshot, transition)

    # ------------------------------------------------------------------ progress
    def _release(self, prun: PipelineRun, node_id: str) -> None:
        c = self._host
        with prun._lock:
            node = prun._nodes[node_id]
            if node.run is not None or node.machine is None or node.machine.status.is_terminal:
                return
            if prun._failing is not None:
                # fail_fast began after this release was decided: the pass that began it
                # skips this node (it was unreleased then, as now), so it never runs (R16)
                return
            upstream = {}
            for dep in node.definition.depends_on:
                snap = prun._nodes[dep].snapshot()
                if snap.status is _S.SUCCEEDED:
                    upstream[dep] = snap.outcome
            machine = node.machine
            # made while closing too: its admission stops it (R4)
            run = c.submit_node(
                node.registered,
                machine,
                node.definition.args,
                node.definition.kwargs,
                node.options,
                upstream,
            )
            node.run = run
            node.machine = None
            run.start_origin = prun._submitted  # the start timeout counts blocked time (R1)
            timer, node.start_timer = node.start_timer, None
        if timer is not None:  # its expiry now finds the node released: a no-op
            timer.cancel()
        # stopped (or cancelled) between its release and its start, it settled already
        run.start_unless_ended()

    def _skip(self, prun: PipelineRun, node_id: str, failure: Failure) -> None:
        c = self._host
        with prun._lock:
            node = prun._nodes[node_id]
            machine = node.machine
            if node.run is not None or machine is None or machine.status.is_terminal:
                return
            transition = machine.mark_skipped(
                failure=failure, actor=c.owner, reason=failure.message
            )
            snapshot = machine.snapshot
        self._write_and_settle(snapshot, transition)

    def stop_unreleased(
        self, task_id: str, reason: str | None, *, actor: str | None = None
    ) -> bool:
        """Stop a node that was never released (``blocked``/``pending`` -> ``stopped``), as
        `actor` (by default this controller's owner)."""
        c = self._host
        with self._lock:
            entry = self._by_task.get(task_id)
        if entry is None:
            return False
        prun, node_id = entry
        with prun._lock:
            node = prun._nodes[node_id]
            machine = node.machine
            if node.run is not None or machine is None or machine.status.is_terminal:
                return False
            transition = machine.mark_stopped(actor=actor or c.owner, reason=reason)
            snapshot = machine.snapshot
        self._write_and_settle(snapshot, transition)
        return True

    def _write_and_settle(self, snapshot: TaskSnapshot, transition: Transition) -> None:
        """Write an unreleased node's end durably, then decide what follows it (always)."""
        try:
            self._host.write_durably(snapshot, (transition,))
        finally:
            self.node_settled(snapshot)

    def node_settled(self, snapshot: TaskSnapshot) -> None:
        """A node reached a terminal status: cancel, skip or release what follows."""
        with self._lock:
            entry = self._by_task.get(snapshot.task_id)
        if entry is None:
            return
        prun, node_id = entry
        to_cancel: list[TaskRun] = []
        to_skip: list[tuple[str, Failure]] = []
        to_release: list[str] = []
        with prun._lock:
            nodes = prun._nodes
            node = nodes[node_id]
            node.final = snapshot
            timer, node.start_timer = node.start_timer, None
            aggregation = prun.pipeline.aggregation
            if (
                aggregation.is_fail_fast
                and snapshot.status in FAIL_FAST_TRIGGERS
                and prun._failing is None
            ):
                prun._failing = node_id
                why = f"fail_fast: node {node_id!r} ended {snapshot.status.value}"
                for other in nodes.values():
                    if other.status.is_terminal:
                        continue
                    if other.run is not None:
                        to_cancel.append(other.run)
                    else:
                        to_skip.append(
                            (
                                other.definition.node_id,
                                Failure.of(
                                    FailureKind.DEPENDENCY_FAILED,
                                    f"{why}; this node was never released",
                                    retryable=False,
                                ),
                            )
                        )
            elif prun._failing is None:
                for down_id in node.downstream:
                    down = nodes[down_id]
                    if down.run is not None or down.status.is_terminal:
                        continue
                    statuses = [nodes[d].settled_status for d in down.definition.depends_on]
                    decision = join_decision(down.definition.join, statuses)
                    if decision is JoinDecision.RELEASE:
                        to_release.append(down_id)
                    elif decision is JoinDecision.SKIP:
                        bad = [
                            f"{d} {nodes[d].settled_status.value}"
                            for d in down.definition.depends_on
                            if nodes[d].settled_status.is_terminal
                            and nodes[d].settled_status is not _S.SUCCEEDED
                        ]
                        to_skip.append(
                            (
                                down_id,
                                Failure.of(
                                    FailureKind.DEPENDENCY_FAILED,
                                    f"upstream did not succeed ({', '.join(bad)}); join "
                                    f"{down.definition.join.value} does not release this node",
                                    retryable=False,
                                ),
                            )
                        )
        if timer is not None:
            timer.cancel()
        try:
            for run in to_cancel:
                self._guarded(
                    run.cancel, f"fail_fast: node {node_id!r} ended {snapshot.status.value}"
                )
            for skip_id, failure in to_skip:
                self._guarded(self._skip, prun, skip_id, failure)
            for release_id in to_release:
                self._guarded(self._release, prun, release_id)
        finally:
            with prun._lock:
                settled = all(n.final is not None for n in prun._nodes.values())
                if settled:  # every node settled
                    prun._done.set()
            if settled:
                self._forget(prun)

    def _forget(self, prun: PipelineRun) -> None:
        """Let go of a pipeline whose every node settled: its handle keeps its outcome, its
        nodes are in the store, and a long-lived controller must not hold every pipeline it
        ever ran (nor walk them on every lease renewal and stop_all())."""
        with self._lock:
            self._pipelines.pop(prun.pipeline_id, None)
            for node in prun._nodes.values():
                if self._by_task.get(node.task_id, (None,))[0] is prun:
                    del self._by_task[node.task_id]

    def _guarded(self, action: Callable[..., object], *args: Any) -> None:
        """One node's cancel, skip or release failing must not keep the others from theirs;
        what failed is logged and listed in `persist_failures` (D67): a node whose release
        failed stays blocked, and the operator must be able to see why."""
        try:
            action(*args)
        except Exception as exc:
            named = ", ".join(repr(a) for a in args if isinstance(a, str))  # ids, reasons
            step = f"pipeline step {getattr(action, '__name__', action)}({named})"
            carry_on(step, exc, _log, self._host.note)

    # ------------------------------------------------------------------ controller-wide
    def stop_all(self, reason: str | None) -> int:
        """Stop every unreleased node; returns how many were stopped."""
        with self._lock:
            ids = list(self._by_task)
        return sum(1 for task_id in ids if self.stop_unreleased(task_id, reason))

    def renew(self, until: datetime) -> None:
        """Renew the leases of unreleased nodes to `until` (they are this process's tasks
        too; a `LeaseHolder` of the controller's lease keeper)."""
        self._host.renew_leases(self.held_ids(), until)

    def wait_all(self, deadline: float | None) -> None:
        """Wait for every pipeline of this controller."""
        with self._lock:
            pipelines = list(self._pipelines.values())
        for prun in pipelines:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            prun.wait(left)
