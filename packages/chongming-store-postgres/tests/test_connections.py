"""Connections: passwords never shown, unreachable servers, lost and terminated connections."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from chongming_core import (
    ClaimRequest,
    ConcurrencyConflict,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskStatus,
)
from chongming_runtime.testing import wait_until as shared_wait_until
from chongming_store_contract import BASE_TIME, build_command, build_task, next_version
from chongming_store_postgres import PostgresTaskStore
from chongming_store_postgres import _writes as writes_module

pytestmark = pytest.mark.postgres
Admin = psycopg.Connection[tuple[Any, ...]]
SECRET = "s3cr3t-pw"


def with_params(dsn: str, **changes: object) -> str:
    """`dsn` with some connection parameters replaced (key=value form)."""
    params: dict[str, Any] = {**conninfo_to_dict(dsn), **changes}
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


#: `wait_until` polling the server every 20 ms (its conditions are queries)
wait_until = partial(shared_wait_until, interval=0.02)


class Proxy:
    """A loopback TCP proxy to the PostgreSQL server that can cut every connection."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = True
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name="pg-proxy", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._accepting:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            # each socket is the source of exactly one pipe: closing it here means no socket
            # is left to the garbage collector, even one accepted while a cut was under way
            source.close()

    def cut(self, *, refuse_new: bool) -> None:
        """Drop every open connection; with `refuse_new`, close new ones at once."""
        self._accepting = not refuse_new
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        """Accept new connections again."""
        self._accepting = True

    def stop(self) -> None:
        """Close everything."""
        self._stopped = True
        self.cut(refuse_new=True)
        self._listener.close()
        self._thread.join(timeout=5)


@pytest.fixture
def proxy(postgres_dsn: str) -> Iterator[Proxy]:
    """A proxy in front of the test server (loopback only)."""
    params = conninfo_to_dict(postgres_dsn)
    running = Proxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    yield running
    running.stop()


def url_with_password(dsn: str, **changes: object) -> str:
    """`dsn` as a URL carrying `SECRET` as its password."""
    params: dict[str, Any] = {**conninfo_to_dict(dsn), **changes}
    user = params.pop("user", "postgres")
    host = params.pop("host", "127.0.0.1")
    port = params.pop("port", 5432)
    db = params.pop("dbname", "postgres")
    params.pop("password", None)
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"postgresql://{user}:{SECRET}@{host}:{port}/{db}" + (f"?{query}" if query else "")


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_no_secret(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    """Neither the error, its chain as rendered, nor any log record holds `SECRET`."""
    assert SECRET not in str(exc)
    assert SECRET not in repr(exc)
    rendered = "".join(traceback.format_exception(exc))
    assert SECRET not in rendered
    current: BaseException | None = exc
    while current is not None:
        assert SECRET not in str(current)
        current = current.__cause__ or current.__context__
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert SECRET not in str(record.args)
        assert SECRET not in (record.exc_text or "")


def terminate(admin: Admin, application_name: str) -> int:
    """End every backend of a store; returns how many there were."""
    rows = admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        [application_name],
    ).fetchall()
    wait_until(
        lambda: (
            admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [application_name],
            ).fetchone()
            == (0,)
        ),
        what="the terminated backends to go away",
    )
    return len(rows)


# ---------------------------------------------------------------------- passwords
@pytest.mark.parametrize("form", ["url", "keyvalue", "quoted"])
def test_repr_never_shows_the_password(
    postgres_dsn: str, make_store: Callable[..., PostgresTaskStore], form: str
) -> None:
    dsn = {
        "url": url_with_password(postgres_dsn),
        "keyvalue": with_params(postgres_dsn, password=SECRET),
        "quoted": with_params(postgres_dsn) + f" password='{SECRET} x'",
    }[form]
    store = make_store(dsn=dsn)  # trust authentication ignores the password
    store.create(*build_task("t1"))
    assert SECRET not in repr(store)
    assert "****" in repr(store)
    assert SECRET not in str(store)
    store.close()
    assert SECRET not in repr(store)
    with pytest.raises(StoreError) as info:
        store.get("t1")
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("form", ["url", "keyvalue"])
def test_an_unreachable_server_is_a_quick_store_error_without_secrets(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    if form == "url":
        dsn = url_with_password(postgres_dsn, port=port)
    else:
        dsn = with_params(postgres_dsn, port=port, password=SECRET)
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        PostgresTaskStore(dsn, connect_timeout=3)
    assert time.monotonic() - started < 3 + 2
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message
    assert "database 'test'" in message or "database" in message
    assert "check that PostgreSQL is running" in message
    assert "DSN" in message
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    assert_no_secret(info.value, caplog)


def test_a_wrong_database_is_named_without_secrets(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    missing = f"chongming_no_such_db_{uuid.uuid4().hex[:8]}"
    dsn = url_with_password(postgres_dsn, dbname=missing)
    with pytest.raises(StoreError, match=missing) as info:
        PostgresTaskStore(dsn, connect_timeout=3)
    assert "does not exist" in str(info.value)
    assert_no_secret(info.value, caplog)


# ---------------------------------------------------------------------- lost connections
def test_terminated_backends_are_replaced_and_the_next_calls_work(
    postgres_dsn: str,
    make_store: Callable[..., PostgresTaskStore],
    admin: Admin,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store = make_store(dsn=url_with_password(postgres_dsn), min_size=3, max_size=3)
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    store.create(snapshot, chain)
    wait_until(
        lambda: (
            admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [store.application_name],
            ).fetchone()
            == (3,)
        ),
        what="the pool to open three connections",
    )
    assert terminate(admin, store.application_name) == 3

    assert store.get("t1") == snapshot
    assert [s.task_id for s in store.query(TaskQuery())] == ["t1"]
    nxt, more = next_version(snapshot)
    store.save(nxt, expect_version=snapshot.status_version, transitions=more)
    assert store.history("t1") == [*chain, *more]
    store.submit_command(build_command("c1", "t1"))
    assert len(store.claim_commands("n", now=BASE_TIME, lease_seconds=5)) == 1
    for record in caplog.records:
        assert SECRET not in record.getMessage()


def test_a_save_whose_connection_is_killed_mid_statement_is_applied_once(
    make_store: Callable[..., PostgresTaskStore],
    postgres_dsn: str,
    admin: Admin,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = make_store()
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    store.create(snapshot, chain)
    nxt, more = next_version(snapshot)
    outcome: list[BaseException | None] = []

    def waiting_pids() -> list[int]:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
            "AND wait_event_type = 'Lock'",
            [store.application_name],
        ).fetchall()
        return [int(r[0]) for r in rows]

    def save() -> None:
        try:
            store.save(nxt, expect_version=snapshot.status_version, transitions=more)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with psycopg.connect(postgres_dsn) as locker:  # holds the row while the save waits
        locker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE task_id = %s FOR UPDATE").format(
                sql.Identifier(store.schema, "tasks")
            ),
            ["t1"],
        )
        worker = threading.Thread(target=save)
        worker.start()
        wait_until(lambda: len(waiting_pids()) == 1, what="the save to wait for the row lock")
        first = waiting_pids()[0]
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
        wait_until(
            lambda: waiting_pids() not in ([], [first]), what="the save to retry and wait again"
        )
        locker.rollback()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert outcome == [None]
    assert store.get("t1") == nxt
    assert store.history("t1") == [*chain, *more]
    assert any("trying once more" in r.getMessage() for r in caplog.records)


class LoseAnswer:
    """Once armed, the next snapshot write commits and then loses its connection before the
    answer arrives; the functions in `between` run after the commit, before the loss."""

    def __init__(self) -> None:
        self.armed = False
        self.between: list[Callable[[], None]] = []


@pytest.fixture
def lose_answer(monkeypatch: pytest.MonkeyPatch) -> LoseAnswer:
    """Fault injection around `apply_writes` (the statement runs for real)."""
    original = writes_module.apply_writes
    control = LoseAnswer()

    def flaky(conn: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(conn, *args, **kwargs)
        if control.armed:
            control.armed = False
            for step in control.between:
                step()
            conn.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    monkeypatch.setattr(writes_module, "apply_writes", flaky)
    return control


def test_a_write_committed_before_its_answer_was_lost_reports_success(
    store: PostgresTaskStore, lose_answer: LoseAnswer
) -> None:
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    lose_answer.armed = True
    store.create(snapshot, chain)  # lost after commit, retried, proven applied
    assert not lose_answer.armed
    assert store.get("t1") == snapshot
    nxt, more = next_version(snapshot)
    lose_answer.armed = True
    store.save(nxt, expect_version=snapshot.status_version, transitions=more)
    assert not lose_answer.armed
    assert store.history("t1") == [*chain, *more]


def test_a_batch_committed_before_its_answer_was_lost_reports_no_conflict(
    store: PostgresTaskStore, lose_answer: LoseAnswer
) -> None:
    built = [build_task(t, TaskStatus.RUNNING) for t in ("a", "b", "c")]
    lose_answer.armed = True
    assert store.save_many([SnapshotWrite(b.snapshot, None, b.transitions) for b in built]) == []
    assert not lose_answer.armed
    for b in built:
        assert store.get(b.snapshot.task_id) == b.snapshot
        assert store.history(b.snapshot.task_id) == list(b.transitions)


def test_a_lost_answer_followed_by_another_writer_is_a_conflict(
    store: PostgresTaskStore,
    make_store: Callable[..., PostgresTaskStore],
    lose_answer: LoseAnswer,
) -> None:
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    other = make_store()
    other.create(snapshot, chain)
    mine, my_records = next_version(snapshot)
    theirs, their_records = next_version(mine)
    lose_answer.between.append(
        lambda: other.save(theirs, expect_version=mine.status_version, transitions=their_records)
    )
    lose_answer.armed = True
    with pytest.raises(ConcurrencyConflict) as info:
        store.save(mine, expect_version=snapshot.status_version, transitions=my_records)
    assert info.value.actual == theirs.status_version
    assert store.history("t1") == [*chain, *my_records, *their_records]  # never twice


def test_a_cut_network_is_a_store_error_within_the_timeout_and_heals(
    postgres_dsn: str,
    make_store: Callable[..., PostgresTaskStore],
    proxy: Proxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    dsn = url_with_password(postgres_dsn, host="127.0.0.1", port=proxy.port)
    store = make_store(dsn=dsn, connect_timeout=2, min_size=1, max_size=2)
    store.create(*build_task("t1"))
    proxy.cut(refuse_new=True)
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        store.get("t1")
    assert time.monotonic() - started < 2 + 3
    assert f"127.0.0.1:{proxy.port}" in str(info.value)
    assert "check that PostgreSQL is running" in str(info.value)
    assert_no_secret(info.value, caplog)
    proxy.restore()

    def works() -> bool:
        try:
            return store.get("t1") is not None
        except StoreError:
            return False

    wait_until(works, timeout=30, what="the store to reconnect")
    for record in caplog.records:
        assert SECRET not in record.getMessage()


@pytest.fixture
def lose_statement_answer(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The next run of a statement put in the returned list commits (autocommit) and then
    loses its connection before the caller reads the answer."""
    armed: list[bytes] = []
    original = psycopg.Cursor.execute

    # on the cursor: `Connection.execute` runs through it, and command rows are read on a
    # cursor of their own (`command_cursor`)
    def flaky(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        cursor = original(self, query, params, **kwargs)
        if query in armed:
            armed.remove(query)
            self.connection.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return cursor

    monkeypatch.setattr(psycopg.Cursor, "execute", flaky)
    return armed


def test_a_claim_whose_answer_was_lost_returns_what_it_leased(
    store: PostgresTaskStore, lose_statement_answer: list[bytes]
) -> None:
    for n in range(3):
        store.submit_command(build_command(f"c{n}", "t1"))
    lose_statement_answer.append(store._q.claim_commands)
    got = store.claim_commands("n1", now=BASE_TIME, lease_seconds=30, limit=2)
    assert lose_statement_answer == []
    assert [c.command_id for c in got] == ["c0", "c1"]
    rest = store.claim_commands("n1", now=BASE_TIME, lease_seconds=30)
    assert [c.command_id for c in rest] == ["c2"]


def test_a_claim_that_starts_whose_answer_was_lost_returns_what_it_started(
    store: PostgresTaskStore,
    lose_statement_answer: list[bytes],
    fill_queued: Callable[..., object],
    job_claim: Callable[..., ClaimRequest],
) -> None:
    """The one statement that claims and starts committed, then its answer was lost: the
    claim made again hands over the tasks it started, and starts no others."""
    fill_queued(3)
    lose_statement_answer.append(store._q.claim_start_now)
    got = store.claim_tasks(job_claim("w1", 2, starts=True))
    assert lose_statement_answer == []
    assert [(s.task_id, s.status, s.attempt) for s in got] == [
        ("t00000", TaskStatus.STARTING, 1),
        ("t00001", TaskStatus.STARTING, 1),
    ]
    for s in got:
        assert [t.to_status for t in store.history(s.task_id)][-1] is TaskStatus.STARTING
    third = store.get("t00002")
    assert third is not None
    assert (third.status, third.lease_owner) == (TaskStatus.QUEUED, None)


def test_a_completion_or_release_whose_answer_was_lost_reports_true(
    store: PostgresTaskStore, lose_statement_answer: list[bytes]
) -> None:
    store.submit_command(build_command("c1", "t1"))
    store.submit_command(build_command("c2", "t1"))
    store.claim_commands("n1", now=BASE_TIME, lease_seconds=30)
    lose_statement_answer.append(store._q.complete_command)
    assert store.complete_command("c1", owner="n1", now=BASE_TIME, result="applied") is True
    lose_statement_answer.append(store._q.release_command)
    assert store.release_command("c2", owner="n1") is True
    assert lose_statement_answer == []
    assert store.complete_command("c1", owner="n1", now=BASE_TIME, result="applied") is False
    assert [c.command_id for c in store.claim_commands("n2", now=BASE_TIME, lease_seconds=5)] == [
        "c2"
    ]


def test_a_row_locked_by_another_session_fails_the_write_instead_of_blocking(
    make_store: Callable[..., PostgresTaskStore], postgres_dsn: str, schema: str
) -> None:
    """No lock_timeout used to mean a write (and the controller's wait() behind it) blocked
    for as long as another session held the row; now it fails like any store error, which
    the writer retries, and says what is going on."""
    store = make_store(connect_timeout=2)
    snapshot, transitions = build_task("t1", TaskStatus.RUNNING)
    store.create(snapshot, transitions)
    newer, more = next_version(snapshot)
    with psycopg.connect(postgres_dsn) as other:  # a transaction: the lock is held until rollback
        other.execute(
            sql.SQL("SELECT 1 FROM {}.tasks WHERE task_id = %s FOR UPDATE").format(
                sql.Identifier(schema)
            ),
            ("t1",),
        )
        started = time.monotonic()
        with pytest.raises(StoreError, match="stayed locked by another session") as caught:
            store.save(newer, expect_version=snapshot.status_version, transitions=more)
        assert time.monotonic() - started < 30  # bounded by lock_timeout, not by the holder
        # one row's lock, not the store's: the writes of other tasks still go in (the
        # writer's single writes find them, D34), so it is not `locked` (D66)
        assert not caught.value.locked
        other.rollback()
    store.save(newer, expect_version=snapshot.status_version, transitions=more)
    stored = store.get("t1")
    assert stored is not None
    assert stored.status_version == newer.status_version


def test_connections_keep_alive_and_bound_unacknowledged_sends(
    make_store: Callable[..., PostgresTaskStore],
) -> None:
    """A network that silently drops packets is noticed in seconds, not in the kernel's
    quarter of an hour; the DSN's own settings win."""
    store = make_store(connect_timeout=2)
    with store._pool.connection() as conn:
        shown = conn.execute("SHOW lock_timeout").fetchone()
        assert shown is not None
        assert shown[0] in {"2s", "2000ms"}
        dsn = conninfo_to_dict(conn.info.dsn)
        assert dsn.get("keepalives") == "1"
        assert dsn.get("tcp_user_timeout") == "6000"


def test_a_lost_write_is_not_taken_for_another_writers_identical_row(
    store: PostgresTaskStore,
    make_store: Callable[..., PostgresTaskStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection drops before this write commits, and meanwhile another writer stores
    the very same row with its own history (same clock, other actor): this write lost, and
    is told so — the row alone used to make both writers believe they won."""
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    store.create(snapshot, chain)
    mine, my_records = next_version(snapshot)
    their_records = tuple(dataclasses.replace(t, actor="other-node") for t in my_records)
    other = make_store()
    original = writes_module.apply_writes
    armed = [True]

    def lost_before_commit(conn: Any, *args: Any, **kwargs: Any) -> Any:
        if armed:
            armed.clear()
            other.save(mine, expect_version=snapshot.status_version, transitions=their_records)
            conn.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return original(conn, *args, **kwargs)

    monkeypatch.setattr(writes_module, "apply_writes", lost_before_commit)
    with pytest.raises(ConcurrencyConflict):
        store.save(mine, expect_version=snapshot.status_version, transitions=my_records)
    assert store.history("t1") == [*chain, *their_records]
