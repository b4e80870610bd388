"""`ThreadExecutor` (guide §7)."""

from __future__ import annotations

from chongming_runtime.executors.thread import ThreadExecutor as ThreadExecutor

__all__ = ["ThreadExecutor"]
