"""Fixtures of the reliability suite (helpers live in `reliability_support`).

``CHONGMING_SOAK=1`` turns the repeated scenarios into the long soak run.
``CHONGMING_RELIABILITY_COUNTS=PATH`` writes the session's counts (runs, faults
injected, tasks checked, violations) to PATH as JSON; they are always printed in
the terminal summary.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `reliability` as a package
sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `--tasks reliability_cli_tasks`

from chongming_store_sqlite import SqliteTaskStore
from reliability.reliability_support import TALLY, Children, Target


@pytest.fixture
def children() -> Iterator[Children]:
    """Child processes of one test; every one is SIGKILLed (with its group) at teardown."""
    kids = Children()
    try:
        yield kids
    finally:
        kids.kill_all()


@pytest.fixture
def pg_schema(postgres_dsn: str) -> Iterator[str]:
    """A fresh schema name for one test; the schema is dropped afterwards."""
    import psycopg

    name = f"rel_{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND query ILIKE %s",
                (f"%{name}%",),
            )
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print (and optionally write) what the reliability scenarios did."""
    if not TALLY.counts:
        return
    counts = dict(sorted(TALLY.counts.items()))
    terminalreporter.write_line(f"reliability counts: {json.dumps(counts)}")
    target = os.environ.get("CHONGMING_RELIABILITY_COUNTS", "")
    if target:
        Path(target).write_text(json.dumps(counts, indent=2) + "\n", encoding="utf-8")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A SQLite file or a PostgreSQL schema, as child processes and this one open it."""
    if request.param == "sqlite":
        db = tmp_path / "tasks.db"
        return ["--db", str(db)], lambda: SqliteTaskStore(db)
    from chongming_store_postgres import PostgresTaskStore

    dsn: str = request.getfixturevalue("postgres_dsn")
    schema: str = request.getfixturevalue("pg_schema")
    return ["--dsn", dsn, "--schema", schema], lambda: PostgresTaskStore(dsn, schema=schema)
