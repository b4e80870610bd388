"""The schema, its migrations and every fixed SQL statement, kept together and named.

The file carries two numbers in its header: ``PRAGMA application_id`` says the
file belongs to chongming, ``PRAGMA user_version`` says which schema it holds.
`MIGRATIONS[n]` turns schema ``n`` into schema ``n + 1``; a file at schema 0 is
a new, empty database. A file at a higher version than `SCHEMA_VERSION` was
written by a newer chongming and is refused, never touched.
"""

from __future__ import annotations

__all__ = [
    "APPLICATION_ID",
    "COMPLETE_COMMAND",
    "COMPLETE_COMMAND_AT",
    "DELETE_TAGS",
    "DELETE_TASK",
    "DELETE_TASK_COMMANDS",
    "DELETE_TASK_TRANSITIONS",
    "DELETE_TRANSITION",
    "DELETE_WORKER",
    "INSERT_COMMAND",
    "INSERT_TAG",
    "INSERT_TASK",
    "INSERT_TRANSITION",
    "LEASE_COMMAND",
    "LEASE_TASK",
    "LIVE_WORKER_NAMES",
    "MIGRATIONS",
    "RELEASE_COMMAND",
    "RELEASE_TASK",
    "RENEW_WORKER",
    "SCHEMA_VERSION",
    "SELECT_WORKERS",
    "SET_TAGS",
    "TASK_VALUE_COLUMNS",
    "TOUCH_TASK",
    "UPDATE_TASK",
    "UPSERT_WORKER",
    "WORKER_COLUMNS",
]

#: ``PRAGMA application_id`` of a chongming store: the ASCII bytes "CHMG".
APPLICATION_ID = 0x43484D47

_V1 = (
    # One row per task. ``seq`` gives creation order and is never reused
    # (AUTOINCREMENT), even after the newest task was pruned. Columns are the
    # snapshot fields queries filter on; ``data`` holds the rest as JSON.
    """
    CREATE TABLE tasks (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id         TEXT    NOT NULL UNIQUE,
        name            TEXT    NOT NULL,
        status          TEXT    NOT NULL,
        status_version  INTEGER NOT NULL,
        label           TEXT,
        bucket          INTEGER,
        pipeline_id     TEXT,
        tags            TEXT    NOT NULL,
        finished_us     INTEGER,
        terminal_us     INTEGER,
        lease_owner     TEXT,
        lease_until     TEXT,
        lease_until_us  INTEGER,
        progress        TEXT,
        heartbeat_at    TEXT,
        pid             INTEGER,
        data            TEXT    NOT NULL
    )
    """,
    "CREATE INDEX tasks_by_status ON tasks (status)",
    "CREATE INDEX tasks_by_name ON tasks (name)",
    "CREATE INDEX tasks_by_bucket ON tasks (bucket) WHERE bucket IS NOT NULL",
    "CREATE INDEX tasks_by_lease_owner ON tasks (lease_owner) WHERE lease_owner IS NOT NULL",
    "CREATE INDEX tasks_by_lease_until ON tasks (lease_until_us)",
    "CREATE INDEX tasks_by_pipeline ON tasks (pipeline_id) WHERE pipeline_id IS NOT NULL",
    # terminal_us is NULL for live tasks, so both indexes hold terminal tasks only.
    "CREATE INDEX tasks_by_terminal_age ON tasks (terminal_us, seq) WHERE terminal_us IS NOT NULL",
    "CREATE INDEX tasks_by_finished ON tasks (finished_us) WHERE terminal_us IS NOT NULL",
    """
    CREATE TABLE task_tags (
        task_id TEXT NOT NULL,
        tag     TEXT NOT NULL,
        PRIMARY KEY (task_id, tag)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX task_tags_by_tag ON task_tags (tag)",
    """
    CREATE TABLE transitions (
        task_id         TEXT    NOT NULL,
        status_version  INTEGER NOT NULL,
        from_status     TEXT    NOT NULL,
        to_status       TEXT    NOT NULL,
        trigger         TEXT    NOT NULL,
        actor           TEXT    NOT NULL,
        reason          TEXT,
        at              TEXT    NOT NULL,
        PRIMARY KEY (task_id, status_version)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE commands (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        command_id      TEXT    NOT NULL UNIQUE,
        task_id         TEXT    NOT NULL,
        action          TEXT    NOT NULL,
        issued_by       TEXT    NOT NULL,
        issued_at       TEXT    NOT NULL,
        reason          TEXT,
        bucket          INTEGER,
        claimed_by      TEXT,
        lease_until     TEXT,
        completed_at    TEXT,
        result          TEXT,
        lease_until_us  INTEGER
    )
    """,
    "CREATE INDEX commands_open ON commands (seq) WHERE completed_at IS NULL",
    "CREATE INDEX commands_by_task ON commands (task_id, seq)",
)

_V2 = (
    # The case-folded id, name and label, so that ``search`` is a C-speed substring
    # test instead of a Python call per row (the function exists while migrating).
    "ALTER TABLE tasks ADD COLUMN search_key TEXT NOT NULL DEFAULT ''",
    "UPDATE tasks SET search_key = chongming_search_key(task_id, name, label)",
)

_V3 = (
    # Durable work. ``durable``, ``priority`` and ``run_at_us`` are kept as columns (and in
    # the document) because claims filter and order on them; ``priority`` comes from the
    # document of every existing row (0 for a row whose document cannot be read).
    "ALTER TABLE tasks ADD COLUMN durable INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN run_at_us INTEGER",
    """
    UPDATE tasks SET priority = CASE WHEN json_valid(data) THEN
        CASE WHEN json_type(data, '$.priority') = 'integer'
             THEN json_extract(data, '$.priority') ELSE 0 END
    ELSE 0 END
    """,
    # The claim walks this index in claim order: highest priority first, then oldest.
    "CREATE INDEX tasks_claim ON tasks (priority DESC, seq) "
    "WHERE durable = 1 AND status = 'queued'",
    "CREATE INDEX tasks_durable_by_status ON tasks (status) WHERE durable = 1",
    """
    CREATE TABLE workers (
        owner           TEXT    PRIMARY KEY,
        host            TEXT    NOT NULL,
        pid             INTEGER NOT NULL,
        buckets         TEXT,
        names           TEXT    NOT NULL,
        capacity        TEXT    NOT NULL,
        started_at      TEXT    NOT NULL,
        last_seen       TEXT    NOT NULL,
        lease_until     TEXT    NOT NULL,
        lease_until_us  INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
)

#: ``MIGRATIONS[n]`` upgrades schema ``n`` to ``n + 1``, one statement at a time.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3)

#: The schema this code reads and writes.
SCHEMA_VERSION = len(MIGRATIONS)

#: The tasks columns a write sets, in the order of `EncodedWrite.values`.
TASK_VALUE_COLUMNS = (
    "name",
    "status",
    "status_version",
    "label",
    "bucket",
    "pipeline_id",
    "tags",
    "finished_us",
    "terminal_us",
    "lease_owner",
    "lease_until",
    "lease_until_us",
    "progress",
    "heartbeat_at",
    "pid",
    "data",
    "search_key",
    "durable",
    "priority",
    "run_at_us",
)

INSERT_TASK = (
    f"INSERT INTO tasks ({', '.join(TASK_VALUE_COLUMNS)}, task_id) "
    f"VALUES ({', '.join('?' * (len(TASK_VALUE_COLUMNS) + 1))})"
)
UPDATE_TASK = (
    f"UPDATE tasks SET {', '.join(f'{c} = ?' for c in TASK_VALUE_COLUMNS)} WHERE task_id = ?"
)
DELETE_TAGS = "DELETE FROM task_tags WHERE task_id = ?"
INSERT_TAG = "INSERT OR IGNORE INTO task_tags (task_id, tag) VALUES (?, ?)"
INSERT_TRANSITION = (
    "INSERT OR IGNORE INTO transitions "
    "(task_id, status_version, from_status, to_status, trigger, actor, reason, at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_TRANSITION = "DELETE FROM transitions WHERE task_id = ? AND status_version = ?"
DELETE_TASK_TRANSITIONS = "DELETE FROM transitions WHERE task_id = ?"
DELETE_TASK_COMMANDS = "DELETE FROM commands WHERE task_id = ?"
DELETE_TASK = "DELETE FROM tasks WHERE task_id = ?"

#: One statement for every side-path update. Each field comes as a pair
#: (set it?, value), so one prepared statement serves any mix of fields and
#: a batch keeps its order under ``executemany``.
TOUCH_TASK = """
UPDATE tasks SET
    progress       = CASE WHEN ?1 THEN ?2 ELSE progress END,
    heartbeat_at   = CASE WHEN ?3 THEN ?4 ELSE heartbeat_at END,
    lease_owner    = CASE WHEN ?5 THEN ?6 ELSE lease_owner END,
    lease_until    = CASE WHEN ?7 THEN ?8 ELSE lease_until END,
    lease_until_us = CASE WHEN ?7 THEN ?9 ELSE lease_until_us END,
    pid            = CASE WHEN ?10 THEN ?11 ELSE pid END
WHERE task_id = ?12 AND (?13 IS NULL OR status_version = ?13)
"""

INSERT_COMMAND = (
    "INSERT OR IGNORE INTO commands (command_id, task_id, action, issued_by, issued_at, "
    "reason, bucket, claimed_by, lease_until, completed_at, result, lease_until_us) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
LEASE_COMMAND = (
    "UPDATE commands SET claimed_by = ?, lease_until = ?, lease_until_us = ? WHERE seq = ?"
)
COMPLETE_COMMAND = (
    "UPDATE commands SET completed_at = ?, result = ?, lease_until = NULL, lease_until_us = NULL "
    "WHERE command_id = ? AND claimed_by = ? AND completed_at IS NULL"
)
#: Complete a command found by its row (a claim settling a row whose id is not text).
COMPLETE_COMMAND_AT = (
    "UPDATE commands SET completed_at = ?, result = ?, lease_until = NULL, lease_until_us = NULL "
    "WHERE seq = ?"
)
#: Claim one chosen task: fenced by its version, and only while it is still queued.
LEASE_TASK = (
    "UPDATE tasks SET lease_owner = ?, lease_until = ?, lease_until_us = ? "
    "WHERE task_id = ? AND status_version = ? AND status = 'queued' AND durable = 1"
)
#: The tags a claim gives a task enqueued with none (its column and its document).
SET_TAGS = "UPDATE tasks SET tags = ?, data = json_set(data, '$.tags', json(?)) WHERE task_id = ?"
#: Give a claim back: only the holder's, at the version it claimed, still queued.
RELEASE_TASK = (
    "UPDATE tasks SET lease_owner = NULL, lease_until = NULL, lease_until_us = NULL "
    "WHERE task_id = ? AND lease_owner = ? AND status_version = ? AND status = 'queued'"
)
#: The columns of a worker row, in the order `_durable.worker_row` writes them.
WORKER_COLUMNS = (
    "owner, host, pid, buckets, names, capacity, started_at, last_seen, lease_until, lease_until_us"
)
UPSERT_WORKER = (
    f"INSERT INTO workers ({WORKER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (owner) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
    "buckets = excluded.buckets, names = excluded.names, capacity = excluded.capacity, "
    "started_at = excluded.started_at, last_seen = excluded.last_seen, "
    "lease_until = excluded.lease_until, lease_until_us = excluded.lease_until_us"
)
RENEW_WORKER = (
    "UPDATE workers SET last_seen = ?, lease_until = ?, lease_until_us = ? WHERE owner = ?"
)
DELETE_WORKER = "DELETE FROM workers WHERE owner = ?"
SELECT_WORKERS = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY owner"
LIVE_WORKER_NAMES = "SELECT names FROM workers WHERE lease_until_us > ?"

RELEASE_COMMAND = (
    "UPDATE commands SET claimed_by = NULL, lease_until = NULL, lease_until_us = NULL "
    "WHERE command_id = ? AND claimed_by = ? AND completed_at IS NULL"
)
