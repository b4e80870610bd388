"""Several real processes on one schema (each runs ``pg_worker.py`` with its own store)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import TaskStatus
from chongming_store_contract import BASE_TIME, build_command, build_task, build_versions
from chongming_store_postgres import PostgresTaskStore

pytestmark = pytest.mark.postgres
Admin = psycopg.Connection[tuple[Any, ...]]
WORKER = Path(__file__).with_name("pg_worker.py")
PROCESSES = 4
TIMEOUT = 90.0


def run_workers(
    postgres_dsn: str, schema: str, tmp_path: Path, mode: str, *args: object
) -> list[dict[str, Any]]:
    """Start `PROCESSES` workers, release them together, and return their reports."""
    go = tmp_path / f"go-{mode}-{'-'.join(map(str, args))}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), mode, postgres_dsn, schema, str(go), f"w{i}"]
            + [str(a) for a in args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    reports = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while sum(1 for _ in tmp_path.glob(f"{go.name}.ready-*")) < PROCESSES:
            assert time.monotonic() < deadline, "the workers did not start"
            assert all(p.poll() is None for p in procs), "a worker exited before starting"
            time.sleep(0.01)
        go.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            assert out.strip(), f"worker printed nothing; stderr:\n{err}"
            report = json.loads(out.strip().splitlines()[-1])
            assert report["errors"] == [], f"errors reached a worker: {report['errors']}\n{err}"
            assert proc.returncode == 0, err
            reports.append(report)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    return reports


def test_processes_race_to_create_tables_task_and_every_version_with_one_winner_each(
    postgres_dsn: str,
    schema: str,
    tmp_path: Path,
    make_store: Callable[..., PostgresTaskStore],
    admin: Admin,
) -> None:
    """Four processes open a schema that does not exist yet, all create the same task,
    then race compare-and-set saves: one set of tables, one creator, one winner per version."""
    snapshot, chain = build_task("race", TaskStatus.RUNNING)
    final = snapshot.status_version + 120
    reports = run_workers(postgres_dsn, schema, tmp_path, "cas", "race", final)

    version_rows = admin.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "schema_version"))
    ).fetchone()
    assert version_rows == (1,)
    creators = [r["worker"] for r in reports if r["created"]]
    assert len(creators) == 1
    store = make_store()
    won = Counter(v for r in reports for v in r["won"])
    assert sorted(won) == list(range(snapshot.status_version + 1, final + 1))
    assert set(won.values()) == {1}, "a version was won twice"
    winner_of = {v: r["worker"] for r in reports for v in r["won"]}
    history = store.history("race")
    assert [t.status_version for t in history] == list(range(1, final + 1))
    assert history[: len(chain)] == list(chain)
    for record in history[len(chain) :]:
        assert record.actor == winner_of[record.status_version]
    stored = store.get("race")
    assert stored is not None
    assert stored.status_version == final
    assert stored.label == winner_of[final]
    assert sum(r["lost"] for r in reports) > 0, "the workers never raced"


def test_claims_never_hand_a_command_to_two_processes_before_or_after_expiry(
    postgres_dsn: str, schema: str, tmp_path: Path, make_store: Callable[..., PostgresTaskStore]
) -> None:
    store = make_store()
    total = 60
    for n in range(total):
        store.submit_command(build_command(f"c{n:03d}", f"t{n % 5}", issued_at=BASE_TIME))
    expected = [f"c{n:03d}" for n in range(total)]

    reports = run_workers(postgres_dsn, schema, tmp_path, "claim", PROCESSES, "10,69,70")
    first, still_leased, expired = (
        [c for r in reports for c in r["claimed"][phase]] for phase in range(3)
    )
    assert sorted(first) == expected, "each command claimed exactly once while leased"
    assert still_leased == [], "a command was handed out again before its lease ended"
    assert sorted(expired) == expected, "after expiry each command is handed out once more"
    holders = {c.command_id: c.claimed_by for c in store.commands()}
    assert holders == {c: r["worker"] for r in reports for c in r["claimed"][2]}
    leases = {c.lease_until for c in store.commands()}
    assert leases == {BASE_TIME + timedelta(seconds=70 + 60)}


def test_appends_from_many_processes_keep_history_contiguous(
    postgres_dsn: str, schema: str, tmp_path: Path, make_store: Callable[..., PostgresTaskStore]
) -> None:
    store = make_store()
    versions = 80
    snapshot, chain = build_versions("t1", versions)
    store.create(snapshot)
    run_workers(postgres_dsn, schema, tmp_path, "append", "t1", versions)
    history = store.history("t1")
    assert [t.status_version for t in history] == list(range(1, versions + 1))
    assert history == list(chain)


def test_processes_claiming_durable_tasks_take_each_once_within_the_fleet_limit(
    postgres_dsn: str,
    schema: str,
    tmp_path: Path,
    make_store: Callable[..., PostgresTaskStore],
) -> None:
    """Four processes claim from one schema at once (SKIP LOCKED, advisory locks for the
    fleet limit) and run what they claim: every task is claimed exactly once, the work is
    shared, and no more than two ``gpu`` tasks ever hold a slot."""
    store = make_store()
    total = 60
    for n in range(total):
        tags = ("gpu",) if n % 3 == 0 else ()
        store.create(*build_task(f"d{n:03d}", TaskStatus.QUEUED, durable=True, tags=tags))
    reports = run_workers(postgres_dsn, schema, tmp_path, "durable", 2)
    claimed = [task_id for report in reports for task_id in report["claimed"]]
    assert sorted(claimed) == [f"d{n:03d}" for n in range(total)]  # each exactly once
    assert sum(1 for report in reports if report["claimed"]) >= 2  # the work was shared
    assert max(report["most_gpu"] for report in reports) <= 2
    assert store.status_counts() == {TaskStatus.SUCCEEDED: total}
    outcomes = {s.task_id: s.outcome for s in store.query()}
    assert all(outcomes[t] == r["worker"] for r in reports for t in r["claimed"])
