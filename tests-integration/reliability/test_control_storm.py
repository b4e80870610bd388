"""A storm of controls in one process: two threads submit, stop, pause, resume and retry.

Each seed drives one `Controller` (three slots, a named resource of one unit,
retries with no backoff, a short graceful window) over a SQLite file with two
driver threads making random calls on random tasks while the bodies run: quick
ones, ones that checkpoint in a loop, ones that fail once, and stubborn ones
that ignore stops for longer than the graceful window. Then everything is
resumed and the controller closed.

Asserted afterwards, for every seed:

* never more bodies executing at once than slots, nor more than one holding the
  resource (an abandoned body counts until it returns: D54);
* a body runs only inside an attempt its run recorded as running, and a task
  stopped before it started never ran its body;
* every ``pause()`` that returned True is matched by a ``paused`` transition
  recorded after the call began;
* every trajectory is the contiguous chain 1..n of legal moves (the transition
  table) and ends terminal, and the store holds exactly that trajectory and the
  same final snapshot; no write failed;
* every ``lost`` end is a stubborn body's, with the kind ``lost``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from chongming_core import ConcurrencyPolicy
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import TALLY, seeds
from reliability.storm_support import (
    CURRENT,
    GRACEFUL,
    SLOTS,
    WAIT,
    Bodies,
    ControlDriver,
    control_violations,
    run_drivers,
    wind_down,
)


def _storm(tmp_path: Path, seed: int) -> list[str]:
    bodies = Bodies()
    store = SqliteTaskStore(tmp_path / f"storm-{seed}.db")
    controller = Controller(
        store=store,
        concurrency=ConcurrencyPolicy(max_parallel=SLOTS, limits={"gpu": 1}),
        graceful_stop=GRACEFUL,
        pause_timeout=0.05,
    )
    CURRENT[:] = [controller]
    controller.register("work", bodies.body)
    tasks: list[str] = []
    lock = threading.Lock()
    drivers = [ControlDriver(controller, seed * 10 + i, tasks, lock) for i in range(2)]
    try:
        found = run_drivers(drivers)
        found.extend(wind_down(controller, bodies.executing_count))
        for driver in drivers:
            found.extend(driver.errors)
        if controller.persist_failures:
            found.append(f"writes failed: {controller.persist_failures}")
        found.extend(control_violations(controller, store, bodies, drivers))
    finally:
        try:
            controller.close(timeout=WAIT)  # a no-op unless the storm raised before its close
        finally:
            CURRENT.clear()
            store.close()
    TALLY.add(storm_tasks=len(tasks), storm_pauses=sum(len(d.paused) for d in drivers))
    return found


@pytest.mark.parametrize("seed", seeds(ci=6, soak_count=200))
def test_a_storm_of_controls_keeps_every_trajectory_and_every_limit(
    tmp_path: Path, seed: int
) -> None:
    found = _storm(tmp_path, seed)
    assert not found, "\n".join(found[:40])
