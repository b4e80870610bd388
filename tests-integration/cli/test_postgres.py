"""The PostgreSQL variants of ``run``, ``ps`` and ``stop`` (``--dsn``), against the CI server.

The ``postgresql`` store URL names no schema, so each test gets a database of its own
(created from the test server's DSN and dropped afterwards).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from cli_support import Workspace, finish
from psycopg import sql

from chongming_core import TaskStatus
from chongming_store_postgres import PostgresTaskStore

TASKS = ("--tasks", "cli_tasks")
pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url(postgres_dsn: str) -> Iterator[str]:
    """A fresh database on the test server, as a postgresql:// URL."""
    name = f"chongming_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(postgres_dsn)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_run_ps_and_stop_through_postgres(workspace: Workspace, pg_url: str) -> None:
    done = workspace.cli(
        "--dsn", pg_url, "run", "add", *TASKS, "--arg", "a=1", "--arg", "b=2", "--task-id", "pg-add"
    )
    assert done.returncode == 0, done.stderr
    assert "value:   3" in done.stdout

    runner = workspace.spawn("--dsn", pg_url, "run", "spin", *TASKS, "--task-id", "pg-spin")
    try:
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
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
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
