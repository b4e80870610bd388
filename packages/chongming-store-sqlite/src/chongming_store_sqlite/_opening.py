"""Opening a store file safely: checks before SQLite sees it, identity, WAL, migrations.

The order matters. Everything that could modify a file (switching it to WAL,
creating tables, writing the header pragmas) happens only after the file was
shown to be either new or a chongming store at a schema this code knows:

1. `prepare_file`: the path is a regular file we may read and write, in a
   directory that exists (a directory, a missing parent, a permission problem,
   or a file whose first bytes are not a SQLite header or that is shorter than
   its header says is refused here). A new file is created with mode 0o600.
2. `initialise`: read ``application_id``, ``user_version`` and the table count
   without writing; refuse a foreign or newer file; then switch to WAL and run
   the missing migrations inside one ``BEGIN IMMEDIATE`` transaction, checking
   the identity again under the write lock (another process may have created
   the schema meanwhile).

Opened with ``create=False`` (the console's queries), nothing is created, migrated
or switched: a missing or empty file, a database without the tables and a store at
an older schema are refused with `StoreNotFound`, which says what was found.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from pathlib import Path

from chongming_core import StoreError, StoreNotFound
from chongming_store_sqlite._errors import is_locked
from chongming_store_sqlite._schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from chongming_store_sqlite._search import SEARCH_KEY_FUNCTION, search_key

__all__ = ["connect", "initialise", "prepare_file"]

_HEADER_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_NEW_FILE_MODE = 0o600


def _where(path: str) -> str:
    return f"SQLite task store {path}"


def _not_found(path: str, found: str, schema_version: int | None = None) -> StoreNotFound:
    if schema_version is None:
        return StoreNotFound(
            f"{_where(path)}: no chongming store there ({found}); nothing was created — "
            "open it with create=True (the default) to create one",
            found=found,
        )
    return StoreNotFound(
        f"{_where(path)}: the store is at schema {schema_version}, this "
        f"chongming-store-sqlite uses schema {SCHEMA_VERSION}; nothing was changed — open it "
        "once with create=True (the default) to migrate it (stop the processes of the older "
        "chongming first)",
        found=found,
        schema_version=schema_version,
    )


def prepare_file(path: str, *, create: bool = True) -> None:
    """Check `path` before SQLite opens it; create it with mode 0o600 when it is new.

    Args:
        path: the absolute path of the database file.
        create: whether a missing file may be created (False: `StoreNotFound` instead,
            and for an empty file too).

    Raises:
        StoreNotFound: `create` is False and there is no file, or an empty one.
        StoreError: the path cannot hold a store; the message says why and what to do.
    """
    where = _where(path)
    if not create and not os.path.lexists(path):
        raise _not_found(path, "the file does not exist")
    if os.path.isdir(path):
        raise StoreError(
            f"{where}: the path is a directory; give the path of a database file, "
            f"for example {os.path.join(path, 'chongming.db')}"
        )
    parent = os.path.dirname(path) or "."
    try:
        parent_is_dir = stat.S_ISDIR(os.stat(parent).st_mode)
    except FileNotFoundError:
        parent_is_dir = False
    except OSError as exc:
        raise StoreError(
            f"{where}: cannot reach the directory {parent} ({exc}); fix the permissions "
            "of the directories on the path"
        ) from exc
    if not parent_is_dir:
        raise StoreError(
            f"{where}: the directory {parent} does not exist; create it first "
            "(the store creates the file, not its directories)"
        )
    try:
        info = os.stat(path)
    except FileNotFoundError:
        _create(path, parent)
        return
    except PermissionError as exc:
        raise StoreError(
            f"{where}: permission denied: cannot reach the file ({exc}); the directory "
            f"{parent} must be readable and searchable by this user, fix its permissions"
        ) from exc
    except OSError as exc:
        raise StoreError(f"{where}: cannot inspect the file ({exc}); fix the path") from exc
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(
            f"{where}: the path is not a regular file; give the path of a database file"
        )
    if not create and info.st_size == 0:
        raise _not_found(path, "the file is empty")
    _check_access(path, parent)
    _inspect_header(path, info.st_size)


def _create(path: str, parent: str) -> None:
    where = _where(path)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(
            f"{where}: cannot create the file: the directory {parent} is not writable; "
            "fix its permissions or choose another directory"
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, _NEW_FILE_MODE)
    except FileExistsError:
        return  # another process created it first; it is checked as an existing file later
    except OSError as exc:
        raise StoreError(f"{where}: cannot create the file ({exc}); fix the path") from exc
    try:
        # The umask may have removed bits from the mode; the owner needs exactly rw.
        if hasattr(os, "fchmod"):
            os.fchmod(fd, _NEW_FILE_MODE)
    finally:
        os.close(fd)


def _check_access(path: str, parent: str) -> None:
    where = _where(path)
    if not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(
            f"{where}: permission denied: the store needs to read and write the file; "
            "fix its permissions (chmod u+rw) or run as its owner"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(
            f"{where}: the directory {parent} is not writable, but SQLite needs to create "
            "the -wal and -shm files beside the database; fix the directory's permissions"
        )


def _inspect_header(path: str, size: int) -> None:
    """Refuse a file that is not a SQLite database or is shorter than its header says."""
    where = _where(path)
    if size == 0:
        return  # an empty file is a new, empty database
    try:
        with open(path, "rb") as handle:
            header = handle.read(_HEADER_SIZE)
    except OSError as exc:
        raise StoreError(f"{where}: cannot read the file ({exc}); fix its permissions") from exc
    if len(header) < _HEADER_SIZE or not header.startswith(_HEADER_MAGIC):
        raise StoreError(
            f"{where}: the file is not a SQLite database (its first bytes are not a SQLite "
            "header; it may be truncated or belong to another program). Nothing was changed; "
            "point the store at another path, or move the file away"
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    change_counter = int.from_bytes(header[24:28], "big")
    page_count = int.from_bytes(header[28:32], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    if page_size < 512 or page_size & (page_size - 1):
        raise StoreError(
            f"{where}: the file's SQLite header is damaged (page size {page_size}). Nothing "
            "was changed; restore the file from a backup or move it away"
        )
    wal = f"{path}-wal"
    wal_pending = os.path.exists(wal) and os.path.getsize(wal) > 0
    # The in-header size is trustworthy only when the header says so (valid_for equals
    # the change counter); with a non-empty WAL, a checkpoint may be extending the file.
    if not wal_pending and valid_for == change_counter and page_count > 0:
        expected = page_count * page_size
        if size < expected or size % page_size:
            raise StoreError(
                f"{where}: the file is truncated: its header promises {page_count} pages of "
                f"{page_size} bytes ({expected} bytes) but it holds {size} bytes. Nothing was "
                "changed; restore it from a backup (`sqlite3 FILE .recover` may salvage rows)"
            )


def connect(path: str, *, busy_timeout: float, memory: bool) -> sqlite3.Connection:
    """A new connection in autocommit mode (the store issues BEGIN/COMMIT itself).

    A file is opened with ``mode=rw``, so a connection never creates a missing file
    (the store would otherwise recreate a deleted database, empty and world-readable).
    """
    if memory:
        target, uri = ":memory:", False
    else:
        target, uri = Path(os.path.abspath(path)).as_uri() + "?mode=rw", True
    return sqlite3.connect(
        target,
        timeout=busy_timeout,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=256,
        uri=uri,
    )


def _identity(conn: sqlite3.Connection) -> tuple[int, int, int]:
    # One statement, so one snapshot: read one by one, another process's first migration
    # could commit in between and its tables would be seen without its application id.
    app_id, version, tables = conn.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), "
        "(SELECT count(*) FROM sqlite_master)"
    ).fetchone()
    return int(app_id), int(version), int(tables)


def _check_identity(path: str, app_id: int, version: int, tables: int) -> None:
    where = _where(path)
    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables > 0):
        owner = f"application id {app_id:#010x}" if app_id else "no application id"
        raise StoreError(
            f"{where}: the file is a SQLite database of another application ({owner}, "
            f"{tables} schema objects), not a chongming store. Nothing was changed; "
            "point the store at another path"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: the file was written by a newer chongming (schema {version}); "
            "upgrade chongming-store-sqlite (this version reads schemas up to "
            f"{SCHEMA_VERSION}). Nothing was changed"
        )


def initialise(
    conn: sqlite3.Connection, path: str, *, busy_timeout: float, memory: bool, create: bool = True
) -> None:
    """Check the database's identity, switch it to WAL and bring its schema up to date.

    With `create` False nothing is written: the database must already be a chongming
    store at `SCHEMA_VERSION`.

    Raises:
        StoreNotFound: `create` is False and the database holds no chongming store, or one
            at an older schema (unchanged).
        StoreError: a foreign or newer file (unchanged), or WAL cannot be enabled.
        sqlite3.Error: anything else (the caller translates it).
    """
    app_id, version, tables = _identity(conn)
    _check_identity(path, app_id, version, tables)
    if not create:
        if app_id == 0 or version == 0:
            raise _not_found(path, "the file is a SQLite database without the chongming tables")
        if version < SCHEMA_VERSION:
            raise _not_found(path, f"a store at the older schema {version}", version)
        return
    if not memory:
        _enable_wal(conn, path, busy_timeout)
    version = _identity(conn)[1]
    if version == SCHEMA_VERSION:
        return
    conn.create_function(SEARCH_KEY_FUNCTION, 3, search_key, deterministic=True)
    conn.execute("BEGIN IMMEDIATE")
    try:
        app_id, version, tables = _identity(conn)
        _check_identity(path, app_id, version, tables)
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
        # PRAGMA takes no parameters; both values are this module's own integers.
        conn.execute(f"PRAGMA application_id = {int(APPLICATION_ID)}")
        conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def _enable_wal(conn: sqlite3.Connection, path: str, busy_timeout: float) -> None:
    """Switch to WAL (persistent in the file). Retries while another opener holds a lock."""
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    deadline = time.monotonic() + busy_timeout
    while mode != "wal":
        try:
            mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            # Changing the journal mode needs an exclusive lock, and SQLite may report
            # "locked" at once instead of calling the busy handler: wait here instead.
            if not is_locked(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
            continue
        if mode != "wal":
            raise StoreError(
                f"{_where(path)}: cannot switch the database to WAL mode (SQLite kept "
                f"journal mode {mode!r}); the file system may not support the shared memory "
                "WAL needs (a network share?). Put the database on a local disk"
            )
