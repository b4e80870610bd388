"""Fixtures of the PostgreSQL store tests: a fresh schema, stores on it, an admin connection."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import ClaimRequest, ClaimStart, SnapshotWrite, StartPlan, TaskStatus
from chongming_store_contract import build_task
from chongming_store_postgres import PostgresTaskStore

Admin = psycopg.Connection[tuple[Any, ...]]


def drop_schema(dsn: str, schema: str) -> None:
    """Drop `schema` with everything in it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name nobody uses yet (dropped after the test if it was created)."""
    name = f"chongming_test_{uuid.uuid4().hex}"
    yield name
    drop_schema(postgres_dsn, name)


@pytest.fixture
def admin(postgres_dsn: str) -> Iterator[Admin]:
    """A superuser connection in autocommit mode."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def make_store(postgres_dsn: str, schema: str) -> Iterator[Callable[..., PostgresTaskStore]]:
    """Open stores on the test's schema (keyword arguments go to `PostgresTaskStore`)."""
    opened: list[PostgresTaskStore] = []

    def make(**kwargs: Any) -> PostgresTaskStore:
        kwargs.setdefault("schema", schema)
        kwargs.setdefault("max_size", 4)
        store = PostgresTaskStore(kwargs.pop("dsn", postgres_dsn), **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., PostgresTaskStore]) -> PostgresTaskStore:
    """A store on a fresh schema."""
    return make_store()


@pytest.fixture
def fill_queued(store: PostgresTaskStore) -> Callable[..., list[SnapshotWrite]]:
    """Stores `count` queued durable tasks (``t00000``, ...) in `store`, in batches of 500;
    returns the writes that made them."""

    def fill(count: int, prefix: str = "t") -> list[SnapshotWrite]:
        writes = []
        for n in range(count):
            arguments: dict[str, Any] = {"args": [], "kwargs": {}}
            built = build_task(
                f"{prefix}{n:05d}", TaskStatus.QUEUED, durable=True, arguments=arguments
            )
            writes.append(SnapshotWrite(built.snapshot, None, built.transitions))
        for start in range(0, count, 500):
            store.save_many(writes[start : start + 500])
        return writes

    return fill


@pytest.fixture
def job_claim() -> Callable[..., ClaimRequest]:
    """``job_claim(owner, limit, starts=False)``: a claim of ``job`` tasks in any bucket,
    now, with a 30 s lease; with `starts`, it starts them (`ClaimStart`, two attempts)."""

    def make(owner: str, limit: int, starts: bool = False) -> ClaimRequest:
        now = datetime.now(UTC)
        return ClaimRequest(
            owner=owner,
            names=frozenset({"job"}),
            buckets=None,
            limit=limit,
            now=now,
            lease_until=now + timedelta(seconds=30),
            start=ClaimStart(executor="thread", plans={"job": StartPlan(2)}) if starts else None,
        )

    return make
