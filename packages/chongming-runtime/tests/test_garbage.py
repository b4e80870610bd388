"""A finished attempt leaves no reference cycle: its objects go with their last reference.

Each attempt (its control, context, heartbeat handle and closures) used to live on in
reference cycles, 16 objects per task, until a garbage collection came for them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from chongming_core import InMemoryTaskStore, TaskStatus
from chongming_runtime import Attempt, Controller, RuntimeContext
from chongming_runtime.body._control import AttemptControl


@pytest.fixture
def no_collections() -> Iterator[None]:
    """Garbage collection off for the test: what refcounting does not free stays."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def _alive(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


@pytest.mark.usefixtures("no_collections")
def test_finished_attempts_are_freed_without_a_garbage_collection() -> None:
    before = {kind: _alive(kind) for kind in (Attempt, AttemptControl, RuntimeContext)}
    controller = Controller(store=InMemoryTaskStore(), max_parallel=2)
    try:
        controller.register("beat", lambda ctx, n: ctx.heartbeat.beat() or ctx.checkpoint() or n)
        runs = [controller.submit("beat", n) for n in range(20)]
        outcomes = [run.wait(10) for run in runs]
        assert [o.status for o in outcomes] == [TaskStatus.SUCCEEDED] * 20
    finally:
        controller.close()
    del runs, outcomes
    after = {kind: _alive(kind) for kind in (Attempt, AttemptControl, RuntimeContext)}
    # (fewer, when a thread of an earlier test let go of its last attempt meanwhile)
    assert all(after[kind] <= before[kind] for kind in before), (before, after)
