"""The PostgreSQL variants of ``run``, ``ps`` and ``stop`` (``--dsn``), against the CI server.

The ``postgresql`` store URL names no schema, so each test gets a database of its own
(the ``pg_url`` fixture: created from the test server's DSN and dropped afterwards).
"""

from __future__ import annotations

import json
import shlex
import time

import psycopg
import pytest
from cli_support import Workspace, finish, reaped

from chongming_core import TaskStatus
from chongming_store_postgres import PostgresTaskStore

TASKS = ("--tasks", "cli_tasks")
pytestmark = pytest.mark.postgres


def test_run_ps_and_stop_through_postgres(workspace: Workspace, pg_url: str) -> None:
    done = workspace.cli(
        "--dsn", pg_url, "run", "add", *TASKS, "--arg", "a=1", "--arg", "b=2", "--task-id", "pg-add"
    )
    assert done.returncode == 0, done.stderr
    assert "value:   3" in done.stdout

    runner = workspace.spawn("--dsn", pg_url, "run", "spin", *TASKS, "--task-id", "pg-spin")
    with reaped(runner):
        with PostgresTaskStore(pg_url, min_size=0, max_size=1) as store:
            deadline = time.monotonic() + 20
            while (snap := store.get("pg-spin")) is None or snap.status is not TaskStatus.RUNNING:
                assert runner.poll() is None, runner.communicate()
                assert time.monotonic() < deadline, f"pg-spin never ran; last seen {snap}"
                time.sleep(0.02)
        listed = workspace.cli("--dsn", pg_url, "ps", "--status", "running", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [t["task_id"] for t in json.loads(listed.stdout)] == ["pg-spin"]
        stop = workspace.cli("--dsn", pg_url, "stop", "pg-spin", "--reason", "maintenance")
        assert stop.returncode == 0, stop.stderr
        code, out, err = finish(runner)
    assert code == 3, err
    assert "status:  stopped" in out
    everything = json.loads(workspace.cli("--dsn", pg_url, "ps", "--json").stdout)
    assert {t["task_id"]: t["status"] for t in everything} == {
        "pg-add": "succeeded",
        "pg-spin": "stopped",
    }
    missing = workspace.cli("--dsn", pg_url, "stop", "ghost")
    assert missing.returncode == 1
    assert "no task 'ghost'" in missing.stderr


def test_an_unreachable_postgres_exits_1_without_the_password(workspace: Workspace) -> None:
    done = workspace.cli("--dsn", "postgresql://app:pa55word@127.0.0.1:1/none", "ps")
    assert done.returncode == 1
    assert "pa55word" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [["ps"], ["status", "x"], ["history", "x"], ["stats"], ["buckets"],
     ["reconcile", "--dry-run"], ["dashboard"], ["stop", "x"]],
    ids=lambda argv: argv[0] if argv[-1] != "--dry-run" else "reconcile-dry-run",
)  # fmt: skip
def test_queries_never_create_the_schema(
    workspace: Workspace, pg_url: str, argv: list[str]
) -> None:
    """A query on a database without the tables (or with a mistyped ?schema=) is told so;
    it used to create the schema and its four tables."""
    for url, schema in ((pg_url, "chongming"), (f"{pg_url}?schema=typo", "typo")):
        done = workspace.cli("--dsn", url, *argv)
        assert done.returncode == 1, done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"chongming-task: error: no task database at '{url}' (from --dsn)")
        assert f"the schema '{schema}' does not exist" in line
        hint = f"chongming-task --dsn {shlex.quote(url)} run TASK --tasks MODULE"
        assert f"create one by running a task: {hint}" in line
        with psycopg.connect(pg_url, autocommit=True) as conn:
            found = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname IN ('chongming', 'typo')"
            ).fetchall()
        assert found == []
    made = workspace.cli("--dsn", pg_url, "run", "add", *TASKS, "--arg", "a=1")
    assert made.returncode == 0, made.stderr
    assert workspace.cli("--dsn", pg_url, "ps").returncode == 0
