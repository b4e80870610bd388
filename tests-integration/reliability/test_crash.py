"""Worker crashes: SIGKILL at a random moment, then reconcile from another process.

The worker (`reliability_worker.py crash`) runs a seeded mix of short, long,
failing, retry-waiting, paused and stopped tasks and pipelines, and appends a
line to its report after every ``wait()`` returned. This process kills it with
SIGKILL at a seeded random moment, then reconciles with a `FakeClock` started
past every lease (so nothing waits for the lease to run out), and checks:

* nothing is ``starting``/``running``/``pausing``/``stopping`` (or paused in place);
* everything the worker was told finished is in the store exactly so (status,
  outcome, failure kind, version): durable before told;
* every task that was executing is ``lost`` with a failure that names the lease;
* whatever is not terminal was reported adoptable (never silently stuck), and no node of
  a pipeline is left unfinished: its process is gone, so nothing would release or start
  it (guide §8.12); the waiting ones are cancelled, saying why;
* every history is the contiguous chain 1..n ending in the snapshot's status.

20 seeds by default; ``CHONGMING_SOAK=1`` runs 500.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from chongming_core import TaskStatus, TaskStore
from chongming_runtime import ReconcileReport
from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import (
    TALLY,
    Children,
    crash_violations,
    finish,
    finished_lines,
    read_report,
    reconcile_past_leases,
    seeds,
    told_violations,
    wait_for_line,
)

LEASE_TTL = 1.0


def _reconcile(store: TaskStore, *, owned_buckets: list[int] | None = None) -> ReconcileReport:
    """Reconcile as another node whose clock is past every lease of the dead worker."""
    return reconcile_past_leases(store, lease_ttl=LEASE_TTL, owned_buckets=owned_buckets)


def _kill_at_random(
    children: Children, proc_args: list[str], report: Path, rng: random.Random
) -> None:
    proc = children.start(*proc_args)
    wait_for_line(report, "ready", proc, timeout=20)
    time.sleep(rng.uniform(0.0, 0.9))
    children.kill(proc)


@pytest.mark.parametrize("seed", seeds(20, 500))
def test_sigkill_then_reconcile_sqlite(seed: int, tmp_path: Path, children: Children) -> None:
    rng = random.Random(seed)
    db = tmp_path / "tasks.db"
    report = tmp_path / "report.jsonl"
    args = ["crash", "--db", str(db), "--seed", str(seed), "--report", str(report),
            "--owner", "worker", "--lease-ttl", str(LEASE_TTL)]  # fmt: skip
    _kill_at_random(children, args, report, rng)

    lines = read_report(report)
    finished = finished_lines(lines)
    with SqliteTaskStore(db) as store:
        result = _reconcile(store)
        lost = {s.task_id for s in result.lost}
        adoptable = {s.task_id for s in result.adoptable}
        cancelled = {s.task_id for s in result.cancelled}
        violations, checked = crash_violations(store, finished, lost, adoptable, cancelled)
        statuses = {s.status for s in store.query()}
    TALLY.add(
        crash_runs=1,
        crash_faults_injected=1,
        crash_tasks_checked=checked,
        crash_reported_finished=len(finished),
        crash_lost=len(lost),
        crash_cancelled=len(cancelled),
        crash_violations=len(violations),
    )
    assert not violations, "\n".join(violations)
    assert checked > 0
    assert statuses, "the worker wrote nothing before it was killed"


@pytest.mark.postgres
@pytest.mark.parametrize("seed", seeds(3, 50))
def test_sigkill_one_of_two_postgres_nodes(
    seed: int, tmp_path: Path, children: Children, postgres_dsn: str, pg_schema: str
) -> None:
    """Node A (buckets 0-3) is killed; node B (buckets 4-7) never notices."""
    rng = random.Random(seed)
    report_a = tmp_path / "a.jsonl"
    report_b = tmp_path / "b.jsonl"
    hold = tmp_path / "release-b"
    common = ["--dsn", postgres_dsn, "--schema", pg_schema, "--seed", str(seed),
              "--num-buckets", "8"]  # fmt: skip
    # B is started first and keeps one task running until `hold` exists: it is mid-run
    # throughout A's crash and the reconcile
    node_b = children.start("crash", *common, "--report", str(report_b), "--owner", "node-b",
                            "--owned-buckets", "4,5,6,7", "--lease-ttl", "5",
                            "--hold", str(hold))  # fmt: skip
    wait_for_line(report_b, "ready", node_b, timeout=30)
    node_a = children.start("crash", *common, "--report", str(report_a), "--owner", "node-a",
                            "--owned-buckets", "0,1,2,3",
                            "--lease-ttl", str(LEASE_TTL))  # fmt: skip
    wait_for_line(report_a, "ready", node_a, timeout=30)
    time.sleep(rng.uniform(0.0, 0.8))
    children.kill(node_a)

    from chongming_store_postgres import PostgresTaskStore

    with PostgresTaskStore(postgres_dsn, schema=pg_schema) as store:
        # reconcile A's buckets while B is still running
        b_alive_during_reconcile = node_b.poll() is None
        result = _reconcile(store, owned_buckets=[0, 1, 2, 3])
        hold.touch()
        code, err = finish(node_b, timeout=60)
        assert code == 0, err
        lines_a, lines_b = read_report(report_a), read_report(report_b)
        finished_a, finished_b = finished_lines(lines_a), finished_lines(lines_b)
        lost = {s.task_id for s in result.lost}
        adoptable = {s.task_id for s in result.adoptable}
        cancelled = {s.task_id for s in result.cancelled}
        violations, checked = crash_violations(
            store, finished_a | finished_b, lost, adoptable, cancelled
        )
        tasks = store.query()
        b_tasks = [s for s in tasks if s.lease_owner == "node-b"]
        for snap in b_tasks:
            if not snap.is_terminal:
                violations.append(
                    f"{snap.task_id}: node B finished but left it {snap.status.value}"
                )
            if snap.task_id not in finished_b:
                violations.append(f"{snap.task_id}: node B never saw it finish")
            if any(t.actor == "reconciler" for t in store.history(snap.task_id)):
                violations.append(f"{snap.task_id}: node B's task was changed by the reconciler")
        violations.extend(told_violations(store, finished_b))
        done_b = next(line for line in lines_b if line["event"] == "done")
        violations.extend(f"node B persist failure: {e}" for e in done_b["persist_failures"])
        assert {s.bucket for s in b_tasks} <= {4, 5, 6, 7}
        assert not any(s.task_id in lost for s in b_tasks)
    TALLY.add(
        pg_crash_runs=1,
        pg_crash_faults_injected=1,
        pg_crash_tasks_checked=checked,
        pg_crash_violations=len(violations),
    )
    assert not violations, "\n".join(violations)
    assert b_alive_during_reconcile, "node B ended before the reconcile: raise its workload"
    assert b_tasks, "node B ran nothing"
    assert all(s.status is TaskStatus.LOST or s.is_terminal or s.task_id in adoptable
               for s in tasks if s.lease_owner == "node-a")  # fmt: skip
