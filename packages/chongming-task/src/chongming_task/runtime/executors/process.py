"""`ProcessExecutor` (guide §7)."""

from __future__ import annotations

from chongming_runtime.executors.process import ProcessExecutor as ProcessExecutor

__all__ = ["ProcessExecutor"]
