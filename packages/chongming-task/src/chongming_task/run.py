"""Run one task under supervision (guide §3): `run_task` blocks, `TaskRun` gives you the handle."""

from __future__ import annotations

from chongming_runtime import TaskOutcome as TaskOutcome
from chongming_runtime import TaskRun as TaskRun
from chongming_runtime import run_command as run_command
from chongming_runtime import run_task as run_task

__all__ = ["TaskOutcome", "TaskRun", "run_command", "run_task"]
