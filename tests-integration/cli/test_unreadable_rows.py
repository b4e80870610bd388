"""One damaged row blinds no reader: every reader of a store, with one task's row damaged.

Five healthy tasks are written as workers elsewhere left them; one of them (``crashed``)
was held by a process that died, so its lease expired and ``reconcile`` must mark it
lost. Then one column of another task's row (``victim``, also unsupervised) is
overwritten with raw SQL, as another program or a hand at a SQL prompt would, and
every reader is run: the library's queries and ``reconcile``, the CLI's ``ps``, ``ps
--json``, ``status``, ``history``, ``stats``, ``stop`` and ``reconcile``, and the
dashboard's first refresh. Each must name the victim with what is wrong and show,
count and reconcile every other task as usual, without a traceback or an
"unexpected error".
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from chongming_cli import main
from chongming_core import (
    Failure,
    FailureKind,
    FakeClock,
    StateMachine,
    StoreError,
    TaskStatus,
    TaskStore,
    unreadable_in,
)
from chongming_runtime import Controller
from chongming_store_postgres import PostgresTaskStore
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.banner import UnreadableBanner
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import static_text, wait_for

_S = TaskStatus
_START = FakeClock().now() - timedelta(days=30)  # leases of that time expired long ago
HEALTHY = ("done", "crashed", "waiting", "broken")
VICTIM = "victim"
#: Creation order: the victim sits between healthy tasks.
ORDER = ("done", "crashed", VICTIM, "waiting", "broken")


@dataclass(frozen=True)
class Mutation:
    """Raw SQL that damages the victim's row, and what the readers must say about it."""

    name: str
    statement: str
    problem: str
    params: tuple[Any, ...] = ()
    history_only: bool = False  # a transition row is damaged, the task row is intact


def _doc(field: str, value: Any) -> Mutation:
    return Mutation(
        f"document-{field}-{json.dumps(value)[:12]}",
        "UPDATE tasks SET data = json_set(data, '$.' || ?, json(?)) WHERE task_id = 'victim'",
        "",
        (field, json.dumps(value)),
    )


def _with(mutation: Mutation, name: str, problem: str) -> Mutation:
    return Mutation(name, mutation.statement, problem, mutation.params, mutation.history_only)


def _column(name: str, assignment: str, problem: str, *params: Any) -> Mutation:
    return Mutation(
        name, f"UPDATE tasks SET {assignment} WHERE task_id = 'victim'", problem, params
    )


def _transition(name: str, assignment: str, problem: str) -> Mutation:
    statement = (
        f"UPDATE transitions SET {assignment} WHERE task_id = 'victim' AND status_version = 2"
    )
    return Mutation(name, statement, problem, history_only=True)


_FAILURE = {"kind": "exception", "message": "boom", "retryable": True}
SQLITE_MUTATIONS = (
    _column("document-not-json", "data = '{nope'", "its document is not JSON"),
    _column("document-a-list", "data = '[1, 2]'", "its document must be a JSON object"),
    _column("document-a-blob", "data = X'7B7D'", "its document must be JSON text"),
    _column("document-not-utf8", "data = CAST(X'7B80' AS TEXT)", "its document must be JSON text"),
    _column("document-too-deep", "data = ?", "nested too deeply", "[" * 50000 + "]" * 50000),
    _with(_doc("status", "zombie"), "status-unknown", "status 'zombie' is not a status"),
    _column("status-column-unknown", "status = 'zombie'", "status column holds 'zombie'"),
    _column("status-missing", "data = json_remove(data, '$.status')", "status is missing"),
    _with(
        _doc("failure", {**_FAILURE, "kind": "zombie"}),
        "failure-kind-unknown",
        "failure.kind 'zombie' is not a failure kind",
    ),
    _with(_doc("failure", "boom"), "failure-a-text", "failure must be a JSON object"),
    _with(
        _doc("failure", {"kind": "exception", "retryable": True}),
        "failure-message-missing",
        "failure.message is missing",
    ),
    _with(
        _doc("failure", {**_FAILURE, "retryable": "yes"}),
        "failure-retryable-text",
        "failure.retryable must be true or false",
    ),
    _with(
        _doc("started_at", "yesterday"),
        "time-malformed",
        "started_at 'yesterday' is not an ISO-8601 time",
    ),
    _with(_doc("started_at", "2026-01-01T00:00:00"), "time-naive", "has no UTC offset"),
    _with(_doc("created_at", 5), "time-a-number", "created_at must be an ISO-8601 time"),
    _with(_doc("attempts", "oops"), "attempts-a-text", "attempts must be a list"),
    _with(_doc("attempts", None), "attempts-null", "attempts must be a list"),
    _with(_doc("attempts", [5]), "attempt-a-number", "attempts[0] must be a JSON object"),
    _with(
        _doc("attempts", [{"number": "one", "status": "failed"}]),
        "attempt-number-text",
        "attempts[0].number must be an integer",
    ),
    _with(
        _doc("attempts", [{"number": 1, "status": "zombie"}]),
        "attempt-status-unknown",
        "attempts[0].status 'zombie' is not a status",
    ),
    _with(
        _doc("attempts", [{"number": 1, "status": "failed", "started_at": "noon"}]),
        "attempt-time-malformed",
        "attempts[0].started_at 'noon' is not an ISO-8601 time",
    ),
    _with(
        _doc("attempts", [{"number": 1, "status": "failed", "failure": {"kind": "zombie"}}]),
        "attempt-failure-kind-unknown",
        "attempts[0].failure.kind 'zombie' is not a failure kind",
    ),
    _with(_doc("status_version", "7"), "version-text", "status_version must be an integer"),
    _column(
        "version-column-text", "status_version = 'seven'", "status_version column holds 'seven'"
    ),
    _with(_doc("tags", "abc"), "tags-a-text", "tags must be a list of texts"),
    _with(_doc("tags", [1, 2]), "tags-of-numbers", "tags must be a list of texts"),
    _with(_doc("label", 5), "label-a-number", "label must be text or null"),
    _with(_doc("name", None), "name-null", "name must be text"),
    _with(_doc("attempt", None), "attempt-count-null", "attempt must be an integer"),
    _with(_doc("priority", 1.5), "priority-float", "priority must be an integer"),
    _with(_doc("paused_in_place", "yes"), "paused-text", "paused_in_place must be true or false"),
    _with(_doc("bucket", "3"), "bucket-text", "bucket must be an integer or null"),
    _with(_doc("task_id", "impostor"), "another-task", "its document names task 'impostor'"),
    _column("progress-not-json", "progress = '{half'", "progress is not JSON"),
    _column("progress-wrong-shape", "progress = '{\"x\": 1}'", "progress.done is missing"),
    _column(
        "progress-done-text", 'progress = \'{"done": "half"}\'', "progress.done must be a number"
    ),
    _column("lease-malformed", "lease_until = 'soon'", "lease_until 'soon' is not an ISO-8601"),
    _column("lease-columns-disagree", "lease_until_us = 0", "lease_until_us column holds 0"),
    _column("heartbeat-malformed", "heartbeat_at = 'now'", "last_heartbeat_at 'now' is not"),
    _column("pid-text", "pid = 'abc'", "pid must be an integer or null"),
    _column("lease-owner-blob", "lease_owner = X'01'", "lease_owner must be text or null"),
    _transition("history-status-unknown", "to_status = 'zombie'", "to_status 'zombie' is not"),
    _transition("history-time-malformed", "at = 'noon'", "at 'noon' is not an ISO-8601 time"),
    _transition("history-version-text", "status_version = 'two'", "must be an integer"),
    _transition("history-actor-not-utf8", "actor = CAST(X'FF' AS TEXT)", "actor must be text"),
)

_DEEP = "[" * 5000 + "]" * 5000
POSTGRES_MUTATIONS = (
    _column("status-unknown", "status = 'zombie'", "status 'zombie' is not a status"),
    _column(
        "failure-kind-unknown",
        "failure = %s::jsonb",
        "failure.kind 'zombie' is not a failure kind",
        json.dumps({**_FAILURE, "kind": "zombie"}),
    ),
    _column("failure-a-text", "failure = '\"boom\"'", "failure must be a JSON object"),
    _column("attempts-a-text", "attempts = '\"oops\"'", "attempts must be a list"),
    _column("attempts-null", "attempts = 'null'", "attempts must be a list"),
    _column(
        "attempt-status-unknown",
        'attempts = \'[{"number": 1, "status": "zombie"}]\'',
        "attempts[0].status 'zombie' is not a status",
    ),
    _column("progress-wrong-shape", "progress = '{\"x\": 1}'", "progress.done is missing"),
    _column("progress-too-deep", "progress = %s::json", "progress must be a JSON object", _DEEP),
    _column("outcome-too-deep", "outcome = %s::json", "nested too deeply", _DEEP),
    _column("tags-with-null", "tags = ARRAY['a', NULL]", "tags must be a list of texts"),
    _column("time-infinite", "started_at = 'infinity'", "started_at 'infinity' is not a time"),
    _column("time-beyond-9999", "created_at = '20000-01-01'", "created_at '20000-01-01"),
    _column("time-before-year-1", "updated_at = '0044-03-15 BC'", "updated_at '0044-03-15"),
    _column("lease-infinite", "lease_until = '-infinity'", "lease_until '-infinity' is not"),
    _transition("history-status-unknown", "to_status = 'zombie'", "to_status 'zombie' is not"),
    _transition("history-time-infinite", "at = 'infinity'", "at 'infinity' is not a time"),
)


# ---------------------------------------------------------------------- the store
def seed(store: TaskStore) -> None:
    """Five tasks as workers elsewhere left them (`ORDER`); `crashed` and `victim` ran
    under a holder whose lease expired a month ago."""
    clock = FakeClock(_START)

    def machine(task_id: str) -> StateMachine:
        clock.advance(1)
        return StateMachine.create(task_id, "job", max_attempts=2, clock=clock, bucket=4)

    def running(task_id: str) -> StateMachine:
        m = machine(task_id)
        m.mark_queued(actor="node-a")
        m.mark_starting(executor="thread", actor="node-a")
        m.mark_running(actor="node-a")
        return m

    made: dict[str, StateMachine] = {}
    made["done"] = running("done")
    made["done"].mark_succeeded(outcome={"rows": 3}, actor="node-a")
    made["crashed"] = running("crashed")
    made[VICTIM] = running(VICTIM)
    made["waiting"] = machine("waiting")
    made["waiting"].mark_queued(actor="node-a")
    made["broken"] = running("broken")
    made["broken"].mark_failed(Failure.of(FailureKind.EXCEPTION, "boom"), actor="node-a")
    for task_id in ORDER:
        m = made[task_id]
        snapshot = m.snapshot
        if not snapshot.is_terminal and snapshot.status is _S.RUNNING:
            snapshot = snapshot.evolve(
                lease_owner="node-a", lease_until=_START + timedelta(seconds=30), pid=4242
            )
        store.create(snapshot, m.transitions)


# ---------------------------------------------------------------------- the readers
def _cli(location: list[str], *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*location, *args])
    return code, out.getvalue(), err.getvalue()


def _listed(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[2:] if line.strip()]


def _no_crash(err: str) -> None:
    assert "unexpected error" not in err, err
    assert "Traceback" not in err, err


def _dashboard_first_refresh(controller: Controller) -> tuple[list[str], str, bool]:
    app = DashboardApp(controller, store_label="damaged", refresh_interval=None, cursor_blink=False)
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with app.run_test(size=(150, 36)) as pilot:
            await wait_for(pilot, lambda: app.refresh_count >= 1, "the first refresh")
            banner = app.overview.query_one(UnreadableBanner)
            seen["rows"] = app.overview.query_one(TaskTable).task_ids
            seen["banner"] = static_text(banner)
            seen["shown"] = banner.display
            await pilot.press("q")

    asyncio.run(run())
    return seen["rows"], seen["banner"], seen["shown"]


def check_every_reader(
    open_store: Callable[[], TaskStore], location: list[str], mutation: Mutation
) -> None:
    """Run every reader on the damaged store (see the module docstring)."""
    readable = list(ORDER) if mutation.history_only else [t for t in ORDER if t != VICTIM]
    store = open_store()
    controller = Controller(store=store, owner="console")
    try:
        # the library
        listed = controller.list_tasks()
        assert [s.task_id for s in listed] == readable
        stats = controller.stats()
        if mutation.history_only:
            assert unreadable_in(listed) == ()
            history = controller.history(VICTIM)
            assert [t.status_version for t in history] == [1, 3]
            (row,) = unreadable_in(history)
            assert mutation.problem in row.problem
            assert "history entry" in (row.part or "")
            assert stats.total == 5
            assert stats.unreadable == ()
        else:
            (row,) = unreadable_in(listed)
            assert (row.task_id, row.part) == (VICTIM, None)
            assert mutation.problem in row.problem, row.problem
            with pytest.raises(StoreError, match="cannot be read") as caught:
                controller.get(VICTIM)
            assert caught.value.task_id == VICTIM
            assert mutation.problem in str(caught.value)
            assert [u.task_id for u in stats.unreadable] in ([], [VICTIM])
            assert stats.total + len(stats.unreadable) == 5
        assert (stats.succeeded, stats.failed, stats.queued) == (1, 1, 1)
        assert [t.to_status for t in controller.history("done")][-1] is _S.SUCCEEDED
        report = controller.reconcile(dry_run=True)
        assert [s.task_id for s in report.lost] == (
            ["crashed", VICTIM] if mutation.history_only else ["crashed"]
        )
        assert [u.task_id for u in report.unreadable] in ([], [VICTIM])
        # the dashboard's first refresh
        rows, banner, shown = _dashboard_first_refresh(controller)
        assert sorted(rows) == sorted(readable)
        if mutation.history_only:
            assert not shown
        else:
            assert shown
            assert f"task '{VICTIM}' cannot be read" in banner, banner
    finally:
        controller.close(close_store=True)

    # the console
    code, out, err = _cli(location, "ps")
    _no_crash(err)
    assert _listed(out) == readable
    if mutation.history_only:
        assert code == 0, err
    else:
        assert code == 1, err
        assert f"error: task '{VICTIM}' cannot be read" in err, err
        assert "every other task was listed" in err
    code, out, err = _cli(location, "ps", "--json")
    _no_crash(err)
    assert [d["task_id"] for d in json.loads(out)] == readable
    assert code == (0 if mutation.history_only else 1)
    victim_commands: tuple[tuple[str, str], ...] = (
        ("status", VICTIM),
        ("history", VICTIM),
        ("stop", VICTIM),
    )
    for command in victim_commands:
        code, out, err = _cli(location, *command)
        _no_crash(err)
        if mutation.history_only and command[0] != "history":
            assert code == 0, (command, err)
        else:
            assert code == 1, (command, err)
            assert "cannot be read" in err, (command, err)
    code, out, err = _cli(location, "status", "waiting")
    assert code == 0, err
    assert "queued" in out
    code, out, err = _cli(location, "stop", "waiting", "--reason", "beside a damaged row")
    assert code == 0, err
    assert "stop requested" in out
    code, out, err = _cli(location, "stats", "--json")
    _no_crash(err)
    counts = json.loads(out)
    assert (counts["succeeded"], counts["failed"]) == (1, 1)
    # reconcile for real, last: it marks the crashed task lost and leaves the victim alone
    code, out, err = _cli(location, "reconcile")
    _no_crash(err)
    assert "marked 2 lost" in out if mutation.history_only else "marked 1 lost" in out, out
    store = open_store()
    try:
        assert store.get("crashed").status is _S.LOST  # type: ignore[union-attr]
        if not mutation.history_only:
            assert [s.task_id for s in store.query()] == readable  # still damaged, untouched
            assert code == (1 if "1 unreadable" in out else 0), (out, err)
    finally:
        store.close()


# ---------------------------------------------------------------------- SQLite
@pytest.mark.parametrize("mutation", SQLITE_MUTATIONS, ids=[m.name for m in SQLITE_MUTATIONS])
def test_one_damaged_sqlite_row_blinds_no_reader(tmp_path: Path, mutation: Mutation) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as store:
        seed(store)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute(mutation.statement, mutation.params).rowcount == 1
    check_every_reader(lambda: SqliteTaskStore(path), ["--db", str(path)], mutation)


def test_a_bucket_that_is_not_a_number_is_named_by_the_bucket_counts(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as store:
        seed(store)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE tasks SET bucket = 'four' WHERE task_id = 'victim'")
    code, out, err = _cli(["--db", str(path)], "buckets", "--json")
    assert code == 1, err
    assert json.loads(out)["buckets"] == [{"bucket": 4, "tasks": 4, "owned": True}]
    assert "task 'victim' cannot be read: bucket 'four' is not an integer" in err
    code, out, err = _cli(["--db", str(path)], "ps")
    assert code == 0, err
    assert _listed(out) == list(ORDER)  # the record itself reads


# ---------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="module")
def pg_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """One fresh database for this module's PostgreSQL cases, as a postgresql:// URL."""
    dsn: str = request.getfixturevalue("postgres_dsn")
    name = f"chongming_rows_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.mark.postgres
@pytest.mark.parametrize("mutation", POSTGRES_MUTATIONS, ids=[m.name for m in POSTGRES_MUTATIONS])
def test_one_damaged_postgres_row_blinds_no_reader(pg_database: str, mutation: Mutation) -> None:
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute("DROP SCHEMA IF EXISTS chongming CASCADE")
    with PostgresTaskStore(pg_database) as store:
        seed(store)
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute("SET search_path TO chongming")
        assert admin.execute(mutation.statement, mutation.params or None).rowcount == 1
    check_every_reader(lambda: PostgresTaskStore(pg_database), ["--dsn", pg_database], mutation)
