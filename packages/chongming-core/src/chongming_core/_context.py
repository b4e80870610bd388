"""`TaskContext`: what a task body sees as its first argument (guide §2, §8.13).

The runtime provides the implementation (one context per attempt); this protocol
lets libraries that only define tasks type their bodies against the core alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Heartbeat", "TaskContext"]


@runtime_checkable
class Heartbeat(Protocol):
    """The task's "I am still making progress" signal."""

    def beat(self) -> None:
        """Refresh the heartbeat without the stop/pause check of ``checkpoint()``."""
        ...


@runtime_checkable
class TaskContext(Protocol):
    """The execution context of one attempt, injected by the executor."""

    @property
    def task_id(self) -> str:
        """The task's id."""
        ...

    @property
    def task_name(self) -> str:
        """The registered name."""
        ...

    @property
    def attempt(self) -> int:
        """The 1-based attempt number."""
        ...

    @property
    def is_stop_requested(self) -> bool:
        """Whether a stop was requested (never blocks, never raises)."""
        ...

    @property
    def is_pause_requested(self) -> bool:
        """Whether a pause was requested (never blocks, never raises)."""
        ...

    @property
    def heartbeat(self) -> Heartbeat:
        """The heartbeat handle (``ctx.heartbeat.beat()``)."""
        ...

    @property
    def artifact_dir(self) -> Path:
        """This attempt's own folder for output files."""
        ...

    @property
    def upstream(self) -> Mapping[str, Any]:
        """Return values of the succeeded upstream pipeline nodes, by node id."""
        ...

    @property
    def logs(self) -> Sequence[str]:
        """The latest log lines of this task (kept in memory)."""
        ...

    def checkpoint(self) -> None:
        """Cooperate: raise `TaskCancelled` after a stop, wait while paused, refresh the
        heartbeat."""
        ...

    async def acheckpoint(self) -> None:
        """`checkpoint()` for ``async def`` bodies."""
        ...

    def progress(
        self,
        done: float,
        *,
        total: float | None = None,
        unit: str | None = None,
        message: str | None = None,
    ) -> None:
        """Report progress (side path: no version bump, no heartbeat)."""
        ...

    def log(self, message: str, *, level: int = ...) -> None:
        """Log through ``chongming_task.task.<task_id>``."""
        ...

    def warning(self, message: str) -> None:
        """Log at WARNING."""
        ...

    def error(self, message: str) -> None:
        """Log at ERROR."""
        ...

    def input(self, node_id: str, default: Any = None) -> Any:
        """The return value of upstream node `node_id`, or `default`."""
        ...
