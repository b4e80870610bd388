"""Stores shared by the writer and controller tests (the tests folder is put on sys.path by
conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence

from chongming_core import (
    ConcurrencyConflict,
    InMemoryTaskStore,
    SnapshotWrite,
    StoreError,
    TouchUpdate,
)

__all__ = ["FlakyStore"]


class FlakyStore(InMemoryTaskStore):
    """An in-memory store whose writes fail while `down` is set (a simulated outage)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        if self.down:
            raise StoreError("store unreachable (simulated outage)")
        return super().save_many(writes)

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        if self.down:
            raise StoreError("store unreachable (simulated outage)")
        return super().touch_many(updates)
