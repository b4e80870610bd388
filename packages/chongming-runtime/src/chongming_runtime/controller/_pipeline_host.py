"""`ControllerHost`: the `PipelineHost` a controller hands its pipeline coordinator.

It gives the coordinator what a pipeline needs of the controller — a node's task and
options checked as a submission's, a released node made a run of the controller,
the store writer, the closing check — and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from chongming_core import Clock, StateMachine, TaskSnapshot, Transition
from chongming_runtime.controller._registry import RegisteredTask, TaskRegistry
from chongming_runtime.controller._task_options import TaskOptions
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.pipeline._host import TaskDefinition
from chongming_runtime.run._task_run import TaskRun

__all__ = ["ControllerHost"]

#: Makes a run and holds it: ``make_run(fn, machine, args, kwargs, options, upstream=...,
#: pipeline_node=True)`` (the controller's own `_make_run`).
MakeRun = Callable[..., TaskRun]


class ControllerHost:
    """A controller as its pipeline coordinator sees it (a `PipelineHost`).

    Args:
        owner: who acts.
        clock: the controller's clock.
        registry: the registered tasks.
        options: checks a node's options.
        make_run: makes a released node's run and holds it.
        writer: writes the nodes not yet released.
        refuse_if_closing: raises once the controller is closing.
    """

    __slots__ = ("_make_run", "_options", "_refuse", "_registry", "_writer", "clock", "owner")

    def __init__(
        self,
        *,
        owner: str,
        clock: Clock,
        registry: TaskRegistry,
        options: TaskOptions,
        make_run: MakeRun,
        writer: StoreWriter,
        refuse_if_closing: Callable[[], None],
    ) -> None:
        self.owner = owner
        self.clock = clock
        self._registry = registry
        self._options = options
        self._make_run = make_run
        self._writer = writer
        self._refuse = refuse_if_closing

    def definition(self, task_name: str) -> RegisteredTask:
        """The registered task (ConfigurationError when unknown)."""
        return self._registry.get(task_name)

    def node_options(self, task_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """A node's options, checked as a submission's (after the closing check)."""
        self._refuse()
        return self._options.resolve(
            self._registry.get(task_name),
            label=options.get("label"),
            tags=options.get("tags"),
            priority=options.get("priority"),
            bucket_key=options.get("bucket_key"),
            retry=options.get("retry"),
            timeout=options.get("timeout"),
            executor=options.get("executor"),
        )

    def submit_node(
        self,
        definition: TaskDefinition,
        machine: StateMachine,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        upstream: Mapping[str, Any],
    ) -> TaskRun:
        """A released node's run, held by the controller even while it closes (R4)."""
        return self._make_run(
            definition.fn, machine, args, kwargs, options, upstream=upstream, pipeline_node=True
        )

    def write(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        """Queue a node's write."""
        self._writer.record(snapshot, transitions)

    def write_durably(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        """Write a node's end; returns once a flush that took it was attempted."""
        self._writer.record(snapshot, transitions, durable=True)

    def renew_leases(self, task_ids: Iterable[str], until: datetime) -> None:
        """Queue a renewal of the nodes' leases (a mark each, D175)."""
        self._writer.renew_leases(task_ids, self.owner, until)

    def note(self, operation: str, error: str) -> None:
        """Record a failure in `persist_failures`."""
        self._writer.note(operation, error)

    def refuse_if_closing(self) -> None:
        """Raise once the controller is closing (D45)."""
        self._refuse()
