"""A task is in the store before its body begins (design D105).

The holder (`reliability_worker.py start`) runs rounds of four tasks, on a SQLite
file or on PostgreSQL; each body creates a marker file first thing and then
checkpoints until this process creates its go file. So once this process sees a
marker, that body has begun and is held there: the store must already hold the
task's row at ``starting`` or later, read through this process's own connection.

* Watched: every task's row is read as soon as its marker is there; the last task
  is stopped from here, and that stop must find it (a stop of a task the store does
  not know answers False).
* Killed: the holder is SIGKILLed as soon as a body begins; `reconcile()` from this
  process, with a clock past every lease, then marks every task whose body began
  ``lost``.

Before D105 a body began while its row waited up to one batching interval of the
writer (20 ms): the watcher found no row, the stop answered False, and a holder
killed then left no trace of a body that ran.
"""

from __future__ import annotations

import time
from pathlib import Path
from subprocess import Popen

import pytest

from chongming_core import FailureKind, TaskStatus
from chongming_runtime import Controller
from reliability.reliability_support import (
    TALLY,
    Children,
    Target,
    finish,
    finished_lines,
    read_report,
    reconcile_past_leases,
    seeds,
    wait_for_line,
)

ROUNDS = 3
BURST = 4  # tasks of one round, started at the same moment in slots of their own
BEGUN = frozenset({TaskStatus.STARTING, TaskStatus.RUNNING})


def _holder(children: Children, target: Target, tmp_path: Path, rounds: int) -> Popen[bytes]:
    markers = tmp_path / "markers"
    markers.mkdir()
    report = tmp_path / "report.jsonl"
    proc = children.start("start", *target[0], "--report", str(report), "--owner", "holder",
                          "--lease-ttl", "30", "--tasks", str(rounds), "--burst", str(BURST),
                          "--markers", str(markers))  # fmt: skip
    wait_for_line(report, "ready", proc, timeout=30)
    return proc


def _await_marker(marker: Path, proc: Popen[bytes], timeout: float = 30.0) -> None:
    """Poll for `marker` closely (a millisecond apart), bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
            raise AssertionError(f"the holder exited ({proc.returncode}) before {marker}: {err}")
        assert time.monotonic() < deadline, f"no {marker} within {timeout}s"
        time.sleep(0.001)


def test_a_watcher_finds_the_row_of_every_body_that_began(
    target: Target, tmp_path: Path, children: Children
) -> None:
    proc = _holder(children, target, tmp_path, ROUNDS)
    markers = tmp_path / "markers"
    last = f"start-{ROUNDS - 1}-{BURST - 1}"
    seen: dict[str, TaskStatus | None] = {}
    with target[1]() as store:
        console = Controller(store=store, owner="console")
        try:
            for round_ in range(ROUNDS):
                for index in range(BURST):
                    task_id = f"start-{round_}-{index}"
                    _await_marker(markers / f"{task_id}.began", proc)
                    row = store.get(task_id)  # the body is held: its row must be there now
                    seen[task_id] = None if row is None else row.status
                    if task_id == last:
                        found = console.stop(task_id, reason="stopped by the watcher")
                    if task_id != last or not found:
                        (markers / f"{task_id}.go").touch()
        finally:
            console.close()
    code, err = finish(proc, timeout=60)
    assert code == 0, err
    finished = finished_lines(read_report(tmp_path / "report.jsonl"))
    TALLY.add(start_watch_runs=1, start_watch_tasks_checked=len(seen))
    missing = {t: None if s is None else s.value for t, s in seen.items() if s not in BEGUN}
    assert not missing, f"bodies began before their rows were stored: {missing}"
    assert found, "a stop from another process did not find a task whose body had begun"
    assert finished[last]["status"] == "stopped"
    assert {finished[t]["status"] for t in seen if t != last} == {"succeeded"}


@pytest.mark.parametrize("seed", seeds(3, 20))
def test_a_holder_killed_as_a_body_begins_leaves_it_for_reconcile_to_mark_lost(
    seed: int, target: Target, tmp_path: Path, children: Children
) -> None:
    proc = _holder(children, target, tmp_path, 1)
    markers = tmp_path / "markers"
    _await_marker(markers / "start-0-0.began", proc)
    children.kill(proc)
    began = sorted(p.name.removesuffix(".began") for p in markers.glob("*.began"))
    with target[1]() as store:
        result = reconcile_past_leases(store, lease_ttl=30)
        rows = {task_id: store.get(task_id) for task_id in began}
    lost = {s.task_id for s in result.lost}
    TALLY.add(start_crash_runs=1, start_crash_faults_injected=1, start_crash_began=len(began))
    statuses = {t: None if row is None else row.status.value for t, row in rows.items()}
    left = {t: status for t, status in statuses.items() if t not in lost}
    assert not left, f"bodies that ran left no task for reconcile() to mark lost: {left}"
    for task_id in began:
        row = rows[task_id]
        assert row is not None
        assert row.status is TaskStatus.LOST
        assert row.failure is not None
        assert row.failure.kind is FailureKind.LOST
