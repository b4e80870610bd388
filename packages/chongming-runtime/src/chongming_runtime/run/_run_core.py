"""`RunCore`: the state every part of a `TaskRun` shares, declared once.

`TaskRun` is assembled from mixins — `Deadlines` (``_deadlines.py``: timeouts
and the graceful window), `Pausing` (``_pausing.py``: pause and resume) and
`Supervision` (``_supervision.py``: start, dispatch, results, stop) — on top of
this base. It holds the ``__slots__`` of the lifecycle state (so a waiting run
costs a few hundred bytes) and declares what `TaskRun` provides.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chongming_core import (
    Clock,
    Failure,
    Progress,
    RetryPolicy,
    StateMachine,
    TaskSnapshot,
    Timeout,
    TimerHandle,
    Transition,
)
from chongming_runtime.executors._attempt import Attempt, AttemptResult
from chongming_runtime.executors._base import Executor
from chongming_runtime.run._listeners import RunEvent, RunListener

if TYPE_CHECKING:
    from chongming_runtime.run._decision import AttemptEnding
    from chongming_runtime.run._pausing import PauseTicket
    from chongming_runtime.run._task_run import TaskRun

__all__ = ["RunCore"]


class RunCore:
    """Shared state of the `TaskRun` mixins (no behaviour of its own)."""

    __slots__ = (
        "_abandoned",
        "_admission_due",
        "_admitted",
        "_attempt",
        "_backoff_timer",
        "_cancel_reason",
        "_cond",
        "_dispatching",
        "_pause_ticket",
        "_progress",
        "_redispatch",
        "_retry_due",
        "_start_deadline",
        "_start_origin",
        "_start_remaining",
        "_start_requested",
        "_start_timeout_over",
        "_start_timer",
        "_stop_reason",
        "_wakeup",
    )

    # Lifecycle state (set by `Supervision._init_supervision`).
    _attempt: Attempt | None
    #: while an abandoned body still executes on its thread: who waits for it to return
    _abandoned: list[Callable[[], None]] | None
    _progress: Progress | None
    _start_requested: bool
    _admitted: bool
    _admission_due: bool
    _dispatching: bool
    _redispatch: bool
    _retry_due: bool
    _backoff_timer: TimerHandle | None
    _start_timer: TimerHandle | None
    _start_deadline: float | None
    # when the start timeout began to count (monotonic; None: at start()). A pipeline node
    # counts from its pipeline's submission, blocked time included (R1)
    _start_origin: float | None
    _start_remaining: float | None
    _start_timeout_over: bool
    _pause_ticket: PauseTicket | None
    _stop_reason: str | None
    _cancel_reason: str | None
    _cond: threading.Condition | None  # made by the first attempt
    _wakeup: threading.Event | None  # made by the inline driver

    # Provided by TaskRun.
    _machine: StateMachine
    _executor: Executor
    _policy: RetryPolicy
    _timeout: Timeout
    _graceful: float
    _pause_window: float
    _clock: Clock
    _monotonic: Callable[[], float]
    _actor: str
    _task_id: str
    _lock: threading.Lock
    _listeners: tuple[RunListener, ...]
    _outbox: list[RunEvent] | None
    _admission: Callable[[TaskRun], None] | None
    _launch_gate: Callable[[str, int, Callable[[], None]], None] | None
    _logs: deque[str] | None
    _upstream: Mapping[str, Any] | None
    _stored_outcome: Callable[[Any], Any]

    def _compose(self) -> TaskSnapshot:
        raise NotImplementedError

    def _record(self, transition: Transition) -> None:
        raise NotImplementedError

    def _deliver(self) -> None:
        raise NotImplementedError

    def _new_attempt(self) -> Attempt:
        raise NotImplementedError

    # Provided by Supervision.
    def _kick(self) -> None:
        raise NotImplementedError

    def _ending(
        self,
        attempt: Attempt | None,
        result: AttemptResult | None,
        *,
        start_timeout: Failure | None = None,
    ) -> AttemptEnding:
        raise NotImplementedError

    def _conclude(self, attempt: Attempt | None, ending: AttemptEnding) -> bool:
        raise NotImplementedError

    def _close_attempt(self, attempt: Attempt) -> None:
        raise NotImplementedError

    def _settle(self, attempt: Attempt, result: AttemptResult) -> bool:
        raise NotImplementedError

    def _leave_suspension(self, why: str) -> None:
        raise NotImplementedError

    def _stop_text(self) -> str:
        raise NotImplementedError

    # Shared helpers.
    def _notify_all(self) -> None:
        """Wake bodies held at a checkpoint (under the lock; no-op before the first hold)."""
        if self._cond is not None:
            self._cond.notify_all()

    def _condition(self) -> threading.Condition:
        """The run's condition, made on first use. Call under the lock."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._lock)
        return cond
