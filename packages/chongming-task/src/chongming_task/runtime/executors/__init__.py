"""Executors (guide §7): thread (default), inline, process."""

from __future__ import annotations

from chongming_runtime import InlineExecutor as InlineExecutor
from chongming_runtime import ProcessExecutor as ProcessExecutor
from chongming_runtime import ThreadExecutor as ThreadExecutor

__all__ = ["InlineExecutor", "ProcessExecutor", "ThreadExecutor"]
