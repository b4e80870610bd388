"""`ControllerBase`: the state the parts of a `Controller` share, declared once.

`Controller` (``_controller.py``: construction, registration, submission,
pipelines, recovery) is assembled from `ControllerFlow` (``_controller_flow.py``:
scheduling, the run listener, leases), `ControllerQueries`
(``_controller_queries.py``) and `ControllerControls` (``_controller_controls.py``:
stop, pause, resume, retry, wait, commands) on top of this base.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chongming_core import (
    Clock,
    ConfigurationError,
    StateMachine,
    TaskSnapshot,
    TaskStore,
    TimerHandle,
)
from chongming_runtime.controller._capacity import Capacity, ReadyQueue
from chongming_runtime.controller._ownership import BucketOwnership
from chongming_runtime.controller._registry import TaskRegistry
from chongming_runtime.controller._scheduling_lock import SchedulingLock
from chongming_runtime.executors._base import Executor
from chongming_runtime.persistence._commands import CommandPoller
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.run._task_run import TaskRun

if TYPE_CHECKING:
    from chongming_runtime.pipeline._coordinator import PipelineCoordinator

__all__ = ["ControllerBase"]


class ControllerBase:
    """Shared state of the `Controller` parts (set by `Controller.__init__`)."""

    store: TaskStore
    owner: str
    clock: Clock
    lease_ttl: float
    touch_interval: float
    graceful_stop: float
    pause_timeout: float
    _lock: SchedulingLock
    _registry: TaskRegistry
    _runs: dict[str, TaskRun]
    _capacity: Capacity
    _ready: ReadyQueue
    _closing: bool
    _close_reason: str
    _closed: bool
    _lease_until: datetime
    _next_renewal: float
    _ticking: bool  # the touch timer was started (it runs until close)
    _writer: StoreWriter
    _tick_timer: TimerHandle | None
    _pipelines: PipelineCoordinator
    _poller: CommandPoller
    _ownership: BucketOwnership
    _executor: Executor
    _artifact_dir: str | Path | None

    def _refuse_if_closing(self) -> None:
        """Raise the error of a submit after `close()` began (checked again under the lock
        that orders a submission against close(): D45)."""
        if self._closing:
            raise ConfigurationError("this controller is closed; create a new one to submit")

    def _make_run(
        self,
        fn: Callable[..., Any],
        machine: StateMachine,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        options: Mapping[str, Any],
        *,
        upstream: Mapping[str, Any] | None = None,
        replacing: TaskRun | None = None,
        pipeline_node: bool = False,
    ) -> TaskRun:
        raise NotImplementedError

    def _stamp_lease(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        raise NotImplementedError

    def get(self, task_id: str) -> TaskSnapshot | None:
        raise NotImplementedError

    def runs(self) -> list[TaskRun]:
        raise NotImplementedError
