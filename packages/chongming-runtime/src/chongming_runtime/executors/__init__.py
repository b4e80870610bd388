"""Executors carry attempts: `InlineExecutor`, `ThreadExecutor`, `ProcessExecutor` (guide §7).

Each also lives in its own submodule (``executors.inline``, ``executors.thread``,
``executors.process``), the paths the guide shows.
"""

from __future__ import annotations

from chongming_runtime.executors._base import AttemptHandle as AttemptHandle
from chongming_runtime.executors._base import Executor as Executor
from chongming_runtime.executors.inline import InlineExecutor as InlineExecutor
from chongming_runtime.executors.process import ProcessExecutor as ProcessExecutor
from chongming_runtime.executors.thread import ThreadExecutor as ThreadExecutor

__all__ = ["AttemptHandle", "Executor", "InlineExecutor", "ProcessExecutor", "ThreadExecutor"]
