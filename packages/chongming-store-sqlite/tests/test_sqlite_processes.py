"""Several real processes on one database file (each runs ``sqlite_worker.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from chongming_core import TaskStatus
from chongming_store_contract import BASE_TIME, build_command, build_task, build_versions
from chongming_store_sqlite import SqliteTaskStore

WORKER = Path(__file__).with_name("sqlite_worker.py")
PROCESSES = 4
TIMEOUT = 90.0


def wait_until_ready(procs: list[subprocess.Popen[str]], ready: list[Path]) -> None:
    """Wait (bounded) until every worker has loaded and announced itself."""
    deadline = time.monotonic() + TIMEOUT
    while not all(p.exists() for p in ready):
        exited = [p for p in procs if p.poll() is not None]
        assert not exited, f"a worker exited before it was ready: {exited[0].communicate()}"
        assert time.monotonic() < deadline, "workers did not become ready in time"
        time.sleep(0.01)


def run_workers(tmp_path: Path, mode: str, *args: object) -> list[dict[str, Any]]:
    """Start `PROCESSES` workers, release them together, and return their reports."""
    db = tmp_path / "tasks.db"
    go = tmp_path / f"go-{mode}-{args[0] if args else ''}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(db), str(go), f"w{i}", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    reports = []
    try:
        wait_until_ready(procs, [Path(f"{go}.w{i}.ready") for i in range(PROCESSES)])
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


def test_compare_and_set_has_exactly_one_winner_per_version(tmp_path: Path) -> None:
    final = 3 + 240
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        store.create(*build_task("race", TaskStatus.RUNNING))
    reports = run_workers(tmp_path, "cas", "race", final)

    won = Counter(v for r in reports for v in r["won"])
    assert sorted(won) == list(range(4, final + 1)), "every version was won"
    assert set(won.values()) == {1}, f"versions won twice: {[v for v, n in won.items() if n > 1]}"
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        snapshot = store.get("race")
        history = store.history("race")
    assert snapshot is not None
    assert snapshot.status_version == final
    assert [t.status_version for t in history] == list(range(1, final + 1))
    winner_of = {v: r["name"] for r in reports for v in r["won"]}
    assert all(t.actor == winner_of[t.status_version] for t in history[3:]), (
        "each stored transition was written by the worker that won its version"
    )
    # The race was real: more than one worker won, and losers saw conflicts.
    assert sum(1 for r in reports if r["won"]) > 1
    assert sum(r["conflicts"] for r in reports) > 0


def test_claims_never_overlap_while_a_lease_holds_and_reopen_after_it(tmp_path: Path) -> None:
    ids = [f"c{i:03d}" for i in range(150)]
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        for command_id in ids:
            store.submit_command(build_command(command_id, "t1", issued_at=BASE_TIME))

    first = run_workers(tmp_path, "claim", "first")
    claimed = Counter(c for r in first for c in r["claimed"])
    assert sorted(claimed) == ids, "the first round handed out every command"
    assert set(claimed.values()) == {1}, "no command went to two claimers in the first round"

    again = run_workers(tmp_path, "claim", "again")
    assert all(r["early"] == [] for r in again), "nothing is claimable while the leases hold"
    reclaimed = Counter(c for r in again for c in r["claimed"])
    assert sorted(reclaimed) == ids, "every command is handed out again once its lease ended"
    assert set(reclaimed.values()) == {1}
    completed = Counter(c for r in again for c in r["completed"])
    assert sorted(completed) == ids

    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        stored = store.commands()
    holder = {c: r["name"] for r in again for c in r["claimed"]}
    assert all(c.is_complete and c.claimed_by == holder[c.command_id] for c in stored)


def test_appends_from_many_writers_stay_contiguous_and_unique(tmp_path: Path) -> None:
    tasks, versions = 12, 30
    SqliteTaskStore(tmp_path / "tasks.db").close()
    run_workers(tmp_path, "append", tasks, versions)
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        for i in range(tasks):
            expected = list(build_versions(f"t{i}", versions).transitions)
            assert store.history(f"t{i}") == expected


def test_group_commits_from_many_processes(tmp_path: Path) -> None:
    tasks, steps = 25, 40
    SqliteTaskStore(tmp_path / "tasks.db").close()
    reports = run_workers(tmp_path, "group", tasks, steps)
    assert all(r["conflicts"] == 0 for r in reports), "workers own disjoint tasks"
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        assert len(store.query()) == PROCESSES * tasks
        for r in reports:
            for i, final in enumerate(r["final"]):
                task_id = f"{r['name']}-{i}"
                snapshot = store.get(task_id)
                assert snapshot is not None
                assert snapshot.status_version == final == steps
                versions = [t.status_version for t in store.history(task_id)]
                assert versions == list(range(1, final + 1))


def test_many_processes_open_a_new_file_at_once(tmp_path: Path) -> None:
    """The workers create the file and its schema at the same moment, without errors."""
    count = 2
    assert not (tmp_path / "tasks.db").exists()
    reports = run_workers(tmp_path, "group", count, 3)
    assert len(reports) == PROCESSES
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        assert len(store.query()) == PROCESSES * count
