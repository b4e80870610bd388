"""Turn driver exceptions into `StoreError` messages that say what to do, without secrets.

No psycopg exception reaches a caller: each is wrapped in a `StoreError` whose
message names the target (host, port, database, user; never the password), the
action that failed, and the way out. The driver exception stays available as
``__cause__`` unless its text holds the password, in which case a scrubbed copy
(`RedactedDriverError`) takes its place.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from chongming_core import StoreError
from chongming_store_postgres._dsn import Target, scrub

__all__ = ["ErrorContext", "RedactedDriverError", "is_connection_lost", "rolled_back"]


class RedactedDriverError(Exception):
    """Stands in for a driver exception whose text held the DSN's password."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def rolled_back(exc: BaseException) -> bool:
    """Whether PostgreSQL aborted the transaction (deadlock, serialization failure): class 40."""
    return str(getattr(exc, "sqlstate", None) or "").startswith("40")


def _connection_class(exc: BaseException) -> bool:
    state = str(getattr(exc, "sqlstate", None) or "")
    return not state or state.startswith("08") or state in {"57P01", "57P02", "57P03"}


def is_connection_lost(exc: BaseException, conn: psycopg.Connection[object] | None) -> bool:
    """Whether `exc` means the connection died (so a fresh one may well succeed)."""
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg_pool.PoolClosed):
        return False
    if isinstance(exc, pg_errors.AdminShutdown | pg_errors.CrashShutdown):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    return conn is not None and (conn.broken or conn.closed)


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What the messages of one store say about it."""

    store: str
    target: Target
    schema: str
    secrets: tuple[str, ...]
    connect_timeout: float

    def detail(self, exc: BaseException) -> str:
        """The driver's message, on one line, without secrets."""
        text = " ".join(str(exc).split())
        return scrub(text, self.secrets) or type(exc).__name__

    def cause(self, exc: BaseException) -> BaseException:
        """`exc`, or a scrubbed stand-in when any message in its chain holds a secret."""
        texts = [str(e) for e in _chain(exc)]
        if any(secret in text for text in texts for secret in self.secrets):
            name = f"{type(exc).__module__}.{type(exc).__qualname__}"
            return RedactedDriverError(f"{name}: {self.detail(exc)}")
        return exc

    def connect_failed(self, exc: BaseException) -> StoreError:
        """The error of a connection that could not be opened."""
        where = self.target.describe()
        if isinstance(exc, psycopg_pool.PoolTimeout):
            return StoreError(
                f"{self.store}: no connection to {where} within {self.connect_timeout:g} s "
                "(the server is unreachable or every pooled connection is busy); check that "
                "PostgreSQL is running and the DSN is right, or raise max_size"
            )
        return StoreError(
            f"{self.store}: cannot connect to {where}: {self.detail(exc)}; check that "
            "PostgreSQL is running and accepting connections there, and that the DSN "
            "(host, port, database, user, password) is right"
        )

    def failed(self, exc: BaseException, action: str) -> StoreError:
        """The `StoreError` for `exc`, raised while doing `action` (e.g. "saving task 'a'")."""
        where = self.target.describe()
        detail = self.detail(exc)
        prefix = f"{self.store}: {action} failed"
        if isinstance(exc, UnicodeError):
            return StoreError(
                f"{prefix}: a text value is not valid Unicode ({detail}); PostgreSQL stores "
                "UTF-8 text only, so remove lone surrogates (e.g. from os.fsdecode) first"
            )
        if isinstance(exc, psycopg_pool.PoolClosed):
            return StoreError(f"{prefix}: the store is closed; open a new PostgresTaskStore")
        if isinstance(exc, psycopg_pool.PoolTimeout):
            return self.connect_failed(exc)
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            return StoreError(
                f"{prefix}: the role {self.target.user!r} lacks a privilege ({detail}); grant it "
                f"USAGE on schema {self.schema!r} and SELECT, INSERT, UPDATE, DELETE on its tables"
            )
        if isinstance(exc, pg_errors.UndefinedTable | pg_errors.InvalidSchemaName):
            return StoreError(
                f"{prefix}: the chongming tables of schema {self.schema!r} are missing in "
                f"{where} ({detail}); were they dropped while the store was open? Open a new "
                "PostgresTaskStore to create them again"
            )
        if rolled_back(exc):
            return StoreError(
                f"{prefix}: PostgreSQL kept aborting the transaction because of concurrent "
                f"writers ({detail}); nothing was written, call again"
            )
        if isinstance(exc, pg_errors.LockNotAvailable):
            return StoreError(
                f"{prefix}: a row it needs stayed locked by another session for longer than "
                f"lock_timeout ({detail}); nothing was written, call again. If it keeps "
                "happening, find the session holding the lock (pg_stat_activity, pg_locks) or "
                "raise lock_timeout in the DSN: options=-c%20lock_timeout%3D30000"
            )
        if isinstance(exc, pg_errors.QueryCanceled):
            return StoreError(
                f"{prefix}: the statement was cancelled ({detail}); if a statement_timeout is "
                "set for this role, raise it"
            )
        if isinstance(exc, pg_errors.ProgramLimitExceeded):
            return StoreError(
                f"{prefix}: a value is too large for PostgreSQL to index ({detail}); nothing "
                "was written. Task ids, names, tags, bucket keys and owner names are indexed, "
                "and an index entry holds at most about 2,700 bytes: keep each of them short "
                "(put long text in the task's arguments or description instead)"
            )
        if isinstance(exc, pg_errors.NumericValueOutOfRange):
            return StoreError(
                f"{prefix}: a number does not fit ({detail}); integers must fit in 64 bits"
            )
        if isinstance(exc, psycopg.DataError):
            return StoreError(f"{prefix}: PostgreSQL refused a value ({detail}); correct it")
        if isinstance(exc, psycopg.OperationalError) and _connection_class(exc):
            return StoreError(
                f"{prefix}: lost the connection to {where} ({detail}); check that PostgreSQL "
                "is running and reachable. If this was a write, reload the task (get/history) "
                "to see whether it was applied before repeating it"
            )
        return StoreError(
            f"{prefix} on {where}: {type(exc).__name__}: {detail}; this is unexpected, "
            "report it together with the PostgreSQL server log"
        )
