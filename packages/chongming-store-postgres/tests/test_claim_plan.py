"""The claim statement: read in claim order whatever the statistics say, and read once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import ClaimRequest, ClaimStart
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


def _spoil_first_row(admin: Admin, schema: str) -> None:
    """Make the first queued row unreadable: its arguments nest deeper than Python's JSON
    parser recurses."""
    deep = "[" * 5000 + "]" * 5000
    admin.execute(
        sql.SQL("UPDATE {} SET arguments = %s::json WHERE task_id = 't00000'").format(
            sql.Identifier(schema, "tasks")
        ),
        (deep,),
    )


@pytest.mark.parametrize("starts", [False, True], ids=["leases", "starts"])
def test_a_claim_meeting_an_unreadable_row_takes_it_leaves_it_out_and_is_not_made_again(
    store: PostgresTaskStore,
    admin: Admin,
    schema: str,
    starts: bool,
    fill_queued: Callable[..., object],
    job_claim: Callable[..., ClaimRequest],
) -> None:
    """A one-statement claim cannot be taken back: a row it took but cannot read is left
    out, leased (its lease runs out and it is claimable again) or, by a claim that starts,
    `starting` under the claimant's lease (reconcile marks it lost once the lease ends).
    The claim is not made a second time, which would take a third task and strand the
    second."""
    fill_queued(3)
    _spoil_first_row(admin, schema)
    claimed = store.claim_tasks(job_claim("w", 2, starts=starts))
    taken = "starting" if starts else "queued"
    assert [(s.task_id, s.status.value) for s in claimed] == [("t00001", taken)]
    rows = admin.execute(
        sql.SQL("SELECT task_id, status, lease_owner FROM {} ORDER BY task_id").format(
            sql.Identifier(schema, "tasks")
        )
    ).fetchall()
    assert rows == [("t00000", taken, "w"), ("t00001", taken, "w"), ("t00002", "queued", None)]
