"""`SqliteTaskStore`: the `TaskStore` contract on one SQLite file (or ``:memory:``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from chongming_core import (
    ClaimRequest,
    Command,
    ConcurrencyConflict,
    ConfigurationError,
    Counts,
    Listing,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    TouchUpdate,
    Transition,
    UnreadableRow,
    WorkerRecord,
)
from chongming_core.backend import shown, stored_id, validate_keep_terminal
from chongming_store_sqlite import _schema as sql
from chongming_store_sqlite._codec import (
    COMMAND_SELECT,
    SNAPSHOT_COLUMNS,
    TRANSITION_COLUMNS,
    command_from_row,
    command_row,
    encode_snapshot,
    iso,
    lenient_text,
    micros,
    outcome_problem,
    snapshot_from_row,
    transition_from_row,
    transition_rows,
)
from chongming_store_sqlite._durable import (
    any_candidate,
    claim,
    signals_for,
    worker_from_row,
    worker_row,
)
from chongming_store_sqlite._errors import DRIVER_ERRORS, translate
from chongming_store_sqlite._fetching import fetch_all
from chongming_store_sqlite._housekeeping import archive_batches, prune_batches
from chongming_store_sqlite._locking import begin_immediate
from chongming_store_sqlite._opening import connect, initialise, prepare_file
from chongming_store_sqlite._pool import ConnectionPool, PoolClosed
from chongming_store_sqlite._queries import (
    SEARCH_FUNCTION,
    chunks,
    placeholders,
    search_matches,
    where_clause,
)
from chongming_store_sqlite._watch import FileWatch
from chongming_store_sqlite._writes import apply_writes, touch_row

__all__ = ["SqliteTaskStore"]

MEMORY = ":memory:"
_MAX_CONNECTIONS = 16
_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}

#: Bytes a write-ahead log is truncated back to after a checkpoint (64 MiB).
WAL_SIZE_LIMIT = 64 * 1024 * 1024


class SqliteTaskStore(TaskStore):
    """The embedded default store: one SQLite file shared by the threads and processes
    of one machine, or ``":memory:"`` for one store object's threads.

    Example::

        store = SqliteTaskStore("tasks.db")
        controller = Controller(store=store)

    Args:
        path: the database file (created with mode 0o600 when missing; its directory
            must exist), or ``":memory:"``.
        busy_timeout: seconds a write waits for another connection's write lock
            before it fails with `StoreError`.
        synchronous: ``"normal"`` (the default: a commit survives a crash of the
            process, and the database stays consistent after a power loss, which may
            lose the last commits) or ``"full"`` (every commit is fsynced, so it
            survives a power loss too; each commit costs a disk flush).
        create: whether a missing file is created and an older schema migrated (the
            default). False opens only an existing store at this code's schema and
            changes nothing on the way (what a read-only console wants: a mistyped path
            is reported, not answered with a new empty database).

    Durable work: claims run inside ``BEGIN IMMEDIATE``; `wait_for_work` and
    `wait_for_change` are woken only by writes of this process (SQLite has no
    notification channel), so a worker of another process also polls.

    Raises:
        StoreNotFound: `create` is False and there is no chongming store at `path` (no
            file, an empty one, a database without the tables) or one at an older schema.
        StoreError: the path cannot hold a store (a directory, not a database, a
            database of another application or of a newer chongming, damaged,
            unreadable); the file is left unchanged.
        ConfigurationError: an argument is invalid.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: str = "normal",
        create: bool = True,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise ConfigurationError(
                f"path must be a str or os.PathLike naming the database file, got {path!r}"
            )
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw:
            raise ConfigurationError(
                f"path must be a non-empty text path or ':memory:', got {path!r}"
            )
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not busy_timeout > 0
        ):
            raise ConfigurationError(
                f"busy_timeout must be a number of seconds > 0, got {busy_timeout!r}"
            )
        if not isinstance(synchronous, str) or synchronous.lower() not in _SYNCHRONOUS:
            raise ConfigurationError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        self._memory = raw == MEMORY
        self._path = MEMORY if self._memory else os.path.abspath(raw)
        self._where = f"SQLite task store {self._path}"
        self._busy_timeout = float(busy_timeout)
        self._synchronous = _SYNCHRONOUS[synchronous.lower()]
        if not self._memory:
            prepare_file(self._path, create=create)
        first = self._open_connection_translated()
        try:
            initialise(
                first,
                self._path,
                busy_timeout=self._busy_timeout,
                memory=self._memory,
                create=create,
            )
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                first.close()
            if isinstance(exc, sqlite3.Error):
                raise translate(
                    exc, where=self._where, action="opening", busy_timeout=self._busy_timeout
                ) from exc
            raise
        # what one value in a row may hold, as the connections were opened with
        self._max_length = first.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        self._pool = ConnectionPool(
            self._open_connection,
            max_size=1 if self._memory else _MAX_CONNECTIONS,
            keep_after_fork=self._memory,
        )
        self._pool.add(first)
        self._signals = signals_for(None if self._memory else self._path)
        # ":memory:" has one connection and no other process: its own signals see it all
        self._watch = None if self._memory else FileWatch(self._open_connection)

    def __enter__(self) -> SqliteTaskStore:
        return self

    def __repr__(self) -> str:
        state = " closed" if self._pool.closed else ""
        return f"SqliteTaskStore({self._path!r}){state}"

    @property
    def path(self) -> str:
        """The absolute path of the database file, or ``":memory:"``."""
        return self._path

    @property
    def busy_timeout(self) -> float:
        """Seconds a write waits for another connection's lock."""
        return self._busy_timeout

    # ------------------------------------------------------------------ values
    def stored_outcome(self, value: Any) -> Any:
        """See `TaskStore.stored_outcome`. A task's row also holds at most SQLite's length
        limit (``SQLITE_LIMIT_LENGTH``, 1,000,000,000 bytes unless SQLite was built with
        another): an outcome may use all of it but `ROW_ROOM`."""
        kept = super().stored_outcome(value)
        problem = outcome_problem(value, self._max_length)
        if problem is not None:
            raise ValueError(problem)
        return kept

    # ------------------------------------------------------------------ connections
    def _open_connection(self) -> sqlite3.Connection:
        conn = connect(self._path, busy_timeout=self._busy_timeout, memory=self._memory)
        try:
            # The value comes from the fixed _SYNCHRONOUS table, never from the caller.
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            # after a long reader let the WAL grow, a checkpoint truncates it back to this
            # size (otherwise it keeps its largest size until the last connection closes)
            conn.execute(f"PRAGMA journal_size_limit = {int(WAL_SIZE_LIMIT)}")
            conn.create_function(SEARCH_FUNCTION, 4, search_matches, deterministic=True)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_connection_translated(self) -> sqlite3.Connection:
        try:
            return self._open_connection()
        except sqlite3.Error as exc:
            raise translate(
                exc, where=self._where, action="opening", busy_timeout=self._busy_timeout
            ) from exc

    supports_durable_work = True
    watches_work = True  # `FileWatch` (":memory:": no other connection can write)

    def _closed_error(self) -> StoreError:
        return StoreError(f"{self._where} is closed; open a new SqliteTaskStore to keep working")

    def _check_open(self) -> None:
        if self._pool.closed:
            raise self._closed_error()

    @contextlib.contextmanager
    def _reading(self, action: str, *, snapshot: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection for reads; with `snapshot`, one consistent (deferred) transaction."""
        try:
            with self._pool.connection() as conn:
                if not snapshot:
                    yield conn
                    return
                conn.execute("BEGIN")
                try:
                    yield conn
                    conn.execute("COMMIT")
                finally:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
        except PoolClosed:
            raise self._closed_error() from None
        except DRIVER_ERRORS as exc:
            raise translate(
                exc, where=self._where, action=action, busy_timeout=self._busy_timeout
            ) from exc

    @contextlib.contextmanager
    def _writing(self, action: str) -> Iterator[sqlite3.Connection]:
        """One short write transaction, taken with BEGIN IMMEDIATE.

        IMMEDIATE takes the write lock up front, waiting up to the busy timeout (in short
        pauses: `begin_immediate`). A deferred transaction would take it only at its first
        write and, when another connection committed meanwhile, fail at once with
        SQLITE_BUSY, without waiting.
        """
        try:
            with self._pool.connection() as conn:
                begin_immediate(conn, self._busy_timeout)
                try:
                    yield conn
                    conn.execute("COMMIT")
                finally:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
        except PoolClosed:
            raise self._closed_error() from None
        except DRIVER_ERRORS as exc:
            raise translate(
                exc, where=self._where, action=action, busy_timeout=self._busy_timeout
            ) from exc

    # ------------------------------------------------------------------ snapshots
    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """See `TaskStore.create`."""
        item = encode_snapshot(snapshot, None, transitions, self.stored_outcome)
        with self._writing(f"creating task {snapshot.task_id!r}") as conn:
            conflicts = apply_writes(conn, [item])
        if conflicts:
            raise conflicts[0]
        self._signals.written([snapshot])

    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """See `TaskStore.save`."""
        item = encode_snapshot(snapshot, expect_version, transitions, self.stored_outcome)
        with self._writing(f"saving task {snapshot.task_id!r}") as conn:
            conflicts = apply_writes(conn, [item])
        if conflicts:
            raise conflicts[0]
        self._signals.written([snapshot])

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        """See `TaskStore.save_many`: every item in one transaction (a group commit)."""
        items = [
            encode_snapshot(w.snapshot, w.expect_version, w.transitions, self.stored_outcome)
            for w in writes
        ]
        if not items:
            self._check_open()
            return []
        with self._writing(f"saving {len(items)} tasks") as conn:
            conflicts = apply_writes(conn, items)
        refused = {c.task_id for c in conflicts}
        self._signals.written(w.snapshot for w in writes if w.snapshot.task_id not in refused)
        return conflicts

    def get(self, task_id: str) -> TaskSnapshot | None:
        """See `TaskStore.get`."""
        with self._reading(f"reading task {task_id!r}") as conn:
            rows = fetch_all(
                conn, f"SELECT {SNAPSHOT_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,)
            )
        if not rows:
            return None
        found = snapshot_from_row(rows[0])
        if isinstance(found, UnreadableRow):
            raise found.error(self._where)
        return found

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """See `TaskStore.query`."""
        q = query or TaskQuery()
        order = "DESC" if q.newest_first else "ASC"
        if q.task_ids is None:
            where, params = where_clause(q, ordered_scan=q.limit is not None)
            statement = (
                f"SELECT {SNAPSHOT_COLUMNS} FROM tasks{where} ORDER BY seq {order} LIMIT ? OFFSET ?"
            )
            params.extend((-1 if q.limit is None else q.limit, q.offset))
            with self._reading("querying tasks") as conn:
                rows = fetch_all(conn, statement, params)
            return Listing.split(snapshot_from_row(r) for r in rows)
        found: list[Any] = []
        with self._reading("querying tasks", snapshot=True) as conn:
            for chunk in chunks(list(q.task_ids)):
                where, params = where_clause(q, chunk)
                statement = f"SELECT seq, {SNAPSHOT_COLUMNS} FROM tasks{where}"
                found.extend(fetch_all(conn, statement, params))
        found.sort(key=lambda r: r[0], reverse=q.newest_first)
        end = None if q.limit is None else q.offset + q.limit
        return Listing.split(snapshot_from_row(r[1:]) for r in found[q.offset : end])

    def _grouped(self, query: TaskQuery | None, key: _Key, action: str) -> Counts[Any]:
        """``count(*)`` per value of `key`'s column over the tasks matching `query`; the
        tasks holding a value that is no key are named in the result's ``unreadable``."""
        q = query or TaskQuery()
        id_chunks: list[Sequence[str] | None] = (
            [None] if q.task_ids is None else list(chunks(list(q.task_ids)))
        )
        column = key.column
        counts: dict[Any, int] = {}
        unreadable: list[UnreadableRow] = []
        with self._reading(action, snapshot=len(id_chunks) > 1) as conn:
            for chunk in id_chunks:
                where, params = where_clause(q, chunk)
                not_null = f"{' AND' if where else ' WHERE'} {column} IS NOT NULL"
                statement = (
                    f"SELECT {column}, count(*) FROM tasks{where}{not_null} GROUP BY {column}"
                )
                damaged = False
                for value, count in fetch_all(conn, statement, params):
                    found = key.of(value)
                    if found is None:
                        damaged = True
                    else:
                        counts[found] = counts.get(found, 0) + int(count)
                if damaged:  # rare (rows written by hand): name the tasks that hold such values
                    holders = (
                        f"SELECT task_id, {column} FROM tasks{where}{not_null} AND {key.damaged}"
                    )
                    unreadable.extend(
                        UnreadableRow(stored_id(t), f"{column} {shown(v)} is not {key.noun}")
                        for t, v in fetch_all(conn, holders, [*params, *key.damaged_params])
                    )
        return Counts(counts, unreadable)

    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        """See `TaskStore.status_counts`."""
        return self._grouped(query, _STATUS_KEY, "counting tasks by status")

    def bucket_counts(self, query: TaskQuery | None = None) -> dict[int, int]:
        """See `TaskStore.bucket_counts`."""
        return self._grouped(query, _BUCKET_KEY, "counting tasks by bucket")

    # ------------------------------------------------------------------ audit trail
    def append(self, transitions: Iterable[Transition]) -> None:
        """See `TaskStore.append`."""
        records = list(transitions)
        try:
            rows = transition_rows(records)
        except ConfigurationError as exc:
            raise StoreError(f"{self._where}: cannot append transitions: {exc}") from exc
        if not rows:
            self._check_open()
            return
        with self._writing(f"appending {len(rows)} transitions") as conn:
            conn.executemany(sql.INSERT_TRANSITION, rows)

    def history(self, task_id: str) -> list[Transition]:
        """See `TaskStore.history`."""
        with self._reading(f"reading the history of task {task_id!r}") as conn:
            rows = fetch_all(
                conn,
                f"SELECT {TRANSITION_COLUMNS} FROM transitions WHERE task_id = ? "
                "ORDER BY status_version",
                (task_id,),
            )
        return Listing.split(transition_from_row(r) for r in rows)

    # ------------------------------------------------------------------ side path
    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        """See `TaskStore.touch_many`: every update in one transaction, in order."""
        rows = []
        for u in updates:
            rows.append(touch_row(u.task_id, u.fields(), u.held_version))
        if not rows:
            self._check_open()
            return 0
        with self._writing(f"touching {len(rows)} tasks") as conn:
            return int(conn.executemany(sql.TOUCH_TASK, rows).rowcount)

    # ------------------------------------------------------------------ commands
    def submit_command(self, command: Command) -> None:
        """See `TaskStore.submit_command`."""
        try:
            row = command_row(command)
        except ConfigurationError as exc:
            raise StoreError(
                f"{self._where}: cannot store command {command.command_id!r}: {exc}",
                task_id=command.task_id,
            ) from exc
        with self._writing(f"submitting command {command.command_id!r}") as conn:
            conn.execute(sql.INSERT_COMMAND, row)
        self._signals.commands.set()

    def claim_commands(
        self,
        owner: str,
        *,
        now: datetime,
        lease_seconds: float,
        limit: int = 100,
        task_ids: Collection[str] | None = None,
        buckets: Collection[int] | None = None,
    ) -> list[Command]:
        """See `TaskStore.claim_commands`: select and lease in one BEGIN IMMEDIATE transaction."""
        now_us = micros(now, "now")
        if (
            isinstance(lease_seconds, bool)
            or not isinstance(lease_seconds, int | float)
            or not lease_seconds >= 0
        ):
            raise ConfigurationError(
                f"lease_seconds must be a number of seconds >= 0, got {lease_seconds!r}"
            )
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ConfigurationError(f"limit must be an integer, got {limit!r}")
        until = now + timedelta(seconds=lease_seconds)
        until_iso, until_us = iso(until, "lease end"), micros(until, "lease end")
        if limit <= 0:
            self._check_open()
            return []
        base = (
            f"SELECT seq, {COMMAND_SELECT} FROM commands WHERE completed_at IS NULL "
            "AND (claimed_by IS NULL OR lease_until_us IS NULL OR lease_until_us <= ?) "
            # a task another owner holds under a live lease: its commands are the holder's
            "AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.task_id = commands.task_id "
            "AND tasks.lease_owner IS NOT NULL AND tasks.lease_owner != ? "
            "AND tasks.lease_until_us > ?)"
        )
        base_params: list[object] = [now_us, owner, now_us]
        if buckets is not None:
            base += " AND bucket IN (SELECT value FROM json_each(?))"
            base_params.append(json.dumps(list(buckets)))
        if task_ids is None:
            # a look without the write lock first (a reader never waits in WAL mode): an
            # idle controller polls at every poll interval, and almost always finds nothing
            with self._reading(f"looking for commands for {owner!r}") as conn:
                look = "SELECT 1" + base[base.index(" FROM commands") :] + " LIMIT 1"
                if conn.execute(look, base_params).fetchone() is None:
                    return []
        with self._writing(f"claiming commands for {owner!r}") as conn, lenient_text(conn):
            if task_ids is None:
                rows = conn.execute(f"{base} ORDER BY seq LIMIT ?", [*base_params, limit])
                found = rows.fetchall()
            else:
                found = []
                for chunk in chunks(list(set(task_ids))):
                    in_chunk = f"task_id IN ({placeholders(len(chunk))})"
                    statement = f"{base} AND {in_chunk} ORDER BY seq LIMIT ?"
                    found.extend(conn.execute(statement, [*base_params, *chunk, limit]))
                found.sort(key=lambda r: r[0])
                found = found[:limit]
            conn.executemany(sql.LEASE_COMMAND, [(owner, until_iso, until_us, r[0]) for r in found])
            # each row read on its own, as leased (D64): one that anyone wrote with a value
            # its column cannot hold comes back with its problem instead of failing the claim
            claimed = [command_from_row(r[1:], claimed_by=owner, lease_until=until) for r in found]
            unnamed = [
                (i, found[i][0])
                for i, c in enumerate(claimed)
                if c.problem is not None and not isinstance(found[i][1], str)
            ]
            if unnamed:  # an id that is not text: no caller can complete it, so it is done here
                done_at = iso(now, "now")
                conn.executemany(
                    sql.COMPLETE_COMMAND_AT,
                    [(done_at, f"rejected: {claimed[i].problem}", seq) for i, seq in unnamed],
                )
                for i, _ in unnamed:
                    claimed[i] = dataclasses.replace(
                        claimed[i],
                        lease_until=None,
                        completed_at=now,
                        result=f"rejected: {claimed[i].problem}",
                    )
        return claimed

    def complete_command(self, command_id: str, *, owner: str, now: datetime, result: str) -> bool:
        """See `TaskStore.complete_command`."""
        done_at = iso(now, "now")
        with self._writing(f"completing command {command_id!r}") as conn:
            changed = conn.execute(
                sql.COMPLETE_COMMAND, (done_at, result, command_id, owner)
            ).rowcount
        return changed > 0

    def release_command(self, command_id: str, *, owner: str) -> bool:
        """See `TaskStore.release_command`."""
        with self._writing(f"releasing command {command_id!r}") as conn:
            changed = conn.execute(sql.RELEASE_COMMAND, (command_id, owner)).rowcount
        return changed > 0

    def commands(
        self,
        *,
        task_id: str | None = None,
        include_complete: bool = True,
        limit: int | None = None,
    ) -> list[Command]:
        """See `TaskStore.commands`."""
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise ConfigurationError(f"limit must be an integer >= 0 or None, got {limit!r}")
        clauses: list[str] = []
        params: list[object] = []
        if task_id is not None:
            clauses.append("task_id = ?")
            params.append(task_id)
        if not include_complete:
            clauses.append("completed_at IS NULL")
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        params.append(-1 if limit is None else limit)
        statement = f"SELECT {COMMAND_SELECT} FROM commands{where} ORDER BY seq LIMIT ?"
        with self._reading("listing commands") as conn, lenient_text(conn):
            rows = conn.execute(statement, params).fetchall()
        return [command_from_row(r) for r in rows]

    # ------------------------------------------------------------------ durable work
    def claim_tasks(self, request: ClaimRequest) -> list[TaskSnapshot]:
        """See `TaskStore.claim_tasks`: one ``BEGIN IMMEDIATE`` transaction, so no other
        connection writes between the choice and the leases."""
        if not isinstance(request, ClaimRequest):
            raise ConfigurationError(f"claim_tasks needs a ClaimRequest, got {request!r}")
        if request.limit <= 0 or not request.names:
            self._check_open()
            return []
        # looked at first without the write lock (a reader never waits in WAL mode): an
        # idle worker's poll, and a worker that finds nothing, take no lock from the others
        with self._reading(f"looking for tasks {request.owner!r} may claim") as conn:
            if not any_candidate(conn, request):
                return []
        with self._writing(f"claiming tasks for {request.owner!r}") as conn:
            return claim(conn, request, self.stored_outcome)

    def release_claim(self, task_id: str, owner: str, version: int) -> bool:
        """See `TaskStore.release_claim`."""
        with self._writing(f"releasing the claim of task {task_id!r}") as conn:
            released = conn.execute(sql.RELEASE_TASK, (task_id, owner, version)).rowcount > 0
        if released:
            self._signals.work.set()
        return released

    def register_worker(self, record: WorkerRecord) -> None:
        """See `TaskStore.register_worker`."""
        if not isinstance(record, WorkerRecord):
            raise ConfigurationError(f"register_worker needs a WorkerRecord, got {record!r}")
        row = worker_row(record)
        with self._writing(f"registering worker {record.owner!r}") as conn:
            conn.execute(sql.UPSERT_WORKER, row)

    def renew_worker(self, owner: str, *, last_seen: datetime, lease_until: datetime) -> bool:
        """See `TaskStore.renew_worker`."""
        params = (
            iso(last_seen, "last_seen"),
            iso(lease_until, "lease_until"),
            micros(lease_until, "lease_until"),
            owner,
        )
        with self._writing(f"renewing worker {owner!r}") as conn:
            return int(conn.execute(sql.RENEW_WORKER, params).rowcount) > 0

    def remove_worker(self, owner: str) -> bool:
        """See `TaskStore.remove_worker`."""
        with self._writing(f"removing worker {owner!r}") as conn:
            return int(conn.execute(sql.DELETE_WORKER, (owner,)).rowcount) > 0

    def workers(self) -> list[WorkerRecord]:
        """See `TaskStore.workers`. A row that cannot be read is named in the `Listing`."""
        with self._reading("listing workers") as conn:
            rows = fetch_all(conn, sql.SELECT_WORKERS, ())
        return Listing.split(worker_from_row(r) for r in rows)

    def served_names(self, now: datetime) -> frozenset[str]:
        """See `TaskStore.served_names`."""
        now_us = micros(now, "now")
        with self._reading("listing the names workers serve") as conn:
            rows = fetch_all(conn, sql.LIVE_WORKER_NAMES, (now_us,))
        names: set[str] = set()
        for (text,) in rows:
            with contextlib.suppress(TypeError, ValueError):  # a damaged row serves nothing
                names.update(n for n in json.loads(text) if isinstance(n, str))
        return frozenset(names)

    def wait_for_work(self, timeout: float) -> bool:
        """See `TaskStore.wait_for_work`: woken by this process's writes, and True when a
        look at the file (as the wait begins, then every 0.1 s) finds that any process
        committed to it since this thread's last look (`FileWatch`: one pragma, not a
        query). Call ``wait_for_work(0)`` once before the first claim."""
        return self._wait("work", self._signals.work.wait, timeout)

    def wait_for_commands(self, timeout: float) -> bool:
        """Block until a command may have been submitted (True) or `timeout` passes: woken
        by this process's submits, and True when a look at the file (as for
        `wait_for_work`) finds any commit since this thread's last look. Call
        ``wait_for_commands(0)`` once before the first claim, so that nothing committed
        in between is missed.

        Raises:
            StoreError: the file could not be read.
        """
        return self._wait("commands", self._signals.commands.wait, timeout)

    def _wait(self, kind: str, woken: Callable[[float], bool], timeout: float) -> bool:
        self._check_open()
        if self._watch is None:
            return woken(timeout)
        try:
            return self._watch.wait(kind, woken, timeout)
        except sqlite3.Error as exc:
            if self._pool.closed:
                self._check_open()  # raises the store's own "closed" error
            raise translate(
                exc, where=self._where, action="watching", busy_timeout=self._busy_timeout
            ) from exc

    def wake_work_waiters(self) -> None:
        """See `TaskStore.wake_work_waiters` (the waiters on this file, in this process)."""
        self._signals.work.set()

    def wait_for_change(self, task_id: str, timeout: float) -> bool:
        """See `TaskStore.wait_for_change`: woken by this process's writes only."""
        self._check_open()

        def ended() -> bool:
            found = self.get(task_id)
            return found is not None and found.durable and found.is_terminal

        return self._signals.changes.wait(task_id, timeout, ended)

    # ------------------------------------------------------------------ housekeeping
    def prune(self, keep_terminal: int) -> int:
        """See `TaskStore.prune`: deletes in batches, one short transaction each."""
        keep = validate_keep_terminal(keep_terminal)
        return prune_batches(self._reading, self._writing, keep)

    def archive(self, *, finished_before: datetime, path: str | os.PathLike[str]) -> int:
        """See `TaskStore.archive`: moves rows in batches; each batch is fsynced before
        its rows are deleted, inside the batch's write transaction."""
        before_us = micros(finished_before, "finished_before")
        self._check_open()
        return archive_batches(self._writing, before_us, os.fspath(path), self._where)

    def close(self) -> None:
        """See `TaskStore.close`. Waits (up to the busy timeout) for calls in progress in
        other threads, then every connection is closed and the file may be deleted."""
        self._pool.close(wait=self._busy_timeout + 1.0)
        if self._watch is not None:
            self._watch.close()


_STATUSES = {s.value: s for s in TaskStatus}


@dataclasses.dataclass(frozen=True, slots=True)
class _Key:
    """A column the counts group by: how a stored value becomes a key (None: it is not
    one), and the SQL predicate (with its parameters) that finds the values that are not."""

    column: str
    of: Callable[[object], Any]
    noun: str
    damaged: str
    damaged_params: tuple[object, ...] = ()


_STATUS_KEY = _Key(
    "status",
    lambda value: _STATUSES.get(value) if isinstance(value, str) else None,
    "a status",
    f"status NOT IN ({placeholders(len(_STATUSES))})",
    tuple(_STATUSES),
)
_BUCKET_KEY = _Key(
    "bucket",
    lambda value: value if type(value) is int else None,
    "an integer",
    "typeof(bucket) != 'integer'",
)
