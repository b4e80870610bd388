"""The names of the actions that move a task (the ``trigger`` of a `Transition`).

A trigger is ``<layer>:<action>``: who caused the change and what it was.
"""

from __future__ import annotations

__all__ = [
    "ABORT_PAUSE",
    "BLOCK",
    "CANCEL",
    "FAIL",
    "FORCE",
    "LAUNCH",
    "LOSE",
    "PAUSE",
    "PAUSED",
    "QUEUE",
    "RESET",
    "RESUME",
    "RETRY",
    "RETRY_WAIT",
    "SKIP",
    "START",
    "STOP",
    "STOPPED",
    "SUCCEED",
]

BLOCK = "scheduler:blocked"
QUEUE = "scheduler:queued"
START = "scheduler:dispatched"
LAUNCH = "executor:launched"
PAUSE = "control:pause"
PAUSED = "runtime:paused"
ABORT_PAUSE = "runtime:pause_aborted"
RESUME = "control:resume"
STOP = "control:stop"
STOPPED = "runtime:stopped"
SUCCEED = "executor:returned"
FAIL = "executor:failed"
RETRY_WAIT = "runtime:retry_scheduled"
CANCEL = "orchestrator:cancelled"
SKIP = "orchestrator:skipped"
LOSE = "runtime:lost"
RETRY = "control:retry"
RESET = "control:reset"
FORCE = "control:force"
