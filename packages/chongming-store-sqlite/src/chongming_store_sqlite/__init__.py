"""chongming-store-sqlite: `SqliteTaskStore`, the embedded default store (stdlib `sqlite3`).

One SQLite file is shared by every thread and process of one machine:

- **WAL mode** lets readers (the CLI, the dashboard) read while a controller
  writes; ``synchronous=NORMAL`` makes a commit cost no disk flush.
- **Short write transactions** taken with ``BEGIN IMMEDIATE``: a writer takes
  the write lock before it reads what it will change, waiting up to
  ``busy_timeout`` for it in short pauses (`_locking`), so compare-and-set (`save`), group commits
  (`save_many`) and command leases (`claim_commands`) are atomic across
  processes. A lock held past the timeout is a `StoreError` naming the file,
  never a raw "database is locked".
- **A connection pool** gives each concurrent caller its own connection (see
  `_pool`); ``":memory:"`` uses one connection behind a lock, so all threads of
  that store object share one database.
- **A guarded file**: ``application_id`` and ``user_version`` identify a
  chongming store and its schema; a foreign, newer, damaged or unreadable file
  is refused with a `StoreError` and left unchanged; a new file is created
  with mode 0o600.
- **Faithful values**: times are stored as ISO text (offset kept, microseconds
  exact) beside integer UTC microseconds for comparisons; text is always bound
  as a parameter, so NUL bytes and any script round-trip.

Example::

    from chongming_store_sqlite import SqliteTaskStore

    with SqliteTaskStore("tasks.db") as store:
        store.query()

See ``docs/store-guide.md`` for the contract every store meets and how this
one meets it.
"""

from __future__ import annotations

from chongming_store_sqlite._store import SqliteTaskStore as SqliteTaskStore

__version__ = "0.1.0"

__all__ = ["SqliteTaskStore"]
