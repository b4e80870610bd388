"""Command rows nobody can read, written into the store by anyone, and ``chongming-task stop``
of a task another process runs (design D64, D65).

A row whose ``issued_at`` is no time used to kill the command poller of the node that
claimed it: ``stop`` still exited 0 ("its holder applies it at its next poll") and the
task ran on, and each node that claimed the row after its lease lost its channel too.
Here real ``chongming-task run`` processes hold the tasks, the rows are written with
SQL, and the stops through the CLI must really stop the tasks.
"""

from __future__ import annotations

import json
import sqlite3
import time

import psycopg
import pytest
from cli_support import Workspace, finish, reaped, status_is
from psycopg import sql

from chongming_core import TaskStatus
from chongming_store_postgres import PostgresTaskStore

TASKS = ("--tasks", "cli_tasks")
S = TaskStatus

#: Malformed rows: (task id, the columns' SQL expressions): a time that is no time, a naive
#: time, a blob task id, an action whose bytes are not UTF-8, a bucket that is text.
_BAD_ROWS = (
    ("w-1", {"issued_at": "'not a time'"}),
    ("w-2", {"issued_at": "'2026-01-01T00:00:00'"}),
    ("w-1", {"task_id": "X'772d31'"}),
    ("w-2", {"action": "CAST(X'ff73746f70' AS TEXT)"}),
    ("w-1", {"bucket": "'seven'"}),
    ("ghost", {"issued_by": "X'00'"}),
)


def _insert_bad_rows(db: str) -> None:
    with sqlite3.connect(db) as conn:
        for index, (task_id, raw) in enumerate(_BAD_ROWS):
            values = {
                "command_id": f"'bad-{index}'",
                "task_id": f"'{task_id}'",
                "action": "'stop'",
                "issued_by": "'mallory'",
                "issued_at": "'2026-01-01T00:00:00+00:00'",
                **raw,
            }
            conn.execute(
                f"INSERT INTO commands ({', '.join(values)}) VALUES ({', '.join(values.values())})"
            )


def test_a_stop_after_unreadable_rows_stops_the_tasks_of_both_runners(
    workspace: Workspace,
) -> None:
    db = str(workspace.db)
    runners = {
        task_id: workspace.spawn("--db", db, "run", "spin", *TASKS, "--task-id", task_id)
        for task_id in ("w-1", "w-2")
    }
    try:
        for task_id, runner in runners.items():
            workspace.wait_for(task_id, status_is(S.RUNNING), process=runner)
        _insert_bad_rows(db)
        # every bad row is settled by whichever node claims it, and both keep listening
        deadline = time.monotonic() + 20
        while True:
            with sqlite3.connect(db) as conn:
                open_rows = conn.execute(
                    "SELECT count(*) FROM commands WHERE completed_at IS NULL"
                ).fetchone()[0]
            if open_rows == 0:
                break
            assert time.monotonic() < deadline, f"{open_rows} bad rows never settled"
            time.sleep(0.05)
        for task_id in runners:
            stop = workspace.cli("--db", db, "stop", task_id, "--reason", "after the bad rows")
            assert stop.returncode == 0, stop.stderr
            assert "a command was written to the store" in stop.stdout
        results = {task_id: finish(runner) for task_id, runner in runners.items()}
    finally:
        for runner in runners.values():
            if runner.poll() is None:
                runner.kill()
                runner.communicate()
    for task_id, (code, out, err) in results.items():
        assert code == 3, (task_id, out, err)
        assert "status:  stopped" in out
        assert "Traceback" not in err
        history = json.loads(workspace.cli("--db", db, "history", task_id, "--json").stdout)
        stops = [t for t in history if t["to_status"] == "stopping"]
        assert [t["reason"] for t in stops] == ["after the bad rows"]  # nothing of a bad row
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT command_id, result FROM commands WHERE command_id LIKE 'bad-%' ORDER BY seq"
        ).fetchall()
    assert len(rows) == len(_BAD_ROWS)
    for (command_id, result), (_, raw) in zip(rows, _BAD_ROWS, strict=True):
        (column,) = raw
        assert result.startswith("rejected: the command row cannot be read: "), (command_id, result)
        assert column in result


# ---------------------------------------------------------------- PostgreSQL
# `pg_url` (a fresh database on the test server) comes from the package conftest
@pytest.mark.postgres
def test_a_stop_after_an_infinite_issued_at_stops_the_task_on_postgres(
    workspace: Workspace, pg_url: str
) -> None:
    runner = workspace.spawn("--dsn", pg_url, "run", "spin", *TASKS, "--task-id", "pg-spin")
    with reaped(runner):
        with PostgresTaskStore(pg_url, min_size=0, max_size=1) as store:
            deadline = time.monotonic() + 20
            while (snap := store.get("pg-spin")) is None or snap.status is not S.RUNNING:
                assert runner.poll() is None, runner.communicate()
                assert time.monotonic() < deadline, f"pg-spin never ran; last seen {snap}"
                time.sleep(0.02)
            assert isinstance(store, PostgresTaskStore)
            table = sql.Identifier(store.schema, "commands")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for index, moment in enumerate(("infinity", "-infinity", "12000-01-01")):
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (command_id, task_id, action, issued_by, issued_at) "
                        "VALUES (%s, 'pg-spin', 'stop', 'mallory', %s)"
                    ).format(table),
                    (f"bad-{index}", moment),
                )
            # settled, each, by the node that claims it; the claim used to fail on the first
            # such row after leasing the batch (the rows stayed open, and good commands claimed
            # with them were lost until their lease ran out)
            deadline = time.monotonic() + 20
            query = sql.SQL("SELECT count(*) FROM {} WHERE completed_at IS NULL").format(table)
            while (left := conn.execute(query).fetchone()[0]) > 0:  # type: ignore[index]
                assert time.monotonic() < deadline, f"{left} bad rows never settled"
                time.sleep(0.05)
        stop = workspace.cli("--dsn", pg_url, "stop", "pg-spin", "--reason", "after infinity")
        assert stop.returncode == 0, stop.stderr
        code, out, err = finish(runner)
    assert code == 3, err
    assert "status:  stopped" in out
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT command_id, result FROM {} ORDER BY seq").format(table)
        ).fetchall()
    results: dict[str, str | None] = dict(rows)
    for index in range(3):
        assert (results[f"bad-{index}"] or "").startswith(
            "rejected: the command row cannot be read: issued_at is a time that cannot be decoded"
        ), results
