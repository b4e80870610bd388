"""Test helpers shipped with the library (guide §12): deterministic time, the reference store,
bounded waits, gates that hold task bodies, looping bodies, and a closer for controllers."""

from __future__ import annotations

from chongming_core import FakeClock as FakeClock
from chongming_core import InMemoryTaskStore as InMemoryTaskStore
from chongming_runtime.testing import Closer as Closer
from chongming_runtime.testing import Gate as Gate
from chongming_runtime.testing import checkpoint_until as checkpoint_until
from chongming_runtime.testing import spin as spin
from chongming_runtime.testing import wait_until as wait_until

__all__ = [
    "Closer",
    "FakeClock",
    "Gate",
    "InMemoryTaskStore",
    "checkpoint_until",
    "spin",
    "wait_until",
]
