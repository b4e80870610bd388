"""`PostgresTaskStore`: one store and one command channel shared by many machines.

It keeps the `TaskStore` contract exactly as `SqliteTaskStore` does; what differs:

1. **A connection pool.** Every call borrows a connection from a
   `psycopg_pool.ConnectionPool` for one statement (or one transaction) and
   gives it back, so threads work in parallel instead of queueing on one file
   lock. A pooled connection that died while idle (server restart, an
   administrator's ``pg_terminate_backend``) is noticed at checkout by a
   readability poll of its socket, costing a round trip only when the socket has
   data. A call that loses its connection anyway is retried once on a fresh one
   when repeating it is safe: reads, idempotent writes (append, touch,
   submit_command), and compare-and-set writes, whose retry reports success when
   the stored row proves the first attempt committed. Nothing is ever applied twice.
2. **SKIP LOCKED.** `claim_commands` is one ``UPDATE`` over
   ``SELECT ... FOR UPDATE SKIP LOCKED``: claimers on many nodes lease disjoint
   commands at the same time and never wait for each other's row locks.
3. **Native types.** ``timestamptz`` for every time (instants are kept; they come
   back in UTC), ``text[]`` tags with a GIN index, ``jsonb`` for failure and
   attempts, ``json`` for outcome and progress (jsonb would rewrite the user's
   numbers, e.g. 1.5e300 as a 301-digit integer), a ``bigint`` identity for
   creation order, and indexes for every `TaskQuery` filter.
4. **NUL bytes.** PostgreSQL cannot store U+0000 in ``text`` or ``jsonb``: such a
   value is refused with a `StoreError` naming the task and field before any
   statement is sent. (The ``json`` columns, outcome and progress, keep it.)
5. **LISTEN/NOTIFY.** `submit_command` notifies `notify_channel` when it commits;
   `wait_for_commands` blocks on a dedicated connection until one arrives, so a
   controller need not poll the command table. Likewise a write that leaves a durable
   task queued and unheld notifies `work_channel` (`wait_for_work`), and a terminal
   save of a durable task `change_channel` (`wait_for_change`), in its own statement.
6. **Claims.** `claim_tasks` locks candidates ``FOR UPDATE SKIP LOCKED`` and counts
   fleet limits under advisory locks per tag, in one transaction (see `_durable`).

Example::

    store = PostgresTaskStore("postgresql://app:pw@db.internal:5432/chongming")
    controller = Controller(store=store, owner="node-a")
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
import psycopg_pool

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
from chongming_core.backend import shown, stored_id, validate_keep_terminal, wakes_workers
from chongming_store_postgres import _housekeeping as H
from chongming_store_postgres import _queries as Q
from chongming_store_postgres import _writes as W
from chongming_store_postgres._arrays import IntArray, TextArray
from chongming_store_postgres._codec import (
    check_text,
    command_cursor,
    command_from_row,
    command_params,
    dumps,
    outcome_size_problem,
    snapshot_from_row,
    touch_arrays,
    transition_arrays,
    transition_from_row,
)
from chongming_store_postgres._dsn import (
    Target,
    check_url_userinfo,
    dsn_secrets,
    parse_dsn,
    redact_dsn,
    split_schema,
    validate_options,
)
from chongming_store_postgres._durable import claim, worker_from_row, worker_params
from chongming_store_postgres._errors import ErrorContext
from chongming_store_postgres._fetching import fetch_all
from chongming_store_postgres._runner import Conn, Runner
from chongming_store_postgres._schema import check_schema, ensure_schema
from chongming_store_postgres._watch import (
    ChangeListener,
    CommandListener,
    change_key,
    channel_name,
)

__all__ = ["PostgresTaskStore"]

_T = TypeVar("_T")
_STATUSES = {s.value: s for s in TaskStatus}
#: Connections a store keeps for claims at most (one thread of a worker claims).
_CLAIM_CONNECTIONS = 2


class PostgresTaskStore(TaskStore):
    """A `TaskStore` in PostgreSQL, shared by every process and machine that opens the DSN.

    The tables live in `schema` (created with the tables on first connect; a role
    without DDL rights uses existing tables; ``create=False`` opens only existing
    ones). Thread-safe.

    Example::

        store = PostgresTaskStore("postgresql://app:pw@db:5432/tasks", schema="chongming")

    Args:
        dsn: a libpq connection string, URL (``postgresql://...``) or key=value form.
        schema: the schema that holds the tables (default ``chongming``); a URL DSN may
            name it instead, as ``?schema=NAME`` (chongming's own parameter).
        min_size: connections the pool keeps open.
        max_size: connections the pool may open (the most calls that run at once).
        connect_timeout: seconds to wait for a connection before raising `StoreError`
            (libpq counts whole seconds, and at least 2, for opening one connection).
        application_name: shown in ``pg_stat_activity`` (default: the DSN's, else
            ``chongming-<pid>-<random>``, unique per store).
        create: whether a missing schema and its tables are created and older tables
            migrated (the default). False only checks that `schema` holds the tables at
            this code's version and changes nothing (what a read-only console wants: a
            mistyped schema is reported, not created).

    Raises:
        ConfigurationError: an argument cannot work (bad DSN syntax, schema, sizes).
        StoreNotFound: `create` is False and `schema` holds no chongming tables (or holds
            them at an older version).
        StoreError: the server cannot be reached or the tables cannot be set up.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        application_name: str | None = None,
        create: bool = True,
    ) -> None:
        if not isinstance(dsn, str):
            raise ConfigurationError(f"dsn must be a str, got {type(dsn).__name__}")
        self._redacted = redact_dsn(dsn)
        check_url_userinfo(dsn)
        dsn, named = split_schema(dsn)
        if named is not None and schema is not None and named != schema:
            raise ConfigurationError(
                f"the DSN {self._redacted!r} names schema {named!r} and schema= names "
                f"{schema!r}; name it once"
            )
        schema = named if named is not None else "chongming" if schema is None else schema
        validate_options(schema, min_size, max_size, connect_timeout, self._redacted)
        try:
            params = parse_dsn(dsn)
        except ValueError as exc:
            raise ConfigurationError(
                f"cannot parse the DSN {self._redacted!r}: {exc}; write it as "
                "'postgresql://user:password@host:5432/dbname' or 'host=... dbname=...'"
            ) from None
        self._schema = schema
        self._closed = False
        self._close_lock = threading.Lock()
        self._application_name = (
            application_name
            or params.get("application_name")
            or f"chongming-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        )
        self._errors = ErrorContext(
            store=f"PostgresTaskStore({self._redacted!r}, schema={schema!r})",
            target=Target.of(params),
            schema=schema,
            secrets=dsn_secrets(dsn),
            connect_timeout=connect_timeout,
        )
        # a lock held by another session, or a network that drops packets, must end in a
        # StoreError the writer retries, never block the controller for minutes: a lock
        # timeout (the DSN's own options come later and win), TCP keepalives and a limit
        # on unacknowledged sends (each unless the DSN sets it)
        wait_ms = max(2, math.ceil(connect_timeout)) * 1000
        options = " ".join(
            filter(None, [f"-c lock_timeout={wait_ms}", params.get("options"), "-c TimeZone=UTC"])
        )
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": self._application_name,
            "connect_timeout": max(2, math.ceil(connect_timeout)),
            "options": options,
        }
        for key, value in (
            ("keepalives", 1),
            ("keepalives_idle", 10),
            ("keepalives_interval", 5),
            ("keepalives_count", 3),
            ("tcp_user_timeout", 3 * wait_ms),
        ):
            if key not in params:
                self._connect_kwargs[key] = value
        self._dsn = dsn
        self._q = Q.Statements(schema)
        self._channel = channel_name(schema)
        self._work_channel = channel_name(schema, "work")
        self._change_channel = channel_name(schema, "changes")
        self._bootstrap(create)
        self._pool: psycopg_pool.ConnectionPool[Conn] = psycopg_pool.ConnectionPool(
            dsn,
            kwargs=self._connect_kwargs,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name=f"chongming:{schema}",
            timeout=connect_timeout,
        )
        self._pool.open(wait=False)
        self._runner = Runner(self._pool, self._errors, max_size, lambda: self._closed)
        self._connect_timeout = connect_timeout
        self._claim_pool: psycopg_pool.ConnectionPool[Conn] | None = None  # at the first claim
        self._claim_runner: Runner | None = None
        self._listener = CommandListener(self._channel, self._connect)
        self._work_listener = CommandListener(self._work_channel, self._connect)
        self._change_listener = ChangeListener(self._change_channel, self._connect)

    supports_durable_work = True
    notifies_workers = True

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"PostgresTaskStore({self._redacted!r}, schema={self._schema!r}){state}"

    # ------------------------------------------------------------------ properties
    @property
    def schema(self) -> str:
        """The schema that holds the tables."""
        return self._schema

    @property
    def application_name(self) -> str:
        """The ``application_name`` of this store's connections (see ``pg_stat_activity``)."""
        return self._application_name

    @property
    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel that `submit_command` notifies."""
        return self._channel

    @property
    def work_channel(self) -> str:
        """The channel a write notifies when it leaves a durable task queued and unheld."""
        return self._work_channel

    @property
    def change_channel(self) -> str:
        """The channel a terminal save of a durable task notifies (payload: its id, or a
        hash of a very long one)."""
        return self._change_channel

    # ------------------------------------------------------------------ connections
    def _connect(self) -> Conn:
        conn: Conn = psycopg.connect(self._dsn, **self._connect_kwargs)
        return conn

    def _bootstrap(self, create: bool) -> None:
        """Open a first connection and create or migrate the tables (`create`), or only
        check that they are there."""
        error: StoreError
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            error, cause = self._errors.connect_failed(exc), self._errors.cause(exc)
        else:
            try:
                with conn:
                    setup = ensure_schema if create else check_schema
                    setup(conn, self._schema, self._errors.target.describe())
                return
            except (psycopg.Error, UnicodeError) as exc:
                error = self._errors.failed(exc, f"setting up schema {self._schema!r}")
                cause = self._errors.cause(exc)
        raise error from cause

    def _run(self, action: str, body: Callable[[Conn, bool], _T]) -> _T:
        """Run `body(conn, retrying)` on a pooled connection (see `Runner.run`)."""
        self._check_open()
        return self._runner.run(action, body)

    def _claims(self) -> Runner:
        """The runner of claims, on connections of their own that plan without sorting
        (``enable_sort=off``: the claim index in order is then a claim's only plan, whatever
        the statistics say; see `_durable`). Opened at the first claim: only workers claim."""
        runner = self._claim_runner
        if runner is not None:
            return runner
        with self._close_lock:
            self._check_open()
            if self._claim_runner is None:
                options = f"{self._connect_kwargs['options']} -c enable_sort=off"
                pool: psycopg_pool.ConnectionPool[Conn] = psycopg_pool.ConnectionPool(
                    self._dsn,
                    kwargs={**self._connect_kwargs, "options": options},
                    min_size=1,
                    max_size=_CLAIM_CONNECTIONS,
                    open=False,
                    name=f"chongming-claims:{self._schema}",
                    timeout=self._connect_timeout,
                )
                pool.open(wait=False)
                self._claim_pool = pool
                self._claim_runner = Runner(
                    pool, self._errors, _CLAIM_CONNECTIONS, lambda: self._closed
                )
            return self._claim_runner

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(
                f"{self._errors.store} is closed; create a new PostgresTaskStore to keep working"
            )

    # ------------------------------------------------------------------ values
    def stored_outcome(self, value: Any) -> Any:
        """See `TaskStore.stored_outcome`. PostgreSQL also keeps at most 1 GiB in one value
        (and in one message, with the rest of the row): `OUTCOME_LIMIT` bytes of JSON."""
        kept = super().stored_outcome(value)
        if isinstance(value, str | dict | list | tuple):
            text = dumps(value, "the result", allow_nul=True)
            problem = None if text is None else outcome_size_problem(text)
            if problem is not None:
                raise ValueError(problem)
        return kept

    # ------------------------------------------------------------------ snapshots
    def _write(self, writes: Sequence[SnapshotWrite], action: str) -> list[ConcurrencyConflict]:
        self._check_open()
        # refuses bad values before anything is sent
        prepared = W.prepare(writes, self._q, self.stored_outcome, self._announce)
        if not prepared:
            return []

        def body(conn: Conn, retrying: bool) -> list[ConcurrencyConflict | None]:
            return W.apply_writes(conn, self._q, writes, prepared, retrying)

        return [c for c in self._run(action, body) if c is not None]

    def _announce(self, snapshot: TaskSnapshot) -> tuple[str | None, str | None]:
        """The notification a write of `snapshot` sends when it is applied (D122)."""
        if wakes_workers(snapshot):
            return self._work_channel, ""
        if snapshot.durable and snapshot.is_terminal:
            return self._change_channel, change_key(snapshot.task_id)
        return None, None

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """See `TaskStore.create`."""
        write = SnapshotWrite(snapshot, None, tuple(transitions))
        for conflict in self._write([write], f"creating task {snapshot.task_id!r}"):
            raise conflict

    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """See `TaskStore.save`. One statement: compare, replace and append at once."""
        write = SnapshotWrite(snapshot, expect_version, tuple(transitions))
        for conflict in self._write([write], f"saving task {snapshot.task_id!r}"):
            raise conflict

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        """See `TaskStore.save_many`. One transaction (one statement for distinct tasks)."""
        return self._write(list(writes), f"saving {len(writes)} tasks")

    def get(self, task_id: str) -> TaskSnapshot | None:
        """See `TaskStore.get`."""
        self._check_open()
        if "\x00" in task_id:
            return None  # no stored id can hold a NUL

        def body(conn: Conn, retrying: bool) -> TaskSnapshot | UnreadableRow | None:
            rows = fetch_all(conn, self._q.get_task, {"task_id": task_id})
            return snapshot_from_row(rows[0]) if rows else None

        found = self._run(f"reading task {task_id!r}", body)
        if isinstance(found, UnreadableRow):
            raise found.error(self._errors.store)
        return found

    def _filtered(
        self, template: Any, query: TaskQuery | None, action: str, **extra: Any
    ) -> list[tuple[Any, ...]]:
        q = query or TaskQuery()
        self._check_open()
        built = Q.task_filter(q)
        if built is None:
            return []
        where, params = built
        statement = self._q.filtered(template, where, q.newest_first)
        params.update(limit=q.limit, offset=q.offset, **extra)

        def body(conn: Conn, retrying: bool) -> list[tuple[Any, ...]]:
            return fetch_all(conn, statement, params)

        return self._run(action, body)

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """See `TaskStore.query`."""
        rows = self._filtered(Q.QUERY_TASKS, query, "querying tasks")
        return Listing.split(snapshot_from_row(row) for row in rows)

    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        """See `TaskStore.status_counts`. The status column is text: a value that is not a
        status is counted under none, and the tasks holding it are named (a rare second
        query, with the same filter)."""
        rows = self._filtered(Q.STATUS_COUNTS, query, "counting tasks by status")
        counts: dict[TaskStatus, int] = {}
        unknown: list[str] = []
        for status, count in rows:
            known = _STATUSES.get(status)
            if known is None:
                unknown.append(status)
            else:
                counts[known] = int(count)
        unreadable: list[UnreadableRow] = []
        if unknown:
            q = dataclasses.replace(query or TaskQuery(), limit=None, offset=0)
            holders = self._filtered(
                Q.STATUS_HOLDERS, q, "naming the tasks of unknown statuses", unknown=unknown
            )
            unreadable = [
                UnreadableRow(stored_id(task_id), f"status {shown(status)} is not a status")
                for task_id, status in holders
            ]
        return Counts(counts, unreadable)

    def bucket_counts(self, query: TaskQuery | None = None) -> dict[int, int]:
        """See `TaskStore.bucket_counts` (buckets are ``bigint``: every one is an integer)."""
        rows = self._filtered(Q.BUCKET_COUNTS, query, "counting tasks by bucket")
        return Counts({int(bucket): int(count) for bucket, count in rows})

    # ------------------------------------------------------------------ audit trail
    def append(self, transitions: Iterable[Transition]) -> None:
        """See `TaskStore.append`."""
        self._check_open()
        records = list(transitions)
        params = transition_arrays(records)
        if not records:
            return

        def body(conn: Conn, retrying: bool) -> None:
            conn.execute(self._q.append, params)

        self._run(f"appending {len(records)} transitions", body)

    def history(self, task_id: str) -> list[Transition]:
        """See `TaskStore.history`."""
        self._check_open()
        if "\x00" in task_id:
            return Listing()

        def body(conn: Conn, retrying: bool) -> Listing[Transition]:
            rows = fetch_all(conn, self._q.history, {"task_id": task_id})
            return Listing.split(transition_from_row(row) for row in rows)

        return self._run(f"reading the history of task {task_id!r}", body)

    # ------------------------------------------------------------------ side path
    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        """See `TaskStore.touch_many`. One statement: every update or none is applied.

        The updates of one task are merged in order; when any of them is fenced, the merged
        update is fenced to the last version given.
        """
        self._check_open()
        merged: dict[str, dict[str, Any]] = {}
        held: dict[str, int] = {}
        for update in updates:
            if "\x00" in update.task_id:
                continue  # cannot exist
            merged.setdefault(update.task_id, {}).update(update.fields())
            if update.held_version is not None:
                held[update.task_id] = update.held_version
        if not merged:
            return 0
        params = touch_arrays(merged, held)

        def body(conn: Conn, retrying: bool) -> set[str]:
            return {row[0] for row in conn.execute(self._q.touch, params).fetchall()}

        found = self._run(f"touching {len(merged)} tasks", body)
        return sum(1 for update in updates if update.task_id in found)

    # ------------------------------------------------------------------ commands
    def submit_command(self, command: Command) -> None:
        """See `TaskStore.submit_command`. Notifies `notify_channel` when the command is new."""
        self._check_open()
        params = command_params(command)
        params["channel"] = self._channel

        def body(conn: Conn, retrying: bool) -> None:
            conn.execute(self._q.submit_command, params)

        self._run(f"submitting command {command.command_id!r}", body)

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
        """See `TaskStore.claim_commands`. Concurrent claimers skip each other's locked rows.

        When the connection is lost during the claim, it is retried once, and the retry
        also returns the commands the lost attempt had leased (same owner, same lease end).
        """
        self._check_open()
        check_text(owner, "claim_commands owner")
        if now.tzinfo is None:
            raise StoreError("claim_commands: now must be a timezone-aware datetime")
        params: dict[str, Any] = {
            "owner": owner,
            "now": now,
            "until": now + timedelta(seconds=lease_seconds),
            "limit": max(0, limit),
            "task_ids": None
            if task_ids is None
            else TextArray(sorted(t for t in task_ids if "\x00" not in t)),
            "buckets": None if buckets is None else IntArray(sorted(buckets)),
        }

        def body(conn: Conn, retrying: bool) -> list[Command]:
            rows: list[tuple[Any, ...]] = []
            cursor = command_cursor(conn)  # each row read on its own (D64)
            if retrying:  # the lost attempt may have committed its leases: hand them over
                rows = cursor.execute(self._q.claimed_by_lost_attempt, params).fetchall()
            more = {**params, "limit": params["limit"] - len(rows)}
            rows += cursor.execute(self._q.claim_commands, more).fetchall()
            rows.sort(key=lambda row: int(row[-1]))
            return [command_from_row(row) for row in rows]

        return self._run(f"claiming commands for {owner!r}", body)

    def complete_command(self, command_id: str, *, owner: str, now: datetime, result: str) -> bool:
        """See `TaskStore.complete_command`."""
        self._check_open()
        check_text(result, f"result of command {command_id!r}")
        if "\x00" in command_id or "\x00" in owner:
            return False
        params = {"command_id": command_id, "owner": owner, "now": now, "result": result}

        def body(conn: Conn, retrying: bool) -> bool:
            if conn.execute(self._q.complete_command, params).fetchone() is not None:
                return True
            if not retrying:
                return False
            # The lost attempt may have committed: it did if the row shows exactly its write.
            found = self._command(conn, command_id)
            return (
                found is not None
                and found.claimed_by == owner
                and found.completed_at == now
                and found.result == result
            )

        return self._run(f"completing command {command_id!r}", body)

    def release_command(self, command_id: str, *, owner: str) -> bool:
        """See `TaskStore.release_command`."""
        self._check_open()
        if "\x00" in command_id or "\x00" in owner:
            return False
        params = {"command_id": command_id, "owner": owner}

        def body(conn: Conn, retrying: bool) -> bool:
            if conn.execute(self._q.release_command, params).fetchone() is not None:
                return True
            if not retrying:
                return False
            found = self._command(conn, command_id)  # released by the lost attempt?
            return found is not None and found.claimed_by is None and not found.is_complete

        return self._run(f"releasing command {command_id!r}", body)

    def _command(self, conn: Conn, command_id: str) -> Command | None:
        row = (
            command_cursor(conn).execute(self._q.get_command, {"command_id": command_id}).fetchone()
        )
        return None if row is None else command_from_row(row)

    def commands(
        self,
        *,
        task_id: str | None = None,
        include_complete: bool = True,
        limit: int | None = None,
    ) -> list[Command]:
        """See `TaskStore.commands`."""
        self._check_open()
        if task_id is not None and "\x00" in task_id:
            return []
        params = {
            "task_id": task_id,
            "include_complete": bool(include_complete),
            "limit": None if limit is None else max(0, limit),
        }

        def body(conn: Conn, retrying: bool) -> list[Command]:
            rows = command_cursor(conn).execute(self._q.list_commands, params).fetchall()
            return [command_from_row(row) for row in rows]

        return self._run("listing commands", body)

    def wait_for_commands(self, timeout: float) -> bool:
        """Block until a command is submitted to this store's schema, or `timeout` passes.

        Returns True when a notification arrived (or the listening connection was lost,
        so one may have been missed): call `claim_commands` then. The first call opens
        the listening connection; call ``wait_for_commands(0)`` once before the first
        claim so that no command submitted in between is missed.

        Raises:
            StoreError: the listening connection cannot be opened.
        """
        self._check_open()
        try:
            return self._listener.wait(timeout)
        except psycopg.Error as exc:
            error, cause = self._errors.connect_failed(exc), self._errors.cause(exc)
        raise error from cause

    # ------------------------------------------------------------------ durable work
    def claim_tasks(self, request: ClaimRequest) -> list[TaskSnapshot]:
        """See `TaskStore.claim_tasks`: one transaction, candidates locked ``FOR UPDATE SKIP
        LOCKED``, fleet limits counted under an advisory lock per limited tag."""
        self._check_open()
        if not isinstance(request, ClaimRequest):
            raise ConfigurationError(f"claim_tasks needs a ClaimRequest, got {request!r}")
        check_text(request.owner, "claim_tasks owner")
        for tag in request.fleet_limits:
            check_text(tag, "a fleet-limited tag")
        if request.limit <= 0 or not request.names:
            return []

        def body(conn: Conn, retrying: bool) -> list[TaskSnapshot]:
            return claim(conn, self._q, self._schema, request, retrying, self.stored_outcome)

        return self._claims().run(f"claiming tasks for {request.owner!r}", body)

    def release_claim(self, task_id: str, owner: str, version: int) -> bool:
        """See `TaskStore.release_claim`. Notifies `work_channel` when it gave a task back."""
        self._check_open()
        if "\x00" in task_id or "\x00" in owner:
            return False
        params = {
            "task_id": task_id,
            "owner": owner,
            "version": version,
            "channel": self._work_channel,
        }

        def body(conn: Conn, retrying: bool) -> bool:
            if conn.execute(self._q.release_task, params).fetchone() is not None:
                return True
            if not retrying:
                return False
            found = conn.execute(self._q.get_task, {"task_id": task_id}).fetchone()
            task = None if found is None else snapshot_from_row(found)
            return (  # released by the lost attempt?
                isinstance(task, TaskSnapshot)
                and task.status_version == version
                and task.status is TaskStatus.QUEUED
                and task.lease_owner is None
            )

        return self._run(f"releasing the claim of task {task_id!r}", body)

    def register_worker(self, record: WorkerRecord) -> None:
        """See `TaskStore.register_worker`."""
        self._check_open()
        if not isinstance(record, WorkerRecord):
            raise ConfigurationError(f"register_worker needs a WorkerRecord, got {record!r}")
        params = worker_params(record)

        def body(conn: Conn, retrying: bool) -> None:
            conn.execute(self._q.upsert_worker, params)

        self._run(f"registering worker {record.owner!r}", body)

    def renew_worker(self, owner: str, *, last_seen: datetime, lease_until: datetime) -> bool:
        """See `TaskStore.renew_worker`."""
        self._check_open()
        for moment in (last_seen, lease_until):
            if moment.tzinfo is None:
                raise StoreError("renew_worker: times must be timezone-aware datetimes")
        if "\x00" in owner:
            return False
        params = {"owner": owner, "last_seen": last_seen, "lease_until": lease_until}

        def body(conn: Conn, retrying: bool) -> bool:
            return conn.execute(self._q.renew_worker, params).fetchone() is not None

        return self._run(f"renewing worker {owner!r}", body)

    def remove_worker(self, owner: str) -> bool:
        """See `TaskStore.remove_worker`."""
        self._check_open()
        if "\x00" in owner:
            return False

        def body(conn: Conn, retrying: bool) -> bool:
            return conn.execute(self._q.delete_worker, {"owner": owner}).fetchone() is not None

        return self._run(f"removing worker {owner!r}", body)

    def workers(self) -> list[WorkerRecord]:
        """See `TaskStore.workers`. A row that cannot be read is named in the `Listing`."""
        self._check_open()

        def body(conn: Conn, retrying: bool) -> list[tuple[Any, ...]]:
            return fetch_all(conn, self._q.select_workers, {})

        return Listing.split(worker_from_row(r) for r in self._run("listing workers", body))

    def served_names(self, now: datetime) -> frozenset[str]:
        """See `TaskStore.served_names`."""
        self._check_open()

        def body(conn: Conn, retrying: bool) -> list[tuple[Any, ...]]:
            return conn.execute(self._q.served_names, {"now": now}).fetchall()

        rows = self._run("listing the names workers serve", body)
        return frozenset(str(row[0]) for row in rows if row[0] is not None)

    def wait_for_work(self, timeout: float) -> bool:
        """See `TaskStore.wait_for_work`: woken by ``NOTIFY`` on `work_channel` from any
        process (or a lost listening connection). The first call opens the listening
        connection: call ``wait_for_work(0)`` once before the first claim."""
        self._check_open()
        try:
            return self._work_listener.wait(timeout)
        except psycopg.Error as exc:
            error, cause = self._errors.connect_failed(exc), self._errors.cause(exc)
        raise error from cause

    def wake_command_waiters(self) -> None:
        """Make the `wait_for_commands` under way on this store object (or the next one)
        return True at once: a poller that is told to poll now or to stop does not sleep
        out its wait."""
        self._listener.wake()

    def wake_work_waiters(self) -> None:
        """See `TaskStore.wake_work_waiters` (the waiters of this store object)."""
        self._work_listener.wake()

    def wait_for_change(self, task_id: str, timeout: float) -> bool:
        """See `TaskStore.wait_for_change`: woken by ``NOTIFY`` on `change_channel` from any
        process; listening starts before the task is read, so no save falls in between."""
        self._check_open()

        def ended() -> bool:
            found = self.get(task_id)
            return found is not None and found.durable and found.is_terminal

        try:
            return self._change_listener.wait(change_key(task_id), timeout, ended)
        except psycopg.Error as exc:
            error, cause = self._errors.connect_failed(exc), self._errors.cause(exc)
        raise error from cause

    # ------------------------------------------------------------------ housekeeping
    def prune(self, keep_terminal: int) -> int:
        """See `TaskStore.prune`: the tasks are chosen once, then deleted in batches of
        `PRUNE_BATCH_TASKS`, one short transaction each."""
        keep = validate_keep_terminal(keep_terminal)
        self._check_open()

        def choose(conn: Conn, retrying: bool) -> list[tuple[str, datetime]]:
            return H.prune_candidates(conn, self._q, keep)

        doomed = self._run(f"choosing the tasks to prune to {keep} terminal tasks", choose)
        deleted = 0
        for start in range(0, len(doomed), H.PRUNE_BATCH_TASKS):
            batch = doomed[start : start + H.PRUNE_BATCH_TASKS]

            def body(conn: Conn, retrying: bool, batch: Sequence[Any] = batch) -> int:
                return H.prune_batch(conn, self._q, batch)

            deleted += self._run(f"pruning {len(batch)} tasks", body)
        return deleted

    def archive(self, *, finished_before: datetime, path: str | os.PathLike[str]) -> int:
        """See `TaskStore.archive`."""
        self._check_open()
        if finished_before.tzinfo is None:
            raise StoreError("archive: finished_before must be a timezone-aware datetime")

        def body(conn: Conn, retrying: bool) -> int:
            return H.archive(conn, self._q, self._schema, finished_before, path)

        return self._run(f"archiving history to {os.fspath(path)!r}", body)

    def close(self) -> None:
        """See `TaskStore.close`. Closes the pool and the listening connection."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._listener.close()
        self._work_listener.close()
        self._change_listener.close()
        if self._claim_pool is not None:
            self._claim_pool.close(timeout=5.0)
        self._pool.close(timeout=5.0)
