"""Every statement `PostgresTaskStore` runs, as named templates, and the `TaskQuery` filter.

Templates name tables as ``{tasks}``, ``{transitions}``, ``{commands}`` (filled with
`psycopg.sql.Identifier` for the store's schema) and take every value as a named
parameter ``%(name)s``. `Statements` renders them once per store.
"""

from __future__ import annotations

import re
from typing import Any, Final, LiteralString

from psycopg import sql

from chongming_core import TaskQuery
from chongming_core.backend import COMMAND_COLUMNS
from chongming_store_postgres._codec import TASK_COLUMNS, TIME_FIELDS
from chongming_store_postgres._schema import table_names

__all__ = ["Statements", "task_filter"]

_SEARCH_COLUMNS = ("id_fold", "name_fold", "label_fold")
_CASTS: dict[str, LiteralString] = {
    "tags": "::text[]",
    "progress": "::json",
    "failure": "::jsonb",
    "outcome": "::json",
    "attempts": "::jsonb",
    "last_heartbeat_at": "::timestamptz",
    "created_at": "::timestamptz",
    "updated_at": "::timestamptz",
    "started_at": "::timestamptz",
    "finished_at": "::timestamptz",
    "retry_at": "::timestamptz",
    "lease_until": "::timestamptz",
    "arguments": "::json",
    "run_at": "::timestamptz",
}

#: The transitions passed as column arrays (see `_codec.transition_arrays`).
_TRANSITION_ROWS: Final = """
    unnest(%(t_task_id)s::text[], %(t_version)s::bigint[], %(t_from)s::text[], %(t_to)s::text[],
           %(t_trigger)s::text[], %(t_actor)s::text[], %(t_reason)s::text[],
           %(t_at)s::timestamptz[])
        AS t(task_id, status_version, from_status, to_status, trigger, actor, reason, at)"""

_TRANSITION_INSERT: Final = """
    INSERT INTO {transitions}
        (task_id, status_version, from_status, to_status, trigger, actor, reason, at)"""

#: Create a task and its first transitions in one statement. Returns
#: ``(inserted, stored_version, notified)``: the version is that of the existing row on a
#: conflict. A write with a ``notify_channel`` notifies it when applied, at commit (D122).
CREATE_TASK: Final = (
    """
WITH inserted AS (
    INSERT INTO {tasks} ({insert_columns}) VALUES ({insert_values})
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id
), appended AS ("""
    + _TRANSITION_INSERT
    + """
    SELECT t.* FROM"""
    + _TRANSITION_ROWS
    + """
    WHERE EXISTS (SELECT 1 FROM inserted)
    ON CONFLICT DO NOTHING
), notified AS (
    SELECT pg_notify(%(notify_channel)s::text, %(notify_payload)s::text) FROM inserted
    WHERE %(notify_channel)s::text IS NOT NULL
)
SELECT EXISTS (SELECT 1 FROM inserted),
       (SELECT status_version FROM {tasks} WHERE task_id = %(task_id)s),
       (SELECT count(*) FROM notified)
"""
)

#: Compare-and-set: replace the snapshot only at ``expect_version`` and append the
#: transitions only if it was replaced. Returns ``(replaced, version_seen)``.
SAVE_TASK: Final = (
    """
WITH updated AS (
    UPDATE {tasks} SET {update_assignments}
    WHERE task_id = %(task_id)s AND status_version = %(expect_version)s
    RETURNING task_id
), appended AS ("""
    + _TRANSITION_INSERT
    + """
    SELECT t.* FROM"""
    + _TRANSITION_ROWS
    + """
    WHERE EXISTS (SELECT 1 FROM updated)
    ON CONFLICT DO NOTHING
), notified AS (
    SELECT pg_notify(%(notify_channel)s::text, %(notify_payload)s::text) FROM updated
    WHERE %(notify_channel)s::text IS NOT NULL
)
SELECT EXISTS (SELECT 1 FROM updated),
       (SELECT status_version FROM {tasks} WHERE task_id = %(task_id)s),
       (SELECT count(*) FROM notified)
"""
)

# A statement that joins the tasks to rows sent as JSON (``json_to_recordset``) also says
# ``task_id = ANY(ARRAY(SELECT task_id FROM w))``. The planner takes ``json_to_recordset``
# for 100 rows whatever it holds, and against a table of some thousands of rows it then
# read the whole table and hashed it: a group commit of five saves took 2 ms at 10,000
# tasks, growing with the table. ``= ANY`` of an array computed once (an init plan) is
# estimated at a few rows (``unnest`` of an array from the array) and planned as an index
# scan at any size, in custom and generic plans alike: 0.26 ms (`test_write_plans.py`).
# The ids come from the rows themselves: a third parameter, a list, was dumped element by
# element in Python at every flush.

#: A group commit of writes to distinct tasks in one statement: creates and compare-and-set
#: saves from one JSON array of rows (``w``), then the transitions of the writes that were
#: applied, from another. Two parameters whatever the batch's size: psycopg converts the
#: statement once (it caches statements of at most 4 KiB and 50 parameters) and dumps two
#: strings, where column arrays cost a conversion and 44 array dumps per flush. The update
#: finds its rows by the index (see above); a create's ``expect_version`` is null, equal to
#: no stored version, so the update leaves it alone. Returns ``(applied, version_seen)``
#: per write, in the order given.
SAVE_BATCH: Final = (
    """
WITH w AS (
    SELECT * FROM json_to_recordset(%(rows)s::json) AS w(ord integer, expect_version bigint,
        notify_channel text, notify_payload text, {batch_columns})
), created AS (
    INSERT INTO {tasks} ({batch_insert_columns})
    SELECT {batch_values} FROM w WHERE w.expect_version IS NULL ORDER BY w.ord
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id
), updated AS (
    UPDATE {tasks} AS k SET {batch_assignments}
    FROM w
    WHERE k.task_id = ANY(ARRAY(SELECT task_id FROM w))
      AND k.task_id = w.task_id AND k.status_version = w.expect_version
    RETURNING k.task_id
), applied AS (
    SELECT task_id FROM created UNION ALL SELECT task_id FROM updated
), appended AS ("""
    + _TRANSITION_INSERT
    + """
    SELECT t.task_id, t.status_version, t.from_status, t.to_status, t.trigger, t.actor,
           t.reason, t.at
    FROM json_to_recordset(%(transitions)s::json) AS t(owner text, task_id text,
        status_version bigint, from_status text, to_status text, trigger text, actor text,
        reason text, at timestamptz)
    WHERE t.owner IN (SELECT task_id FROM applied)
    ON CONFLICT DO NOTHING
), notified AS (
    SELECT pg_notify(w.notify_channel, w.notify_payload) FROM w
    WHERE w.notify_channel IS NOT NULL AND w.task_id IN (SELECT task_id FROM applied)
)
SELECT w.task_id IN (SELECT task_id FROM applied),
       (SELECT status_version FROM {tasks} AS k WHERE k.task_id = w.task_id),
       (SELECT count(*) FROM notified)
FROM w ORDER BY w.ord
"""
)

#: The latest committed version of a task (a new statement sees what a waiting one did not).
TASK_VERSION: Final = "SELECT status_version FROM {tasks} WHERE task_id = %(task_id)s"

#: One snapshot.
GET_TASK: Final = "SELECT {task_columns} FROM {tasks} WHERE task_id = %(task_id)s"

#: Snapshots matching a filter, in creation order.
QUERY_TASKS: Final = """
SELECT {task_columns} FROM {tasks} WHERE {where}
ORDER BY seq {direction} LIMIT %(limit)s OFFSET %(offset)s"""

#: Tasks per status.
STATUS_COUNTS: Final = "SELECT status, count(*) FROM {tasks} WHERE {where} GROUP BY status"

#: The tasks whose status is none of the statuses (rows written by another program or by
#: hand), with that status: `status_counts` names them.
STATUS_HOLDERS: Final = """
SELECT task_id, status FROM {tasks} WHERE {where} AND status = ANY(%(unknown)s::text[])
ORDER BY seq"""

#: Tasks per bucket (tasks without a bucket are not counted).
BUCKET_COUNTS: Final = """
SELECT bucket, count(*) FROM {tasks} WHERE {where} AND bucket IS NOT NULL GROUP BY bucket"""

#: Idempotent append: a ``(task_id, status_version)`` already stored is skipped.
APPEND: Final = (
    _TRANSITION_INSERT + " SELECT t.* FROM" + _TRANSITION_ROWS + " ON CONFLICT DO NOTHING"
)

#: A task's trajectory.
HISTORY: Final = """
SELECT task_id, from_status, to_status, trigger, actor, reason, status_version, at
FROM {transitions} WHERE task_id = %(task_id)s ORDER BY status_version"""

#: The side path: each field is set only where its ``set_*`` flag is true. Never touches
#: ``status_version``; an update with a held version applies only while the row is at it.
#: Returns the ids of the tasks updated.
TOUCH: Final = """
UPDATE {tasks} AS k SET
    progress = CASE WHEN u.set_progress THEN u.progress ELSE k.progress END,
    last_heartbeat_at = CASE WHEN u.set_heartbeat THEN u.heartbeat_at
                             ELSE k.last_heartbeat_at END,
    lease_owner = CASE WHEN u.set_lease_owner THEN u.lease_owner ELSE k.lease_owner END,
    lease_until = CASE WHEN u.set_lease_until THEN u.lease_until ELSE k.lease_until END,
    pid = CASE WHEN u.set_pid THEN u.pid ELSE k.pid END
FROM unnest(%(task_id)s::text[],
            %(set_progress)s::boolean[], %(progress)s::json[],
            %(set_heartbeat)s::boolean[], %(heartbeat_at)s::timestamptz[],
            %(set_lease_owner)s::boolean[], %(lease_owner)s::text[],
            %(set_lease_until)s::boolean[], %(lease_until)s::timestamptz[],
            %(set_pid)s::boolean[], %(pid)s::bigint[], %(held_version)s::bigint[])
    AS u(task_id, set_progress, progress, set_heartbeat, heartbeat_at, set_lease_owner,
         lease_owner, set_lease_until, lease_until, set_pid, pid, held_version)
WHERE k.task_id = u.task_id
  AND (u.held_version IS NULL OR k.status_version = u.held_version)
RETURNING k.task_id"""

#: Store a command once (idempotent on its id) and NOTIFY listeners when it is new.
SUBMIT_COMMAND: Final = """
WITH inserted AS (
    INSERT INTO {commands} ({command_columns}) VALUES ({command_values})
    ON CONFLICT (command_id) DO NOTHING
    RETURNING command_id
)
SELECT pg_notify(%(channel)s, command_id) FROM inserted"""

#: Lease the oldest claimable commands. ``SKIP LOCKED`` lets many nodes claim at once:
#: rows another claimer is leasing right now are skipped instead of waited for.
CLAIM_COMMANDS: Final = """
WITH picked AS (
    SELECT command_id FROM {commands}
    WHERE completed_at IS NULL
      AND (claimed_by IS NULL OR lease_until IS NULL OR lease_until <= %(now)s)
      AND (%(task_ids)s::text[] IS NULL OR task_id = ANY(%(task_ids)s::text[]))
      AND (%(buckets)s::bigint[] IS NULL OR bucket = ANY(%(buckets)s::bigint[]))
      -- a task another owner holds under a live lease: its commands are the holder's
      AND NOT EXISTS (
          SELECT 1 FROM {tasks} t
          WHERE t.task_id = {commands}.task_id AND t.lease_owner <> %(owner)s
            AND t.lease_until > %(now)s
      )
    ORDER BY seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {commands} AS c SET claimed_by = %(owner)s, lease_until = %(until)s
FROM picked WHERE c.command_id = picked.command_id
RETURNING {claimed_columns}, c.seq"""

#: After a lost connection: the commands the lost claim had leased (same owner, same
#: lease end), so the retry hands them over instead of leaving them stuck until expiry.
CLAIMED_BY_LOST_ATTEMPT: Final = """
SELECT {command_columns}, seq FROM {commands}
WHERE claimed_by = %(owner)s AND lease_until = %(until)s AND completed_at IS NULL
  AND (%(task_ids)s::text[] IS NULL OR task_id = ANY(%(task_ids)s::text[]))
  AND (%(buckets)s::bigint[] IS NULL OR bucket = ANY(%(buckets)s::bigint[]))
ORDER BY seq LIMIT %(limit)s"""

#: Mark a held, incomplete command done.
COMPLETE_COMMAND: Final = """
UPDATE {commands} SET completed_at = %(now)s, result = %(result)s, lease_until = NULL
WHERE command_id = %(command_id)s AND claimed_by = %(owner)s AND completed_at IS NULL
RETURNING command_id"""

#: Give a held, incomplete command back.
RELEASE_COMMAND: Final = """
UPDATE {commands} SET claimed_by = NULL, lease_until = NULL
WHERE command_id = %(command_id)s AND claimed_by = %(owner)s AND completed_at IS NULL
RETURNING command_id"""

#: One command (to tell, after a lost connection, whether a write had been applied).
GET_COMMAND: Final = "SELECT {command_columns} FROM {commands} WHERE command_id = %(command_id)s"

#: Commands for inspection, oldest first.
LIST_COMMANDS: Final = """
SELECT {command_columns} FROM {commands}
WHERE (%(task_id)s::text IS NULL OR task_id = %(task_id)s::text)
  AND (%(include_complete)s OR completed_at IS NULL)
ORDER BY seq LIMIT %(limit)s"""

#: Serialise the claims that count one fleet-limited tag (released at commit).
LOCK_FLEET_TAG: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0))"

#: Per limited tag, the durable tasks holding it that hold a fleet slot at ``now``
#: (`holds_fleet_slot`, in SQL).
FLEET_ACTIVE: Final = """
SELECT tag, count(*) FROM {tasks}, unnest(tags) AS tag
WHERE durable AND tag = ANY(%(tags)s::text[])
  AND (status = ANY(%(fleet_statuses)s::text[])
       OR (status = 'paused' AND paused_in_place)
       OR (status = 'queued' AND lease_owner IS NOT NULL AND lease_until > %(now)s))
GROUP BY tag"""

#: A page of claim candidates in claim order, locked; rows another claimer holds are
#: skipped. ``after_*`` continues after the last row of the previous page.
CLAIM_CANDIDATES: Final = """
SELECT {task_columns}, seq FROM {tasks}
WHERE durable AND status = 'queued'
  AND name = ANY(%(names)s::text[])
  AND (%(buckets)s::bigint[] IS NULL OR bucket = ANY(%(buckets)s::bigint[]))
  AND (run_at IS NULL OR run_at <= %(now)s)
  AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until <= %(now)s)
  AND (%(after_seq)s::bigint IS NULL OR priority < %(after_priority)s
       OR (priority = %(after_priority)s AND seq > %(after_seq)s))
ORDER BY priority DESC, seq
LIMIT %(page)s
FOR UPDATE SKIP LOCKED"""

#: The ids a one-statement claim takes, in claim order, locked (skipping locked rows).
_CLAIMABLE: Final = """
    SELECT task_id FROM {tasks}
    WHERE durable AND status = 'queued'
      AND name = ANY(%(names)s::text[])
      AND (%(buckets)s::bigint[] IS NULL OR bucket = ANY(%(buckets)s::bigint[]))
      AND (run_at IS NULL OR run_at <= %(now)s)
      AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until <= %(now)s)
    ORDER BY priority DESC, seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""

#: A claim with no room per tag or bucket to count, in one statement (one round trip in
#: autocommit): the first `limit` candidates in claim order, locked skipping the locked
#: ones, leased, and returned as they are now.
CLAIM_NOW: Final = (
    """
WITH c AS ("""
    + _CLAIMABLE
    + """)
UPDATE {tasks} AS k SET lease_owner = %(owner)s, lease_until = %(until)s
FROM c WHERE k.task_id = c.task_id
RETURNING {claimed_task_columns}, k.seq"""
)

#: A claim that starts what it takes (`ClaimStart`) with nothing to count but the limit:
#: one statement in autocommit, one round trip. It chooses as `CLAIM_NOW` and writes each
#: task's start as `ClaimStart.write` does (the core's rule; the store contract compares
#: the two): ``starting`` at the next version, the next attempt, the plan's retry budget
#: (at least that attempt) and description, the name's default tags for a task stored
#: without any, the executor, the attempt's fields cleared, the lease; and appends the
#: transition ``queued -> starting``. A task of a name without a plan is not chosen.
CLAIM_START_NOW: Final = (
    """
WITH p AS (
    SELECT * FROM json_to_recordset(%(plans)s::json)
        AS p(name text, max_attempts bigint, description text, tags text[])
), c AS ("""
    + _CLAIMABLE
    + """), started AS (
    UPDATE {tasks} AS k SET
        status = 'starting',
        status_version = k.status_version + 1,
        attempt = k.attempt + 1,
        max_attempts = GREATEST(p.max_attempts, k.attempt + 1),
        description = p.description,
        tags = CASE WHEN cardinality(k.tags) = 0 THEN COALESCE(p.tags, '{{}}') ELSE k.tags END,
        updated_at = %(now)s,
        started_at = %(now)s,
        finished_at = NULL,
        failure = NULL,
        outcome = NULL,
        retry_at = NULL,
        pid = NULL,
        executor = %(executor)s,
        progress = NULL,
        paused_in_place = false,
        paused_seconds = 0,
        lease_owner = %(owner)s,
        lease_until = %(until)s
    FROM c, p
    WHERE k.task_id = c.task_id AND p.name = k.name
    RETURNING {claimed_task_columns}, k.seq
), appended AS ("""
    + _TRANSITION_INSERT
    + """
    SELECT task_id, status_version, 'queued', 'starting', %(trigger)s, %(owner)s, NULL, %(now)s
    FROM started
)
SELECT * FROM started"""
)

#: Lease the chosen tasks, each fenced by the version it was chosen at.
LEASE_TASKS: Final = """
UPDATE {tasks} AS k SET lease_owner = %(owner)s, lease_until = %(until)s
FROM unnest(%(task_ids)s::text[], %(versions)s::bigint[]) AS c(task_id, status_version)
WHERE k.task_id = c.task_id AND k.status_version = c.status_version AND k.status = 'queued'
RETURNING k.task_id"""

#: The tags a claim gives a task enqueued with none (the claimant's registered ones).
SET_TAGS: Final = "UPDATE {tasks} SET tags = %(tags)s::text[] WHERE task_id = %(task_id)s"

#: Give a claim back (the holder's, at its version, still queued) and wake the workers.
RELEASE_TASK: Final = """
WITH released AS (
    UPDATE {tasks} SET lease_owner = NULL, lease_until = NULL
    WHERE task_id = %(task_id)s AND lease_owner = %(owner)s
      AND status_version = %(version)s AND status = 'queued'
    RETURNING task_id
)
SELECT task_id, pg_notify(%(channel)s, '') FROM released"""

#: The columns of a worker row.
_WORKER_COLUMNS: Final = (
    "owner, host, pid, buckets, names, capacity, started_at, last_seen, lease_until"
)

UPSERT_WORKER: Final = (
    "INSERT INTO {workers} ("
    + _WORKER_COLUMNS
    + """) VALUES (%(owner)s, %(host)s, %(pid)s, %(buckets)s::bigint[], %(names)s::text[],
        %(capacity)s::json, %(started_at)s, %(last_seen)s, %(lease_until)s)
ON CONFLICT (owner) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
    buckets = EXCLUDED.buckets, names = EXCLUDED.names, capacity = EXCLUDED.capacity,
    started_at = EXCLUDED.started_at, last_seen = EXCLUDED.last_seen,
    lease_until = EXCLUDED.lease_until"""
)

RENEW_WORKER: Final = """
UPDATE {workers} SET last_seen = %(last_seen)s, lease_until = %(lease_until)s
WHERE owner = %(owner)s RETURNING owner"""

DELETE_WORKER: Final = "DELETE FROM {workers} WHERE owner = %(owner)s RETURNING owner"

SELECT_WORKERS: Final = "SELECT " + _WORKER_COLUMNS + " FROM {workers} ORDER BY owner"

#: The names served by live workers.
SERVED_NAMES: Final = """
SELECT DISTINCT name FROM {workers}, unnest(names) AS name WHERE lease_until > %(now)s"""

#: The terminal tasks `prune` deletes (all but the `keep` most recently finished), each
#: with the end it is ranked by.
PRUNE_SELECT: Final = """
SELECT task_id, COALESCE(finished_at, updated_at, created_at, '1970-01-01T00:00:00Z') AS ended
FROM {tasks}
WHERE status = ANY(%(terminal)s::text[])
ORDER BY ended DESC, seq DESC
OFFSET %(keep)s"""

#: Delete one batch of the tasks `PRUNE_SELECT` chose, with their histories and commands.
#: A task that is no longer terminal with the same end (a retry revived it) is left alone.
#: Returns how many tasks were deleted.
PRUNE_BATCH: Final = """
WITH doomed AS (
    DELETE FROM {tasks} AS k
    USING unnest(%(task_ids)s::text[], %(ended)s::timestamptz[]) AS d(task_id, ended)
    WHERE k.task_id = d.task_id
      AND k.status = ANY(%(terminal)s::text[])
      AND COALESCE(k.finished_at, k.updated_at, k.created_at, '1970-01-01T00:00:00Z') = d.ended
    RETURNING k.task_id
), gone_history AS (
    DELETE FROM {transitions} WHERE task_id IN (SELECT task_id FROM doomed)
), gone_commands AS (
    DELETE FROM {commands} WHERE task_id IN (SELECT task_id FROM doomed)
)
SELECT count(*) FROM doomed"""

#: One archiver per schema at a time, so no transition is written to two files.
LOCK_ARCHIVE: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0))"

#: The transitions `archive` moves: all but the last of each terminal task finished
#: before the cut-off, in creation order of the tasks.
ARCHIVE_SELECT: Final = """
SELECT task_id, from_status, to_status, trigger, actor, reason, status_version, at FROM (
    SELECT tr.*, k.seq,
           max(tr.status_version) OVER (PARTITION BY tr.task_id) AS last_version
    FROM {transitions} AS tr JOIN {tasks} AS k USING (task_id)
    WHERE k.status = ANY(%(terminal)s::text[])
      AND k.finished_at IS NOT NULL AND k.finished_at < %(before)s
) AS candidates
WHERE status_version < last_version
ORDER BY seq, status_version"""

#: Delete archived transitions by key.
ARCHIVE_DELETE: Final = """
DELETE FROM {transitions} AS tr
USING unnest(%(task_ids)s::text[], %(versions)s::bigint[]) AS d(task_id, status_version)
WHERE tr.task_id = d.task_id AND tr.status_version = d.status_version"""


#: The type of each task column in a batch's JSON rows (`SAVE_BATCH`). Tags travel as a JSON
#: list; the other JSON columns as the text `_codec.dumps` made of them, cast by
#: `_batch_value` (so a value is parsed once, by the column's own type).
BATCH_TYPES: dict[str, LiteralString] = {
    **dict.fromkeys(
        (
            "task_id",
            "name",
            "status",
            "label",
            "description",
            "bucket_key",
            "pipeline_id",
            "node_id",
            "lease_owner",
            "executor",
            "id_fold",
            "name_fold",
            "label_fold",
        ),
        "text",
    ),
    **dict.fromkeys(
        ("status_version", "attempt", "max_attempts", "priority", "bucket", "pid"), "bigint"
    ),
    "tags": "json",
    **dict.fromkeys(("progress", "outcome", "arguments", "failure", "attempts"), "text"),
    **dict.fromkeys(TIME_FIELDS, "timestamptz"),
    "paused_in_place": "boolean",
    "durable": "boolean",
    "paused_seconds": "double precision",
}


#: The JSON columns a batch row carries as text, and the type each is cast to.
_BATCH_JSON: dict[str, LiteralString] = {
    "progress": "json",
    "outcome": "json",
    "arguments": "json",
    "failure": "jsonb",
    "attempts": "jsonb",
}


def _batch_value(name: LiteralString) -> sql.Composable:
    # the column names are this module's own lowercase words: written unquoted, which keeps
    # `SAVE_BATCH` short enough for psycopg to cache its conversion
    if name == "tags":
        return sql.SQL("ARRAY(SELECT json_array_elements_text(w.tags))")
    cast = _BATCH_JSON.get(name)
    if cast is not None:
        return sql.SQL(f"w.{name}::{cast}")
    return sql.SQL(f"w.{name}")


def _join(names: tuple[str, ...], prefix: str = "") -> sql.Composed:
    if prefix:
        return sql.SQL(", ").join(sql.Identifier(prefix, n) for n in names)
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


def _values(names: tuple[str, ...], casts: dict[str, LiteralString]) -> sql.Composed:
    return sql.SQL(", ").join(
        sql.SQL("{}{}").format(sql.Placeholder(n), sql.SQL(casts.get(n, ""))) for n in names
    )


class Statements:
    """The rendered statements of one schema (rendered once; each is `bytes` for psycopg)."""

    def __init__(self, schema: str) -> None:
        insert_columns = (*TASK_COLUMNS, *_SEARCH_COLUMNS)
        self._names: dict[str, sql.Composable] = {
            **table_names(schema),
            "task_columns": _join(TASK_COLUMNS),
            "claimed_task_columns": _join(TASK_COLUMNS, "k"),
            "insert_columns": _join(insert_columns),
            "insert_values": _values(insert_columns, _CASTS),
            "update_assignments": sql.SQL(", ").join(
                sql.SQL("{} = {}{}").format(
                    sql.Identifier(n),
                    sql.Placeholder(n),
                    sql.SQL(_CASTS.get(n, "")),
                )
                for n in insert_columns
                if n != "task_id"
            ),
            # this module's own lowercase column names, unquoted: `SAVE_BATCH` stays short
            "batch_insert_columns": sql.SQL(", ".join(insert_columns)),
            "batch_columns": sql.SQL(", ").join(
                sql.SQL(f"{n} {BATCH_TYPES[n]}") for n in insert_columns
            ),
            "batch_values": sql.SQL(", ").join(_batch_value(n) for n in insert_columns),
            "batch_assignments": sql.SQL(", ").join(
                sql.SQL(f"{n} = ") + _batch_value(n) for n in insert_columns if n != "task_id"
            ),
            "command_columns": _join(COMMAND_COLUMNS),
            "claimed_columns": _join(COMMAND_COLUMNS, "c"),
            "command_values": _values(COMMAND_COLUMNS, {"issued_at": "::timestamptz"}),
        }
        self.create_task = self.render(CREATE_TASK)
        self.save_task = self.render(SAVE_TASK)
        # runs of whitespace folded, and none kept after ( and , or before ) (the statement
        # has no text literal): it stays within psycopg's statement cache (4 KiB), so it is
        # converted once, not at every flush
        folded = re.sub(rb"\s+", b" ", self.render(SAVE_BATCH)).strip()
        self.save_batch = re.sub(rb"(?<=[(,]) | (?=\))", b"", folded)
        self.task_version = self.render(TASK_VERSION)
        self.get_task = self.render(GET_TASK)
        self.append = self.render(APPEND)
        self.history = self.render(HISTORY)
        self.touch = self.render(TOUCH)
        self.submit_command = self.render(SUBMIT_COMMAND)
        self.claim_commands = self.render(CLAIM_COMMANDS)
        self.claimed_by_lost_attempt = self.render(CLAIMED_BY_LOST_ATTEMPT)
        self.complete_command = self.render(COMPLETE_COMMAND)
        self.release_command = self.render(RELEASE_COMMAND)
        self.get_command = self.render(GET_COMMAND)
        self.list_commands = self.render(LIST_COMMANDS)
        self.prune_select = self.render(PRUNE_SELECT)
        self.prune_batch = self.render(PRUNE_BATCH)
        self.lock_archive = self.render(LOCK_ARCHIVE)
        self.archive_select = self.render(ARCHIVE_SELECT)
        self.archive_delete = self.render(ARCHIVE_DELETE)
        self.lock_fleet_tag = self.render(LOCK_FLEET_TAG)
        self.fleet_active = self.render(FLEET_ACTIVE)
        self.claim_candidates = self.render(CLAIM_CANDIDATES)
        self.claim_now = self.render(CLAIM_NOW)
        self.claim_start_now = self.render(CLAIM_START_NOW)
        self.lease_tasks = self.render(LEASE_TASKS)
        self.set_tags = self.render(SET_TAGS)
        self.release_task = self.render(RELEASE_TASK)
        self.upsert_worker = self.render(UPSERT_WORKER)
        self.renew_worker = self.render(RENEW_WORKER)
        self.delete_worker = self.render(DELETE_WORKER)
        self.select_workers = self.render(SELECT_WORKERS)
        self.served_names = self.render(SERVED_NAMES)

    def render(self, template: LiteralString, **extra: sql.Composable) -> bytes:
        """`template` with the schema's identifiers (and `extra` fragments) filled in."""
        composed = sql.SQL(template).format(**self._names, **extra)
        return composed.as_bytes(None)

    def filtered(self, template: LiteralString, where: sql.Composable, newest_first: bool) -> bytes:
        """A query template (`QUERY_TASKS`, `STATUS_COUNTS`, ...) with its WHERE clause."""
        direction = sql.SQL("DESC" if newest_first else "ASC")
        return self.render(template, where=where, direction=direction)


def task_filter(query: TaskQuery) -> tuple[sql.Composable, dict[str, Any]] | None:
    """The WHERE clause and parameters of `query`, or None when nothing can match.

    Text holding U+0000 can never be stored, so a filter on such text matches nothing.
    """
    parts: list[sql.Composable] = []
    params: dict[str, Any] = {}
    q = query

    def text_ok(value: str) -> bool:
        return "\x00" not in value

    if q.statuses is not None:
        parts.append(sql.SQL("status = ANY(%(statuses)s::text[])"))
        params["statuses"] = sorted(s.value for s in q.statuses)
    if q.name_prefix is not None:
        if not text_ok(q.name_prefix):
            return None
        parts.append(sql.SQL("name LIKE %(name_prefix)s"))
        params["name_prefix"] = _like_escape(q.name_prefix) + "%"
    if q.tag is not None:
        if not text_ok(q.tag):
            return None
        parts.append(sql.SQL("tags @> ARRAY[%(tag)s::text]"))
        params["tag"] = q.tag
    if q.bucket is not None:
        parts.append(sql.SQL("bucket = %(bucket)s"))
        params["bucket"] = q.bucket
    if q.buckets is not None:
        parts.append(sql.SQL("bucket = ANY(%(buckets)s::bigint[])"))
        params["buckets"] = sorted(q.buckets)
    if q.task_ids is not None:
        parts.append(sql.SQL("task_id = ANY(%(task_ids)s::text[])"))
        params["task_ids"] = sorted(t for t in q.task_ids if text_ok(t))
    if q.lease_owner is not None:
        if not text_ok(q.lease_owner):
            return None
        parts.append(sql.SQL("lease_owner = %(lease_owner)s"))
        params["lease_owner"] = q.lease_owner
    if q.lease_expired_before is not None:
        parts.append(sql.SQL("(lease_until IS NULL OR lease_until < %(lease_expired_before)s)"))
        params["lease_expired_before"] = q.lease_expired_before
    if q.pipeline_id is not None:
        if not text_ok(q.pipeline_id):
            return None
        parts.append(sql.SQL("pipeline_id = %(pipeline_id)s"))
        params["pipeline_id"] = q.pipeline_id
    if q.search is not None:
        if not text_ok(q.search):
            return None
        parts.append(
            sql.SQL(
                "(strpos(id_fold, %(search)s) > 0 OR strpos(name_fold, %(search)s) > 0"
                " OR strpos(label_fold, %(search)s) > 0)"
            )
        )
        params["search"] = q.search.casefold()
    where = sql.SQL(" AND ").join(parts) if parts else sql.SQL("true")
    return where, params


def _like_escape(text: str) -> str:
    """`text` as a literal LIKE pattern (the default escape character is the backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
