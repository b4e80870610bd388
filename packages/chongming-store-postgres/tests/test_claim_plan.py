"""The claim statement: read in claim order whatever the statistics say, and read once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import ClaimRequest, ClaimStart, StartPlan, TaskStatus
from chongming_store_postgres import PostgresTaskStore
from chongming_store_postgres._queries import Statements

Admin = psycopg.Connection[tuple[Any, ...]]

_NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _claim_plan(store: PostgresTaskStore, schema: str, starts: bool) -> str:
    """The plan of a one-statement claim (that leases, or that `starts`) on the connections
    the store claims on."""
    q = Statements(schema)
    params = {
        "names": ["job"],
        "buckets": None,
        "now": _NOW,
        "limit": 4,
        "owner": "w",
        "until": _NOW + timedelta(seconds=30),
        "plans": '[{"name": "job", "max_attempts": 1, "description": null, "tags": []}]',
        "executor": "thread",
        "trigger": ClaimStart.TRIGGER,
    }
    statement = q.claim_start_now if starts else q.claim_now

    def explain(conn: Any, retrying: bool) -> list[str]:
        return [row[0] for row in conn.execute(b"EXPLAIN " + statement, params).fetchall()]

    return "\n".join(store._claims().run("explaining the claim", explain))


@pytest.mark.parametrize("starts", [False, True], ids=["leases", "starts"])
@pytest.mark.parametrize("statistics", ["none yet", "nothing queued"])
def test_a_claim_reads_the_claim_index_in_order_whatever_the_statistics_say(
    store: PostgresTaskStore,
    admin: Admin,
    schema: str,
    statistics: str,
    starts: bool,
    fill_queued: Callable[..., object],
) -> None:
    fill_queued(3000)
    if statistics == "nothing queued":  # a large table of finished tasks, then a burst
        tasks = sql.Identifier(schema, "tasks")
        admin.execute(sql.SQL("UPDATE {} SET status = 'succeeded'").format(tasks))
        admin.execute(sql.SQL("ANALYZE {}").format(tasks))
        admin.execute(sql.SQL("UPDATE {} SET status = 'queued'").format(tasks))
    # else a queue filled faster than autovacuum analyzes it: the planner thinks it tiny
    plan = _claim_plan(store, schema, starts)
    assert "Index Scan using tasks_claim_idx" in plan, plan
    assert "Sort" not in plan, plan


def test_a_claim_meeting_an_unreadable_row_is_not_run_again(
    store: PostgresTaskStore, admin: Admin, schema: str, fill_queued: Callable[..., object]
) -> None:
    # the first row's arguments nest deeper than Python's JSON parser recurses
    fill_queued(3)
    deep = "[" * 5000 + "]" * 5000
    admin.execute(
        sql.SQL("UPDATE {} SET arguments = %s::json WHERE task_id = 't00000'").format(
            sql.Identifier(schema, "tasks")
        ),
        (deep,),
    )
    now = datetime.now(UTC)
    request = ClaimRequest(
        owner="w",
        names=frozenset({"job"}),
        buckets=None,
        limit=2,
        now=now,
        lease_until=now + timedelta(seconds=30),
    )
    claimed = store.claim_tasks(request)
    # the unreadable row is leased and left out (its lease runs out); the claim is not
    # made a second time, which would lease a third task and strand the second
    assert [s.task_id for s in claimed] == ["t00001"]
    owners: dict[str, str | None] = dict(
        admin.execute(
            sql.SQL("SELECT task_id, lease_owner FROM {} ORDER BY task_id").format(
                sql.Identifier(schema, "tasks")
            )
        ).fetchall()
    )
    assert owners == {"t00000": "w", "t00001": "w", "t00002": None}


def test_a_claim_that_starts_an_unreadable_row_leaves_it_out_for_reconcile(
    store: PostgresTaskStore, admin: Admin, schema: str, fill_queued: Callable[..., object]
) -> None:
    """The one statement that claims and starts cannot be taken back: a row it started but
    cannot read is left out, `starting` under the claimant's lease (reconcile marks it lost
    once the lease ends); the claim is not made again, which would start a third task."""
    fill_queued(3)
    deep = "[" * 5000 + "]" * 5000
    admin.execute(
        sql.SQL("UPDATE {} SET arguments = %s::json WHERE task_id = 't00000'").format(
            sql.Identifier(schema, "tasks")
        ),
        (deep,),
    )
    now = datetime.now(UTC)
    request = ClaimRequest(
        owner="w",
        names=frozenset({"job"}),
        buckets=None,
        limit=2,
        now=now,
        lease_until=now + timedelta(seconds=30),
        start=ClaimStart(executor="thread", plans={"job": StartPlan(1)}),
    )
    claimed = store.claim_tasks(request)
    assert [(s.task_id, s.status) for s in claimed] == [("t00001", TaskStatus.STARTING)]
    rows = admin.execute(
        sql.SQL("SELECT task_id, status, lease_owner FROM {} ORDER BY task_id").format(
            sql.Identifier(schema, "tasks")
        )
    ).fetchall()
    assert rows == [
        ("t00000", "starting", "w"),
        ("t00001", "starting", "w"),
        ("t00002", "queued", None),
    ]
