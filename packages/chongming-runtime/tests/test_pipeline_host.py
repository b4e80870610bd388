"""The pipeline coordinator needs nothing of a controller but the `PipelineHost` it is
handed: here a host made for the test runs a pipeline, renews its unreleased nodes'
leases and refuses a pipeline while it closes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from chongming_core import (
    ConfigurationError,
    FakeClock,
    RetryPolicy,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    TouchUpdate,
    Transition,
)
from chongming_runtime import Pipeline, TaskRun, ThreadExecutor
from chongming_runtime.pipeline._coordinator import PipelineCoordinator
from chongming_runtime.pipeline._host import PipelineHost, TaskDefinition

S = TaskStatus
WAIT = 10.0


@dataclass(frozen=True)
class Definition:
    name: str
    fn: Callable[..., Any]
    description: str | None = None


class Host:
    """A host that runs each released node on a thread and records what it is asked."""

    owner = "host-1"

    def __init__(self, tasks: Mapping[str, Callable[..., Any]]) -> None:
        self.clock = FakeClock()
        self.tasks = {name: Definition(name, fn) for name, fn in tasks.items()}
        self.closing = False
        self.written: list[tuple[str, TaskStatus]] = []
        self.durable: list[tuple[str, TaskStatus]] = []
        self.touches: list[TouchUpdate] = []
        self.coordinator: PipelineCoordinator | None = None

    def definition(self, task_name: str) -> TaskDefinition:
        if task_name not in self.tasks:
            raise ConfigurationError(f"unknown task name {task_name!r}")
        return self.tasks[task_name]

    def node_options(self, task_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
        self.refuse_if_closing()
        return {
            "tags": frozenset(),
            "priority": 0,
            "bucket": None,
            "retry": RetryPolicy(max_attempts=1),
            "timeout": None,
            "executor": ThreadExecutor(),
        }

    def submit_node(
        self,
        definition: TaskDefinition,
        machine: StateMachine,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        upstream: Mapping[str, Any],
    ) -> TaskRun:
        return TaskRun(
            definition.fn,
            args,
            kwargs,
            executor=options["executor"],
            machine=machine,
            upstream=upstream,
            actor=self.owner,
            listeners=[self],
        )

    def write(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        self.written.append((snapshot.task_id, snapshot.status))

    def write_durably(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        self.durable.append((snapshot.task_id, snapshot.status))

    def renew_leases(self, task_ids: Iterable[str], until: datetime) -> None:
        self.touches.extend(
            TouchUpdate(t, lease_owner=self.owner, lease_until=until) for t in task_ids
        )

    def note(self, operation: str, error: str) -> None:
        raise AssertionError(f"{operation} failed: {error}")

    def refuse_if_closing(self) -> None:
        if self.closing:
            raise ConfigurationError("this host is closing")

    # as the runs' listener: a node's end is written, then what follows it is decided
    def on_transition(self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot) -> None:
        if transition.to_status.is_terminal:
            self.write_durably(snapshot, (transition,))
            assert self.coordinator is not None
            self.coordinator.node_settled(snapshot)

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        """Nothing to write for progress here."""


def _coordinated(tasks: Mapping[str, Callable[..., Any]]) -> tuple[Host, PipelineCoordinator]:
    host = Host(tasks)
    handed: PipelineHost = host
    host.coordinator = PipelineCoordinator(handed)
    return host, host.coordinator


def test_a_pipeline_runs_through_its_host_alone() -> None:
    may_end = threading.Event()
    host, coordinator = _coordinated(
        {
            "fetch": lambda ctx: may_end.wait(WAIT) and 21,
            "double": lambda ctx: ctx.input("fetch") * 2,
        }
    )
    pipeline = Pipeline("p")
    fetch = pipeline.node("fetch")
    pipeline.node("double", depends_on=[fetch])
    prun = coordinator.submit(pipeline)
    ids = prun.task_ids
    assert host.written == [(ids["fetch"], S.PENDING), (ids["double"], S.BLOCKED)]
    assert coordinator.holds(ids["double"])  # blocked: held, but no run yet
    coordinator.renew(datetime(2030, 1, 1))  # the lease keeper's renewal
    assert [(t.task_id, t.lease_owner, t.lease_until) for t in host.touches] == [
        (ids["double"], "host-1", datetime(2030, 1, 1))
    ]
    may_end.set()
    outcome = prun.wait(WAIT)
    assert outcome.status is S.SUCCEEDED
    assert outcome.nodes["double"].value == 42
    assert host.durable == [(ids["fetch"], S.SUCCEEDED), (ids["double"], S.SUCCEEDED)]


def test_a_pipeline_submitted_while_its_host_closes_is_refused_before_anything_is_written() -> None:
    host, coordinator = _coordinated({"a": lambda ctx: 1})
    host.closing = True
    pipeline = Pipeline("p")
    pipeline.node("a")
    with pytest.raises(ConfigurationError, match="closing"):
        coordinator.submit(pipeline)
    assert host.written == []
    assert coordinator.held_ids() == set()


def test_an_unknown_task_name_is_refused_by_the_host() -> None:
    _, coordinator = _coordinated({"a": lambda ctx: 1})
    pipeline = Pipeline("p")
    pipeline.node("a")
    pipeline.node("missing")
    with pytest.raises(ConfigurationError, match="unknown task name 'missing'"):
        coordinator.submit(pipeline)
