"""`InlineExecutor` (guide §7)."""

from __future__ import annotations

from chongming_runtime.executors.inline import InlineExecutor as InlineExecutor

__all__ = ["InlineExecutor"]
