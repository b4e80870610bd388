"""The command channel: claims that skip locked rows, and LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import StoreError
from chongming_store_contract import BASE_TIME, build_command
from chongming_store_postgres import PostgresTaskStore

pytestmark = pytest.mark.postgres
Admin = psycopg.Connection[tuple[Any, ...]]
BOUND = 10.0


def in_thread(call: Callable[[], Any], timeout: float = BOUND) -> Any:
    """Run `call` in a thread; fail if it is still blocked after `timeout` seconds."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"the call was still blocked after {timeout} s"
    if errors:
        raise errors[0]
    return result[0]


def submit(store: PostgresTaskStore, count: int) -> None:
    for n in range(count):
        store.submit_command(
            build_command(f"c{n:02d}", f"t{n}", issued_at=BASE_TIME + timedelta(seconds=n))
        )


# ---------------------------------------------------------------------- SKIP LOCKED
def test_a_claim_skips_rows_another_claimer_has_locked_instead_of_waiting(
    postgres_dsn: str, make_store: Callable[..., PostgresTaskStore]
) -> None:
    first, second = make_store(), make_store()
    submit(first, 6)
    now = BASE_TIME + timedelta(minutes=1)
    with psycopg.connect(postgres_dsn) as holder:  # a claimer in the middle of its claim
        locked = holder.execute(
            sql.SQL("SELECT command_id FROM {} ORDER BY seq LIMIT 2 FOR UPDATE").format(
                sql.Identifier(first.schema, "commands")
            )
        ).fetchall()
        assert [r[0] for r in locked] == ["c00", "c01"]
        started = time.monotonic()
        got = in_thread(lambda: second.claim_commands("node-2", now=now, lease_seconds=60))
        assert time.monotonic() - started < BOUND
        assert [c.command_id for c in got] == ["c02", "c03", "c04", "c05"]
        assert in_thread(lambda: first.claim_commands("node-1", now=now, lease_seconds=60)) == []
        holder.rollback()
    rest = first.claim_commands("node-1", now=now, lease_seconds=60)
    assert [c.command_id for c in rest] == ["c00", "c01"]
    owners = {c.command_id: c.claimed_by for c in first.commands()}
    assert owners == {
        "c00": "node-1",
        "c01": "node-1",
        **{f"c0{n}": "node-2" for n in range(2, 6)},
    }


def test_two_stores_claiming_at_once_never_share_a_command(
    make_store: Callable[..., PostgresTaskStore],
) -> None:
    stores = [make_store(), make_store()]
    submit(stores[0], 80)
    now = BASE_TIME + timedelta(hours=1)
    barrier = threading.Barrier(4, timeout=BOUND)
    claimed: list[list[str]] = [[] for _ in range(4)]

    def drain(i: int) -> None:
        barrier.wait()
        for _ in range(100):
            got = stores[i % 2].claim_commands(f"n{i}", now=now, lease_seconds=60, limit=3)
            if not got:
                return
            claimed[i].extend(c.command_id for c in got)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    every = [c for mine in claimed for c in mine]
    assert sorted(every) == [f"c{n:02d}" for n in range(80)]


def test_an_expired_lease_is_claimed_again_by_exactly_one_claimer(
    make_store: Callable[..., PostgresTaskStore],
) -> None:
    first, second = make_store(), make_store()
    submit(first, 3)
    now = BASE_TIME + timedelta(minutes=1)
    assert len(first.claim_commands("crashed", now=now, lease_seconds=30)) == 3
    assert second.claim_commands("n2", now=now + timedelta(seconds=29), lease_seconds=30) == []
    later = now + timedelta(seconds=30)
    again = second.claim_commands("n2", now=later, lease_seconds=30)
    assert [c.lease_until for c in again] == [later + timedelta(seconds=30)] * 3
    assert first.claim_commands("n1", now=later, lease_seconds=30) == []
    assert first.complete_command("c00", owner="crashed", now=later, result="applied") is False
    assert second.complete_command("c00", owner="n2", now=later, result="applied") is True


# ---------------------------------------------------------------------- LISTEN/NOTIFY
def test_wait_for_commands_wakes_when_another_store_submits(
    make_store: Callable[..., PostgresTaskStore],
) -> None:
    listener, submitter = make_store(), make_store()
    assert listener.notify_channel == f"{listener.schema}.commands"
    assert listener.wait_for_commands(0) is False  # starts listening; nothing yet
    timer = threading.Timer(0.3, lambda: submitter.submit_command(build_command("c1", "t1")))
    timer.start()
    started = time.monotonic()
    try:
        assert listener.wait_for_commands(BOUND) is True
    finally:
        timer.join()
    assert time.monotonic() - started < BOUND
    assert [c.command_id for c in listener.claim_commands("n", now=BASE_TIME, lease_seconds=5)] == [
        "c1"
    ]
    submitter.submit_command(build_command("c1", "t1"))  # a repeat inserts nothing: no wake-up
    assert listener.wait_for_commands(0.3) is False


def test_a_wait_for_commands_is_cut_short_by_wake_command_waiters(
    store: PostgresTaskStore,
) -> None:
    """A poller told to poll now, or to stop, does not sleep out its wait (D162); a wake-up
    with no wait under way makes the next wait return at once, and only that one."""
    assert store.wait_for_commands(0) is False
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(store.wait_for_commands(60)))
    started = time.monotonic()
    waiter.start()
    store.wake_command_waiters()
    waiter.join(BOUND)
    assert woken == [True]
    assert time.monotonic() - started < BOUND
    store.wake_command_waiters()
    store.wake_command_waiters()
    assert store.wait_for_commands(BOUND) is True
    assert store.wait_for_commands(0.2) is False


def test_a_burst_of_commands_wakes_the_listener_at_most_once_each_then_goes_quiet(
    make_store: Callable[..., PostgresTaskStore],
) -> None:
    listener, submitter = make_store(), make_store()
    listener.wait_for_commands(0)
    submit(submitter, 5)
    assert listener.wait_for_commands(BOUND) is True
    claimed = listener.claim_commands("n", now=BASE_TIME + timedelta(hours=1), lease_seconds=5)
    assert len(claimed) == 5  # every command committed before its notification was sent
    wakeups = 1
    while listener.wait_for_commands(0.2):  # the rest of the burst, often already drained
        wakeups += 1
        assert wakeups <= 5, "more wake-ups than commands"
    assert listener.wait_for_commands(0.2) is False


def test_wait_for_commands_times_out_and_ignores_other_schemas(
    postgres_dsn: str, make_store: Callable[..., PostgresTaskStore], schema: str
) -> None:
    listener = make_store()
    listener.wait_for_commands(0)
    elsewhere = make_store(schema=f"{schema}_other")
    try:
        elsewhere.submit_command(build_command("c1", "t1"))
        started = time.monotonic()
        assert listener.wait_for_commands(0.3) is False
        assert time.monotonic() - started >= 0.25
    finally:
        elsewhere.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
            conn.execute(drop.format(sql.Identifier(f"{schema}_other")))


def test_a_lost_listening_connection_wakes_the_waiter_and_is_reopened(
    make_store: Callable[..., PostgresTaskStore], admin: Admin
) -> None:
    listener, submitter = make_store(), make_store()
    listener.wait_for_commands(0)
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = %s AND query LIKE 'LISTEN%%'",
        [listener.application_name],
    )
    assert listener.wait_for_commands(BOUND) is True  # it may have missed something: look
    assert listener.wait_for_commands(0) is False  # listening again
    submitter.submit_command(build_command("c1", "t1"))
    assert listener.wait_for_commands(BOUND) is True


def test_wait_for_commands_after_close_raises(store: PostgresTaskStore) -> None:
    store.wait_for_commands(0)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.wait_for_commands(0)
