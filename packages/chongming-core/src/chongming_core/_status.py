"""Lifecycle statuses and the transition table (guide §9.1, §9.2).

The table is data, not code: every status maps to the exact set of statuses it
may move to, and the six terminal statuses map to an explicitly empty set.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "ACTIVE_STATUSES",
    "NON_TERMINAL_STATUSES",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "TaskStatus",
    "allowed_targets",
]


#: The values of the terminal and the active statuses (see `TaskStatus`), for its members.
_TERMINAL_VALUES = frozenset({"succeeded", "failed", "stopped", "cancelled", "skipped", "lost"})
_ACTIVE_VALUES = frozenset({"starting", "running", "pausing", "stopping"})


class TaskStatus(StrEnum):
    """The lifecycle stage of a task, and nothing else.

    Attempt counts, progress, health and results are separate fields of
    `TaskSnapshot`; they are never folded into this enum.

    Attributes:
        is_terminal: True for the six statuses that have no exits.
        is_active: True while an executor holds the task (starting, running, pausing,
            stopping).
    """

    # plain attributes of each member, set once: the runtime asks them at every transition
    is_terminal: bool
    is_active: bool

    PENDING = "pending"
    BLOCKED = "blocked"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    RETRY_WAIT = "retry_wait"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    LOST = "lost"

    def __init__(self, value: str) -> None:
        self.is_terminal = value in _TERMINAL_VALUES
        self.is_active = value in _ACTIVE_VALUES


_S = TaskStatus

TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(
    {_S.SUCCEEDED, _S.FAILED, _S.STOPPED, _S.CANCELLED, _S.SKIPPED, _S.LOST}
)
NON_TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(set(_S) - TERMINAL_STATUSES)
#: Statuses in which an executor is holding the task; control actions on them are buffered.
ACTIVE_STATUSES: frozenset[TaskStatus] = frozenset(
    {_S.STARTING, _S.RUNNING, _S.PAUSING, _S.STOPPING}
)

_EMPTY: frozenset[TaskStatus] = frozenset()

#: The complete transition table of guide §9.2.
TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = MappingProxyType(
    {
        _S.PENDING: frozenset({_S.BLOCKED, _S.QUEUED, _S.SKIPPED, _S.CANCELLED, _S.STOPPED}),
        _S.BLOCKED: frozenset({_S.QUEUED, _S.SKIPPED, _S.CANCELLED, _S.STOPPED}),
        _S.QUEUED: frozenset({_S.STARTING, _S.PAUSED, _S.SKIPPED, _S.STOPPED, _S.CANCELLED}),
        _S.STARTING: frozenset(
            {
                _S.RUNNING,
                _S.RETRY_WAIT,
                _S.PAUSING,
                _S.STOPPING,
                _S.FAILED,
                _S.CANCELLED,
                _S.LOST,
            }
        ),
        _S.RUNNING: frozenset(
            {
                _S.SUCCEEDED,
                _S.FAILED,
                _S.RETRY_WAIT,
                _S.PAUSING,
                _S.STOPPING,
                _S.CANCELLED,
                _S.LOST,
            }
        ),
        _S.PAUSING: frozenset(
            {_S.PAUSED, _S.RUNNING, _S.STOPPING, _S.FAILED, _S.CANCELLED, _S.LOST}
        ),
        _S.PAUSED: frozenset({_S.QUEUED, _S.RUNNING, _S.STOPPED, _S.CANCELLED}),
        _S.RETRY_WAIT: frozenset(
            {_S.STARTING, _S.QUEUED, _S.PAUSED, _S.STOPPED, _S.FAILED, _S.CANCELLED}
        ),
        _S.STOPPING: frozenset({_S.STOPPED, _S.SUCCEEDED, _S.FAILED, _S.LOST}),
        _S.SUCCEEDED: _EMPTY,
        _S.FAILED: _EMPTY,
        _S.STOPPED: _EMPTY,
        _S.CANCELLED: _EMPTY,
        _S.SKIPPED: _EMPTY,
        _S.LOST: _EMPTY,
    }
)


def allowed_targets(status: TaskStatus) -> frozenset[TaskStatus]:
    """The statuses `status` may move to according to the table."""
    return TRANSITIONS[status]
