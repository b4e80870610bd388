"""`PipelineHost`: what the pipeline coordinator may ask of the controller it serves.

The coordinator is handed one; it never sees the controller itself. Through it a
node's task is looked up and its options validated as a submission's would be, a
released node becomes a run of the controller, the nodes not yet released are
written to the store, and a pipeline submitted while the controller closes is
refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from chongming_core import Clock, StateMachine, TaskSnapshot, Transition

if TYPE_CHECKING:
    from chongming_runtime.run._task_run import TaskRun

__all__ = ["PipelineHost", "TaskDefinition"]


class TaskDefinition(Protocol):
    """A registered task as a pipeline node needs it."""

    @property
    def name(self) -> str:
        """The registered name."""
        ...

    @property
    def fn(self) -> Callable[..., Any]:
        """The body."""
        ...

    @property
    def description(self) -> str | None:
        """The task's description (written with each node)."""
        ...


class PipelineHost(Protocol):
    """The controller, as the pipeline coordinator sees it."""

    @property
    def owner(self) -> str:
        """Who acts: written in the nodes' transitions and leases."""
        ...

    @property
    def clock(self) -> Clock:
        """The clock of every node and start timeout."""
        ...

    def definition(self, task_name: str) -> TaskDefinition:
        """The registered task `task_name` (ConfigurationError when it is not)."""
        ...

    def node_options(self, task_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """A node's options checked as a submission's (ConfigurationError when one is bad,
        or when the controller is closing): ``tags``, ``priority``, ``bucket``, ``retry``,
        ``timeout`` and ``executor``, each resolved."""
        ...

    def submit_node(
        self,
        definition: TaskDefinition,
        machine: StateMachine,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        upstream: Mapping[str, Any],
    ) -> TaskRun:
        """A released node's run, held by the controller (even while it closes: its
        admission stops it then, R4); the caller starts it."""
        ...

    def write(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        """Queue a node's snapshot (and the transitions that led to it) for the store."""
        ...

    def write_durably(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        """Write a node's snapshot; returns once a flush that took it was attempted."""
        ...

    def renew_leases(self, task_ids: Iterable[str], until: datetime) -> None:
        """Queue a renewal of the nodes' leases: this node holds them `until` then."""
        ...

    def note(self, operation: str, error: str) -> None:
        """Record a failure where the operator reads them (`persist_failures`, D67)."""
        ...

    def refuse_if_closing(self) -> None:
        """Raise ConfigurationError if the controller is closing (D45)."""
        ...
