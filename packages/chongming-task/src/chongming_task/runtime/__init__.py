"""The runtime layer as the guide names it (`chongming_task.runtime.executors.thread`, ...)."""

from __future__ import annotations

from chongming_runtime import RuntimeContext as RuntimeContext

__all__ = ["RuntimeContext"]
