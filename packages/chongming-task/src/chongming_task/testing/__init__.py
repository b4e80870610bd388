"""Test helpers shipped with the library (guide §12): deterministic time, the reference store."""

from __future__ import annotations

from chongming_core import FakeClock as FakeClock
from chongming_core import InMemoryTaskStore as InMemoryTaskStore

__all__ = ["FakeClock", "InMemoryTaskStore"]
