"""Values a store cannot keep never make a task that says ``succeeded`` while its store says
``running`` (D68-D70). The same hostile values as the store contract, on every store: what
``wait()`` tells is exactly what a fresh reader of the store sees, and nothing is left for
the writer to retry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    ConfigurationError,
    FailureKind,
    InMemoryTaskStore,
    Progress,
    TaskStatus,
    TaskStore,
)
from chongming_runtime import Controller
from chongming_store_contract import hostile_outcomes, hostile_progress, renamed_outcomes
from chongming_store_contract._checks import same_json
from chongming_store_sqlite import SqliteTaskStore

S = TaskStatus
WAIT = 30.0

#: A store and a way to open a fresh reader on the same data.
Opened = tuple[TaskStore, Callable[[], TaskStore]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    opened: list[TaskStore] = []

    def track(store: TaskStore) -> TaskStore:
        opened.append(store)
        return store

    if request.param == "memory":
        memory = InMemoryTaskStore()
        yield memory, lambda: memory  # one process's memory: the store is its only reader
    elif request.param == "sqlite":
        path = str(tmp_path / "tasks.db")
        yield track(SqliteTaskStore(path)), lambda: track(SqliteTaskStore(path))
    else:
        from chongming_store_postgres import PostgresTaskStore

        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("pg_schema")
        yield (
            track(PostgresTaskStore(dsn, schema=schema, max_size=4)),
            lambda: track(PostgresTaskStore(dsn, schema=schema, max_size=2)),
        )
    for store in opened:
        store.close()


def _run_all(store: TaskStore, values: dict[str, Any]) -> dict[str, Any]:
    """Run one task per value (returning it); the outcomes told, by name."""
    controller = Controller(store=store, max_parallel=4)
    try:
        controller.register("give", lambda ctx, name: values[name])
        runs = {name: controller.submit("give", name) for name in values}
        told = {name: run.wait(WAIT) for name, run in runs.items()}
        assert controller._writer.flush(), controller._writer.failures
        assert controller._writer.failures == [], "a write was refused after the task was told"
    finally:
        controller.close(timeout=WAIT)
    return {name: (runs[name].task_id, outcome) for name, outcome in told.items()}


def test_an_outcome_no_store_can_keep_ends_failed_in_the_store_too(stores: Opened) -> None:
    store, fresh_reader = stores
    told = _run_all(store, hostile_outcomes())
    reader = fresh_reader()
    for name, (task_id, outcome) in told.items():
        assert outcome.status is S.FAILED, name
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.RESULT_INVALID, name
        assert "cannot be stored as JSON: " in outcome.failure.message, name
        assert "the result" in outcome.failure.message, name
        stored = reader.get(task_id)
        assert stored is not None, name
        assert (stored.status, stored.failure, stored.outcome) == (
            S.FAILED,
            outcome.failure,
            None,
        ), name


def test_an_outcome_json_renames_is_the_same_value_for_every_reader(stores: Opened) -> None:
    store, fresh_reader = stores
    told = _run_all(store, {name: value for name, (value, _) in renamed_outcomes().items()})
    reader = fresh_reader()
    for name, (task_id, outcome) in told.items():
        read_back = renamed_outcomes()[name][1]
        assert outcome.status is S.SUCCEEDED, name
        stored = reader.get(task_id)
        assert stored is not None, name
        assert stored.status is S.SUCCEEDED, name
        assert same_json(outcome.value, read_back), name
        assert same_json(stored.outcome, read_back), name


def test_progress_no_store_can_keep_is_refused_at_the_call(stores: Opened) -> None:
    store, fresh_reader = stores
    reports = hostile_progress()
    controller = Controller(store=store, max_parallel=4)

    def report(ctx: Any, name: str) -> str:
        p = reports[name]
        try:
            ctx.progress(p.done, total=p.total, unit=p.unit, message=p.message)
        except ConfigurationError as refused:
            return f"refused: {refused}"
        return "accepted"

    try:
        controller.register("report", report)
        runs = {name: controller.submit("report", name) for name in reports}
        told = {name: run.wait(WAIT) for name, run in runs.items()}
        assert controller._writer.flush(), controller._writer.failures
        assert controller._writer.failures == []
    finally:
        controller.close(timeout=WAIT)
    reader = fresh_reader()
    for name, outcome in told.items():
        assert outcome.status is S.SUCCEEDED, name
        # informational text is kept escaped (D48); everything else is refused at the call
        expected = "accepted" if "lone surrogate" in name else "refused: progress"
        assert str(outcome.value).startswith(expected), (name, outcome.value)
        stored = reader.get(runs[name].task_id)
        assert stored is not None, name
        assert stored.status is S.SUCCEEDED, name
        if expected == "accepted":
            assert stored.progress == Progress(done=1, message="caf\\udce9"), name
        else:
            assert stored.progress is None, name


def test_an_outcome_beyond_sqlite_s_length_limit_ends_failed_in_the_store_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A limit of one store only (SQLITE_LIMIT_LENGTH, lowered here to 3 MiB): SQLite refused
    the row ("string or blob too big") after the task was told it succeeded."""
    import sqlite3

    from chongming_store_sqlite._opening import connect as opened

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = opened(*args, **kwargs)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 3 << 20)
        return conn

    monkeypatch.setattr("chongming_store_sqlite._store.connect", connect)
    path = str(tmp_path / "tasks.db")
    store = SqliteTaskStore(path)
    try:
        told = _run_all(store, {"five megabytes": "x" * (5 << 20), "one megabyte": "x" * (1 << 20)})
    finally:
        store.close()
    with SqliteTaskStore(path) as reader:
        task_id, outcome = told["five megabytes"]
        assert outcome.failure is not None
        assert outcome.failure.kind is FailureKind.RESULT_INVALID
        assert "more than the 2,097,152 bytes this SQLite store keeps" in outcome.failure.message
        stored = reader.get(task_id)
        assert stored is not None
        assert stored.status is S.FAILED
        task_id, outcome = told["one megabyte"]
        stored = reader.get(task_id)
        assert outcome.ok
        assert stored is not None
        assert stored.outcome == "x" * (1 << 20)
