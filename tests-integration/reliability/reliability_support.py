"""Helpers of the reliability suite: child processes, report files, invariant checks, tallies.

Every check returns a list of violations (human-readable strings) rather than
asserting on the first one, so a failing run shows everything that went wrong.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chongming_cli import main as cli_main
from chongming_core import (
    FailureKind,
    FakeClock,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
)
from chongming_runtime import Controller, ReconcileReport

HERE = Path(__file__).resolve().parent
WORKER = HERE / "reliability_worker.py"

#: Statuses that must never survive a crash + reconcile: they mean "someone is executing it".
HOLDING = frozenset(
    {TaskStatus.STARTING, TaskStatus.RUNNING, TaskStatus.PAUSING, TaskStatus.STOPPING}
)

#: A store for child processes: their command-line arguments, and how this process opens
#: the same store (the ``target`` fixture).
Target = tuple[list[str], Callable[[], TaskStore]]


def soak() -> bool:
    """True when the long soak run was asked for (``CHONGMING_SOAK=1``)."""
    return os.environ.get("CHONGMING_SOAK", "") not in {"", "0", "false", "no"}


def seeds(ci: int, soak_count: int) -> list[int]:
    """Seeds of a repeated scenario: `ci` of them by default, `soak_count` in the soak."""
    return list(range(soak_count if soak() else ci))


# ------------------------------------------------------------------ tallies (for the report)


@dataclass
class Tally:
    """Counts accumulated over a pytest session (written out by the conftest)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, **counts: int) -> None:
        self.counts.update(counts)

    def maximum(self, name: str, value: int) -> None:
        """Keep the largest value seen under `name`."""
        self.counts[name] = max(self.counts.get(name, 0), value)


TALLY = Tally()


# ------------------------------------------------------------------ child processes


class Children:
    """Every child process a test starts; `kill_all` ends them (process groups included)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``python reliability_worker.py ARGS`` in its own session."""
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
        self.procs.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the child's whole process group and reap it."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
            proc.kill()

    def kill_all(self) -> None:
        for proc in self.procs:
            self.kill(proc)
            if proc.stderr is not None:
                proc.stderr.close()


def finish(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, str]:
    """Wait for a child to exit on its own (bounded); returns its code and stderr."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        Children.kill(proc)
        raise AssertionError(f"worker {proc.args!r} did not finish within {timeout}s") from None
    return proc.returncode, err.decode("utf-8", "replace")


def read_report(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a worker wrote (a missing file is an empty report)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def wait_for_line(
    path: Path, event: str, proc: subprocess.Popen[bytes], timeout: float
) -> dict[str, Any]:
    """Poll a report file until it holds a line of `event` (bounded by `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in read_report(path):
            if line["event"] == event:
                return line
        if proc.poll() is not None:
            err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
            raise AssertionError(f"worker exited ({proc.returncode}) before {event!r}: {err}")
        time.sleep(0.01)
    raise AssertionError(f"no {event!r} line in {path} within {timeout}s")


def finished_lines(lines: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """task id -> the ``finished`` line the worker wrote after ``wait()`` returned."""
    return {line["task_id"]: line for line in lines if line["event"] == "finished"}


# ------------------------------------------------------------------ invariants


def history_violations(snapshot: TaskSnapshot, history: Sequence[Transition]) -> list[str]:
    """The trajectory is the contiguous chain 1..n ending in the snapshot's status (D1)."""
    found: list[str] = []
    tid = snapshot.task_id
    versions = [t.status_version for t in history]
    if versions != list(range(1, len(history) + 1)):
        found.append(f"{tid}: history versions are {versions}, not 1..{len(history)}")
    if len(history) != snapshot.status_version:
        found.append(
            f"{tid}: snapshot at version {snapshot.status_version} but {len(history)} transitions"
        )
    previous = TaskStatus.PENDING
    for t in history:
        if t.task_id != tid:
            found.append(f"{tid}: history holds a transition of {t.task_id!r}")
        if t.from_status is not previous:
            found.append(
                f"{tid}: v{t.status_version} starts from {t.from_status.value}, "
                f"but the previous transition ended {previous.value}"
            )
        previous = t.to_status
    if history and previous is not snapshot.status:
        found.append(f"{tid}: history ends {previous.value}, snapshot says {snapshot.status.value}")
    if not history and snapshot.status is not TaskStatus.PENDING:
        found.append(f"{tid}: no history but status {snapshot.status.value}")
    return found


def store_violations(store: TaskStore) -> tuple[list[str], list[TaskSnapshot]]:
    """History contiguity of every task in the store; returns the violations and the tasks."""
    tasks = store.query()
    found: list[str] = []
    for snap in tasks:
        found.extend(history_violations(snap, store.history(snap.task_id)))
    return found, tasks


def told_violations(store: TaskStore, finished: dict[str, dict[str, Any]]) -> list[str]:
    """Everything a worker was told finished is in the store exactly so."""
    found: list[str] = []
    for task_id, line in finished.items():
        snap = store.get(task_id)
        if snap is None:
            found.append(f"{task_id}: reported {line['status']} but missing from the store")
            continue
        got = {
            "status": snap.status.value,
            "outcome": snap.outcome,
            "failure_kind": None if snap.failure is None else snap.failure.kind.value,
            "version": snap.status_version,
        }
        want = {k: line[k] for k in got}
        if got != want:
            found.append(f"{task_id}: the worker was told {want}, the store holds {got}")
    return found


def crash_violations(
    store: TaskStore,
    finished: dict[str, dict[str, Any]],
    lost_ids: set[str],
    adoptable_ids: set[str],
    cancelled_ids: set[str] | None = None,
) -> tuple[list[str], int]:
    """Every invariant after SIGKILL + reconcile; returns the violations and tasks checked.
    `cancelled_ids` are the pipeline nodes the reconcile cancelled (guide §8.12)."""
    found, tasks = store_violations(store)
    found.extend(told_violations(store, finished))
    for snap in tasks:
        tid = snap.task_id
        if snap.status in HOLDING or (snap.status is TaskStatus.PAUSED and snap.paused_in_place):
            found.append(f"{tid}: still {snap.status.value} after reconcile")
        if snap.status is TaskStatus.LOST:
            if tid in finished:
                found.append(f"{tid}: reported {finished[tid]['status']} but now lost")
            if tid not in lost_ids:
                found.append(f"{tid}: lost, but not by this reconcile")
            failure = snap.failure
            if failure is None or failure.kind is not FailureKind.LOST:
                found.append(f"{tid}: lost without a failure of kind lost ({failure!r})")
            elif "lease" not in failure.message:
                found.append(f"{tid}: the lost failure does not say why: {failure.message!r}")
        if not snap.is_terminal and tid not in adoptable_ids:
            found.append(f"{tid}: {snap.status.value} but not reported adoptable (silently stuck)")
        if not snap.is_terminal and snap.pipeline_id is not None:
            found.append(f"{tid}: a node of a dead pipeline left {snap.status.value}")
    for tid in cancelled_ids or set():
        now = store.get(tid)
        if now is None or now.status is not TaskStatus.CANCELLED or now.pipeline_id is None:
            found.append(f"{tid}: reported cancelled but the store has {now!r}")
        elif now.failure is None or "lease" not in now.failure.message:
            found.append(f"{tid}: cancelled without saying why: {now.failure!r}")
    for tid in lost_ids:
        now = store.get(tid)
        if now is None or now.status is not TaskStatus.LOST:
            found.append(f"{tid}: reported lost but the store has {now!r}")
    return found, len(tasks)


def reconcile_past_leases(
    store: TaskStore, *, lease_ttl: float, owned_buckets: list[int] | None = None
) -> ReconcileReport:
    """Reconcile as another node whose clock is past every lease of a dead worker (so
    nothing waits for a lease to run out); a second reconcile must find nothing more."""
    clock = FakeClock(datetime.now(UTC) + timedelta(seconds=lease_ttl * 30))
    controller = Controller(
        store=store,
        owner="reconciler",
        clock=clock,
        num_buckets=8,
        owned_buckets=owned_buckets,
    )
    try:
        report = controller.reconcile()
        again = controller.reconcile()
    finally:
        controller.close()
    assert not again.lost, "a second reconcile found more lost tasks: the first was not complete"
    assert not again.cancelled, (
        "a second reconcile cancelled more nodes: the first was not complete"
    )
    return report


# ------------------------------------------------------------------ the CLI in-process


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``chongming_cli.main(argv)`` with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()
