"""Durable work in PostgreSQL: the claim and the worker rows.

A claim is one transaction:

1. With fleet limits, a transaction-scoped advisory lock per limited tag (sorted, the
   key hashed by ``hashtextextended``), then the count of the tasks holding a slot
   of each: two claimers counting one tag take turns, so they cannot both see room.
2. A page of candidates in claim order (``priority DESC, seq``, the partial index
   ``tasks_claim_idx``) ``FOR UPDATE SKIP LOCKED``: rows another claimer is taking
   are skipped, never waited for; more pages only while the room is not used up.
3. The choice (`choose_claims`, the core's rule for every store), then one
   ``UPDATE ... FROM unnest(...)`` that leases each chosen task fenced by its version;
   or, when the request starts what it claims (`ClaimRequest.start`, a worker's claim),
   the writes it returns, as one group-commit statement fenced by the same versions:
   the claim then commits each task's ``starting`` with its lease (D165).

With nothing to count but the limit, the claim is one statement in autocommit: it chooses
and leases (`CLAIM_NOW`), or with a `ClaimStart` chooses and starts (`CLAIM_START_NOW`:
the start written in SQL as `ClaimStart.write` makes it), in one round trip (D189).

Claims run on connections of their own that plan without sorting (``enable_sort=off``,
`PostgresTaskStore._claims`): the only plan left for ``ORDER BY priority DESC, seq`` is
then the claim index, read in order and stopped at the limit. Without it the planner
trusts statistics that a burst of enqueues has made stale (a queue filled faster than
autovacuum analyzes it, or a large table of finished tasks whose statistics say nothing
is queued): it then reads every queued row and sorts them at each claim, 3-4 ms a claim
at 7,000 queued and growing with the queue, against 0.2 ms in index order. (A ``SET
LOCAL`` in a transaction around each claim does the same at three more statements a
claim: 0.9 ms a one-row claim became 1.5 ms.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from chongming_core import (
    ClaimRequest,
    ClaimStart,
    ConfigurationError,
    TaskSnapshot,
    WorkerRecord,
)
from chongming_core.backend import (
    FLEET_STATUSES,
    UnreadableRow,
    choose_claims,
    claim_writes,
    claimable,
    decode_row,
    shown,
)
from chongming_store_postgres._arrays import IntArray, TextArray
from chongming_store_postgres._codec import check_text, dumps, snapshot_from_row
from chongming_store_postgres._fetching import fetch_all, lenient_loaders
from chongming_store_postgres._queries import Statements
from chongming_store_postgres._runner import Conn
from chongming_store_postgres._writes import apply_writes, prepare

__all__ = ["claim", "worker_from_row", "worker_params"]

_PAGE_FACTOR = 4
_MIN_PAGE = 64

#: The tasks a lost claim had leased (see the module docstring).
_LEASED_BY_LOST_ATTEMPT: Final = """
SELECT {task_columns} FROM {tasks}
WHERE durable AND status IN ('queued', 'starting')
  AND lease_owner = %(owner)s AND lease_until = %(until)s
ORDER BY priority DESC, seq"""


#: A claim connection's writes are planned with sorting (`_start`).
_SORT_AS_USUAL: Final = b"SET LOCAL enable_sort = on"


def claim(
    conn: Conn,
    q: Statements,
    schema: str,
    request: ClaimRequest,
    retrying: bool,
    stored_outcome: Callable[[Any], object],
) -> list[TaskSnapshot]:
    """Choose and lease (or start) the tasks `request` claims, in one transaction of
    `conn`; `stored_outcome` is the store's (a start is written as any save)."""
    counted = request.tag_room or request.fleet_limits or request.bucket_room is not None
    if not retrying and not counted:
        if isinstance(request.start, ClaimStart):
            return _claim_start_now(conn, q, request, request.start)
        if not request.default_tags and request.start is None:
            return _claim_now(conn, q, request)
    with conn.transaction():
        handed: list[TaskSnapshot] = []
        if retrying:
            statement = q.render(_LEASED_BY_LOST_ATTEMPT)
            params = {"owner": request.owner, "until": request.lease_until}
            for row in fetch_all(conn, statement, params):
                found = snapshot_from_row(row)
                if isinstance(found, TaskSnapshot):
                    handed.append(found)
            request = _less(request, handed)
        fleet_active = _fleet_active(conn, q, schema, request)
        chosen, untagged = _choose(conn, q, request, fleet_active)
        if not chosen:
            return handed
        if request.start is not None:
            return handed + _start(conn, q, request, chosen, stored_outcome)
        params = {
            "owner": request.owner,
            "until": request.lease_until,
            "task_ids": TextArray(s.task_id for s in chosen),
            "versions": IntArray(s.status_version for s in chosen),
        }
        leased = {row[0] for row in conn.execute(q.lease_tasks, params).fetchall()}
        tagged = [s for s in chosen if s.task_id in leased and s.task_id in untagged and s.tags]
        if tagged:  # the claimant's tags of a task enqueued with none (`claim_tags`)
            with conn.cursor() as cursor:
                cursor.executemany(
                    q.set_tags, [{"task_id": s.task_id, "tags": sorted(s.tags)} for s in tagged]
                )
    owner, until = request.owner, request.lease_until
    return handed + [
        s.evolve(lease_owner=owner, lease_until=until) for s in chosen if s.task_id in leased
    ]


def _start(
    conn: Conn,
    q: Statements,
    request: ClaimRequest,
    chosen: Sequence[TaskSnapshot],
    stored_outcome: Callable[[Any], object],
) -> list[TaskSnapshot]:
    """Write the start of each chosen task (`ClaimRequest.start`), fenced by the version it
    was chosen at: one statement for them all (`SAVE_BATCH`). The rows are locked by this
    transaction, so no other writer comes between; a write that is refused all the same
    leaves its task unclaimed."""
    writes = claim_writes(chosen, request)
    if not writes:
        return []
    prepared = prepare(writes, q, stored_outcome)
    if len(writes) > 1:
        # a batch is planned as any save: a claim connection plans without sorting, and
        # the batch's join over its JSON rows would then scan the whole table for each one
        conn.execute(_SORT_AS_USUAL)
    outcomes = apply_writes(conn, q, writes, prepared, False)
    return [w.snapshot for w, refused in zip(writes, outcomes, strict=True) if refused is None]


def _claim_now(conn: Conn, q: Statements, request: ClaimRequest) -> list[TaskSnapshot]:
    """A claim with nothing to count but the limit: one statement (`CLAIM_NOW`), in claim
    order. A row that cannot be read is leased all the same and left out: its lease runs
    out and it is claimable again, as after a claimant that died. (Rows are read leniently
    the first time: fetching again would run the claim again and lease other tasks.)"""
    if any("\x00" in name for name in request.names):
        return []  # no stored name can hold one
    params = {
        "names": TextArray(sorted(request.names)),
        "buckets": None if request.buckets is None else IntArray(sorted(request.buckets)),
        "now": request.now,
        "limit": request.limit,
        "owner": request.owner,
        "until": request.lease_until,
    }
    return _claimed_rows(conn, q.claim_now, params)


def _claim_start_now(
    conn: Conn, q: Statements, request: ClaimRequest, start: ClaimStart
) -> list[TaskSnapshot]:
    """A claim that starts what it takes, with nothing to count but the limit: one statement
    (`CLAIM_START_NOW`) in autocommit, the start written in SQL as `ClaimStart.write`
    writes it. A row that cannot be read is started all the same and left out: it is
    `starting` under a lease nobody renews, and `reconcile()` marks it lost once the lease
    runs out (the claim cannot be undone without running it again)."""
    names = sorted(name for name in request.names if name in start.plans)
    if not names or any("\x00" in name for name in names):
        return []  # no stored name can hold one
    check_text(start.executor, "a claim's executor")
    plans = []
    for name in names:
        plan = start.plans[name]
        check_text(plan.description, f"the description of {name!r}")
        tags = sorted(request.default_tags.get(name, ()))
        for tag in tags:
            check_text(tag, f"a tag of {name!r}")
        plans.append(
            {
                "name": name,
                "max_attempts": plan.max_attempts,
                "description": plan.description,
                "tags": tags,
            }
        )
    params = {
        "plans": json.dumps(plans, ensure_ascii=False),
        "names": TextArray(names),
        "buckets": None if request.buckets is None else IntArray(sorted(request.buckets)),
        "now": request.now,
        "limit": request.limit,
        "owner": request.owner,
        "until": request.lease_until,
        "executor": start.executor,
        "trigger": ClaimStart.TRIGGER,
    }
    return _claimed_rows(conn, q.claim_start_now, params)


def _claimed_rows(conn: Conn, statement: bytes, params: dict[str, Any]) -> list[TaskSnapshot]:
    """Run a one-statement claim and read the tasks it returns (``TASK_COLUMNS`` and
    ``seq``), in claim order. Rows are read leniently: fetching again would run the claim
    again and take other tasks; a row that cannot be read is left out."""
    with conn.cursor() as cursor:
        lenient_loaders(cursor)
        found_rows = cursor.execute(statement, params).fetchall()
    claimed = []
    for row in sorted(found_rows, key=lambda row: (-row[9], row[-1])):  # priority, seq
        found = snapshot_from_row(row[:-1])
        if isinstance(found, TaskSnapshot):
            claimed.append(found)
    return claimed


def _less(request: ClaimRequest, handed: Sequence[TaskSnapshot]) -> ClaimRequest:
    """`request` with the room the tasks `handed` over already use taken off."""
    tag_room = dict(request.tag_room)
    for s in handed:
        for tag in s.tags & tag_room.keys():
            tag_room[tag] = max(0, tag_room[tag] - 1)
    return dataclasses.replace(
        request, limit=max(0, request.limit - len(handed)), tag_room=tag_room
    )


def _fleet_active(conn: Conn, q: Statements, schema: str, request: ClaimRequest) -> dict[str, int]:
    """Lock the limited tags (sorted) and count the tasks holding a slot of each."""
    if not request.fleet_limits:
        return {}
    tags = sorted(request.fleet_limits)
    for tag in tags:
        conn.execute(q.lock_fleet_tag, {"key": f"chongming-fleet:{schema}:{tag}"})
    params = {
        "tags": tags,
        "now": request.now,
        "fleet_statuses": sorted(s.value for s in FLEET_STATUSES),
    }
    return {str(tag): int(n) for tag, n in conn.execute(q.fleet_active, params).fetchall()}


def _choose(
    conn: Conn, q: Statements, request: ClaimRequest, fleet_active: dict[str, int]
) -> tuple[list[TaskSnapshot], set[str]]:
    """Read candidate pages (locked, skipping locked rows) until the room is used up;
    returns the chosen tasks and the ids of the candidates stored without tags."""
    if request.limit <= 0 or not request.names:
        return [], set()
    if any("\x00" in name for name in request.names):
        return [], set()  # no stored name can hold one
    # with no room per tag or bucket to count, every candidate found is taken: a page of
    # `limit` rows is all a claim locks (a larger one would hide rows from other claimants)
    counted = request.tag_room or request.fleet_limits or request.bucket_room is not None
    page = max(_MIN_PAGE, request.limit * _PAGE_FACTOR) if counted else request.limit
    params: dict[str, Any] = {
        "names": TextArray(sorted(request.names)),
        "buckets": None if request.buckets is None else IntArray(sorted(request.buckets)),
        "now": request.now,
        "after_seq": None,
        "after_priority": None,
        "page": page,
    }
    seen: list[TaskSnapshot] = []
    while True:
        rows = fetch_all(conn, q.claim_candidates, params)
        for row in rows:
            found = snapshot_from_row(row[:-1])
            if isinstance(found, TaskSnapshot) and claimable(found, request):
                seen.append(found)
        chosen = choose_claims(seen, request, fleet_active)
        if len(chosen) >= request.limit or len(rows) < page:
            return chosen, {found.task_id for found in seen if not found.tags}
        last = rows[-1]
        params["after_seq"], params["after_priority"] = last[-1], last[9]  # seq, priority


def worker_params(record: WorkerRecord) -> dict[str, Any]:
    """The parameters of `UPSERT_WORKER` (checked for NUL bytes)."""
    what = f"worker {record.owner!r}"
    check_text(record.owner, "worker owner")
    check_text(record.host, f"{what} host")
    for name in record.names:
        check_text(name, f"{what} task name")
    return {
        "owner": record.owner,
        "host": record.host,
        "pid": record.pid,
        "buckets": None if record.buckets is None else list(record.buckets),
        "names": list(record.names),
        "capacity": dumps(dict(record.capacity), f"{what} capacity", allow_nul=True),
        "started_at": record.started_at,
        "last_seen": record.last_seen,
        "lease_until": record.lease_until,
    }


def worker_from_row(row: Sequence[Any]) -> WorkerRecord | UnreadableRow:
    """The record of a worker row, or the `UnreadableRow` saying what is wrong with it."""
    return decode_row(row[0], lambda: _worker(row), part="worker row")


def _worker(row: Sequence[Any]) -> WorkerRecord:
    owner, host, pid, buckets, names, capacity, started_at, last_seen, lease_until = row
    if not isinstance(capacity, dict):
        raise ValueError(f"capacity must be a JSON object, got {shown(capacity)}")
    try:
        return WorkerRecord(
            owner=owner,
            host=host,
            pid=pid,
            buckets=None if buckets is None else tuple(buckets),
            names=tuple(names),
            capacity=capacity,
            started_at=started_at,
            last_seen=last_seen,
            lease_until=lease_until,
        )
    except ConfigurationError as exc:  # a value of the wrong kind in the row
        raise ValueError(str(exc)) from None
