"""The tables, their forward migrations, and the bootstrap that applies them.

Every statement here is a template: ``{schema}`` and ``{tasks}``-style names are
filled with `psycopg.sql.Identifier`, never with string formatting, and the
templates hold no values. Index names are fixed and live in the store's schema.

Bootstrap (on the first connection of every store):

1. Read ``schema_version``. At the current version there is nothing to do, and
   no DDL is attempted, so a role without CREATE rights can use existing tables.
2. Otherwise take a transaction-scoped advisory lock named after the schema (so
   processes starting at once create the tables exactly once), re-read the
   version, apply the missing migrations with ``IF NOT EXISTS``, record the
   new version and commit.
3. A version newer than this code knows is refused with a `StoreError`.

`check_schema` is the bootstrap of a store opened with ``create=False``: it only
reads, and refuses a missing schema, missing tables or an older version with
`StoreNotFound` (a mistyped ``?schema=`` is reported, never created).
"""

from __future__ import annotations

from typing import Final, LiteralString

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from chongming_core import StoreError, StoreNotFound

__all__ = ["SCHEMA_VERSION", "check_schema", "ensure_schema", "table_names"]

#: The schema version this code reads and writes.
SCHEMA_VERSION: Final = 3

#: The version table: one row holding the applied schema version.
CREATE_VERSION_TABLE: Final = """
CREATE TABLE IF NOT EXISTS {schema_version} (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version    integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)"""

#: Version 1: snapshots, the append-only trajectory, and the command channel.
#: ``seq`` keeps creation order; ``*_fold`` hold casefolded text for ``TaskQuery.search``.
#: ``outcome`` and ``progress`` are ``json``, not ``jsonb``: they carry the user's numbers and
#: keys, and jsonb would rewrite them (1.5e300 comes back as a 301-digit integer, keys are
#: reordered); ``json`` is validated but kept as written.
MIGRATION_1: Final[tuple[LiteralString, ...]] = (
    """
    CREATE TABLE IF NOT EXISTS {tasks} (
        seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        task_id           text PRIMARY KEY,
        name              text NOT NULL,
        status            text NOT NULL,
        status_version    bigint NOT NULL,
        attempt           bigint NOT NULL,
        max_attempts      bigint NOT NULL,
        label             text,
        description       text,
        tags              text[] NOT NULL DEFAULT '{{}}',
        priority          bigint NOT NULL,
        bucket            bigint,
        bucket_key        text,
        pipeline_id       text,
        node_id           text,
        progress          json,
        last_heartbeat_at timestamptz,
        failure           jsonb,
        outcome           json,
        created_at        timestamptz,
        updated_at        timestamptz,
        started_at        timestamptz,
        finished_at       timestamptz,
        retry_at          timestamptz,
        lease_owner       text,
        lease_until       timestamptz,
        executor          text,
        pid               bigint,
        paused_in_place   boolean NOT NULL DEFAULT false,
        attempts          jsonb NOT NULL DEFAULT '[]',
        id_fold           text NOT NULL,
        name_fold         text NOT NULL,
        label_fold        text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_status_idx ON {tasks} (status)",
    "CREATE INDEX IF NOT EXISTS tasks_name_prefix_idx ON {tasks} (name text_pattern_ops)",
    "CREATE INDEX IF NOT EXISTS tasks_tags_idx ON {tasks} USING gin (tags)",
    "CREATE INDEX IF NOT EXISTS tasks_bucket_idx ON {tasks} (bucket)",
    "CREATE INDEX IF NOT EXISTS tasks_lease_idx ON {tasks} (lease_owner, lease_until)",
    "CREATE INDEX IF NOT EXISTS tasks_lease_until_idx ON {tasks} (lease_until)",
    "CREATE INDEX IF NOT EXISTS tasks_finished_at_idx ON {tasks} (finished_at)",
    "CREATE INDEX IF NOT EXISTS tasks_pipeline_idx ON {tasks} (pipeline_id)",
    """
    CREATE TABLE IF NOT EXISTS {transitions} (
        task_id        text NOT NULL,
        status_version bigint NOT NULL,
        from_status    text NOT NULL,
        to_status      text NOT NULL,
        trigger        text NOT NULL,
        actor          text NOT NULL,
        reason         text,
        at             timestamptz NOT NULL,
        PRIMARY KEY (task_id, status_version)
    )""",
    """
    CREATE TABLE IF NOT EXISTS {commands} (
        seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        command_id   text PRIMARY KEY,
        task_id      text NOT NULL,
        action       text NOT NULL,
        issued_by    text NOT NULL,
        issued_at    timestamptz NOT NULL,
        reason       text,
        bucket       bigint,
        claimed_by   text,
        lease_until  timestamptz,
        completed_at timestamptz,
        result       text
    )""",
    "CREATE INDEX IF NOT EXISTS commands_open_idx ON {commands} (seq) WHERE completed_at IS NULL",
    "CREATE INDEX IF NOT EXISTS commands_task_idx ON {commands} (task_id, seq)",
)

#: Version 2: ``paused_seconds``, the time the current attempt spent paused in place in
#: pauses it resumed from (rows written before it read 0: no pause was counted then).
MIGRATION_2: Final[tuple[LiteralString, ...]] = (
    """
    ALTER TABLE {tasks}
        ADD COLUMN IF NOT EXISTS paused_seconds double precision NOT NULL DEFAULT 0
    """,
)

#: Version 3: durable work. ``arguments`` is ``json`` like ``outcome`` (the user's values,
#: kept as written); the partial index serves the claim in its order (priority, then age);
#: ``workers`` holds one row per serving worker.
MIGRATION_3: Final[tuple[LiteralString, ...]] = (
    """
    ALTER TABLE {tasks}
        ADD COLUMN IF NOT EXISTS durable boolean NOT NULL DEFAULT false,
        ADD COLUMN IF NOT EXISTS arguments json,
        ADD COLUMN IF NOT EXISTS run_at timestamptz
    """,
    """
    CREATE INDEX IF NOT EXISTS tasks_claim_idx ON {tasks} (priority DESC, seq)
        WHERE durable AND status = 'queued'
    """,
    "CREATE INDEX IF NOT EXISTS tasks_durable_status_idx ON {tasks} (status) WHERE durable",
    """
    CREATE TABLE IF NOT EXISTS {workers} (
        owner       text PRIMARY KEY,
        host        text NOT NULL,
        pid         bigint NOT NULL,
        buckets     bigint[],
        names       text[] NOT NULL,
        capacity    json NOT NULL,
        started_at  timestamptz NOT NULL,
        last_seen   timestamptz NOT NULL,
        lease_until timestamptz NOT NULL
    )""",
)

#: Forward migrations: version -> statements that bring version - 1 up to it.
MIGRATIONS: Final[dict[int, tuple[LiteralString, ...]]] = {
    1: MIGRATION_1,
    2: MIGRATION_2,
    3: MIGRATION_3,
}

#: The stored version (no row: nothing applied yet).
READ_VERSION: Final = "SELECT version FROM {schema_version} WHERE singleton"

#: Record the version reached by the migrations.
WRITE_VERSION: Final = """
INSERT INTO {schema_version} (singleton, version, updated_at) VALUES (true, %(version)s, now())
ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version, updated_at = EXCLUDED.updated_at
"""

#: Serialise concurrent bootstraps of one schema (released at commit).
LOCK_SCHEMA: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0))"

#: The schema itself.
CREATE_SCHEMA: Final = "CREATE SCHEMA IF NOT EXISTS {schema}"

#: Which of the schema and its tables exist (NULL for a missing one), in one snapshot.
FIND_TABLES: Final = """
SELECT to_regnamespace(%(schema)s)::text,
       to_regclass(format('%%I.%%I', %(schema)s::text, 'schema_version'))::text,
       to_regclass(format('%%I.%%I', %(schema)s::text, 'tasks'))::text,
       to_regclass(format('%%I.%%I', %(schema)s::text, 'transitions'))::text,
       to_regclass(format('%%I.%%I', %(schema)s::text, 'commands'))::text,
       to_regclass(format('%%I.%%I', %(schema)s::text, 'workers'))::text
"""

#: DDL needs no durable commit wait: a lost bootstrap is simply redone by the next store.
FAST_COMMIT: Final = "SET LOCAL synchronous_commit = off"


def table_names(schema: str) -> dict[str, sql.Composable]:
    """The identifiers that fill the templates of this package for `schema`."""
    return {
        "schema": sql.Identifier(schema),
        "schema_version": sql.Identifier(schema, "schema_version"),
        "tasks": sql.Identifier(schema, "tasks"),
        "transitions": sql.Identifier(schema, "transitions"),
        "commands": sql.Identifier(schema, "commands"),
        "workers": sql.Identifier(schema, "workers"),
    }


def _q(template: LiteralString, schema: str) -> sql.Composed:
    return sql.SQL(template).format(**table_names(schema))


def _too_new(version: int, schema: str, where: str) -> StoreError:
    return StoreError(
        f"schema {schema!r} in {where} is at version {version}, but this "
        f"chongming-store-postgres only knows versions up to {SCHEMA_VERSION}; a newer release "
        "wrote to this store: upgrade chongming-store-postgres here (or use another schema)"
    )


def _read_version(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> int | None:
    """The stored version, or None when the version table does not exist yet."""
    try:
        row = conn.execute(_q(READ_VERSION, schema)).fetchone()
    except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
        return None
    return 0 if row is None else int(str(row[0]))


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]], schema: str, where: str) -> int:
    """Create or migrate the tables of `schema` on an autocommit connection; returns the version.

    Args:
        conn: an autocommit connection (it is left idle).
        schema: the schema that holds the tables.
        where: the redacted target, for messages.

    Raises:
        StoreError: the stored version is newer than `SCHEMA_VERSION`, or the tables are
            missing or old and this role may not create them.
        psycopg.Error: any other failure (the caller translates it).
    """
    found = _read_version(conn, schema)
    if found == SCHEMA_VERSION:
        return found
    if found is not None and found > SCHEMA_VERSION:
        raise _too_new(found, schema, where)
    try:
        with conn.transaction():
            conn.execute(FAST_COMMIT)
            conn.execute(LOCK_SCHEMA, {"key": f"chongming-schema:{schema}"})
            conn.execute(_q(CREATE_SCHEMA, schema))
            conn.execute(_q(CREATE_VERSION_TABLE, schema))
            row = conn.execute(_q(READ_VERSION + " FOR UPDATE", schema)).fetchone()
            current = 0 if row is None else int(str(row[0]))
            if current > SCHEMA_VERSION:
                raise _too_new(current, schema, where)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    conn.execute(_q(statement, schema))
            if current != SCHEMA_VERSION:
                conn.execute(_q(WRITE_VERSION, schema), {"version": SCHEMA_VERSION})
    except pg_errors.InsufficientPrivilege as exc:
        state = "do not exist" if found is None else f"are at version {found}"
        raise StoreError(
            f"the chongming tables in schema {schema!r} of {where} {state} and this role may "
            f"not create them ({str(exc).strip()}); connect once with a role that has CREATE "
            f"on the database (or on schema {schema!r}) so the tables are created or "
            "migrated, then this role can use them with USAGE on the schema and SELECT, "
            "INSERT, UPDATE, DELETE on its tables"
        ) from exc
    return SCHEMA_VERSION


def _not_found(schema: str, where: str, found: str) -> StoreNotFound:
    return StoreNotFound(
        f"no chongming store in schema {schema!r} of {where} ({found}); nothing was created "
        "— check the database and the schema (the URL's ?schema=, default 'chongming'), or "
        "open it with create=True (the default) to create one",
        found=found,
    )


def check_schema(conn: psycopg.Connection[tuple[object, ...]], schema: str, where: str) -> int:
    """Check, without writing anything, that `schema` holds the tables at `SCHEMA_VERSION`.

    Args:
        conn: an autocommit connection (it is left idle).
        schema: the schema that should hold the tables.
        where: the redacted target, for messages.

    Raises:
        StoreNotFound: the schema, its version table or one of its tables does not exist,
            or the tables are at an older version (that only `ensure_schema` migrates).
        StoreError: the stored version is newer than `SCHEMA_VERSION`.
        psycopg.Error: any other failure (the caller translates it).
    """
    row = conn.execute(FIND_TABLES, {"schema": schema}).fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    namespace, version_table, *tables = row
    if namespace is None:
        raise _not_found(schema, where, f"the schema {schema!r} does not exist")
    if version_table is None:
        raise _not_found(schema, where, "the schema holds no chongming tables")
    version = _read_version(conn, schema) or 0
    if version == 0:
        raise _not_found(schema, where, "the schema holds no chongming tables")
    if version > SCHEMA_VERSION:
        raise _too_new(version, schema, where)
    if version < SCHEMA_VERSION:
        raise StoreNotFound(
            f"the chongming tables in schema {schema!r} of {where} are at version {version}, "
            f"this chongming-store-postgres uses version {SCHEMA_VERSION}; nothing was changed "
            "— open the store once with create=True (the default) to migrate them (stop the "
            "processes of the older chongming first)",
            found=f"tables at the older schema version {version}",
            schema_version=version,
        )
    names = ("tasks", "transitions", "commands", "workers")
    missing = [name for name, oid in zip(names, tables, strict=True) if not oid]
    if missing:
        raise _not_found(schema, where, f"the table(s) {', '.join(missing)} are missing")
    return version
