"""`InMemoryTaskStore`: the reference store (single process, unit tests, the contract's model).

Its entries are the records themselves. An entry that is not one (a test, or code
that reached into the dictionaries, put a stored document there) is decoded like a
row of any other store, so it is read when it is a record and reported as an
`UnreadableRow` when it is not, exactly as a damaged row of a database would be.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming_core._arguments import arguments_problem
from chongming_core._command_row import checked_command
from chongming_core._conflicts import version_conflict
from chongming_core._decoding import shown
from chongming_core._errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_core._json import progress_problem
from chongming_core._records import Progress, TaskSnapshot, Transition
from chongming_core._status import TaskStatus
from chongming_core._store import (
    Command,
    SnapshotWrite,
    TaskQuery,
    TaskStore,
    TouchUpdate,
    validate_keep_terminal,
    write_jsonl,
)
from chongming_core._unreadable import Counts, Listing, UnreadableRow, decode_row
from chongming_core._work import (
    ChangeSignals,
    ClaimRequest,
    WakeUp,
    WorkerRecord,
    choose_claims,
    claim_writes,
    claimable,
    holds_fleet_slot,
    wakes_workers,
)

__all__ = ["InMemoryTaskStore"]


class InMemoryTaskStore(TaskStore):
    """Keeps everything in dictionaries behind one lock. Thread-safe; nothing survives the process.

    Example::

        store = InMemoryTaskStore()
        controller = Controller(store=store)
    """

    writes_in_memory = True
    supports_durable_work = True

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tasks: dict[str, TaskSnapshot] = {}
        self._order: dict[str, int] = {}
        self._history: dict[str, dict[int, Transition]] = {}
        self._commands: dict[str, Command] = {}
        self._command_order: dict[str, int] = {}
        self._sequence = itertools.count()
        self._workers: dict[str, WorkerRecord] = {}
        self._work = WakeUp()
        self._changes = ChangeSignals()
        self._closed = False

    def __repr__(self) -> str:
        return f"InMemoryTaskStore(tasks={len(self._tasks)})"

    def _open(self) -> None:
        if self._closed:
            raise StoreError("InMemoryTaskStore is closed; create a new store to keep working")

    def _kept(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        """`snapshot` as this store keeps it: refused when another store could not keep it,
        and with its outcome as every other store hands it back (a tuple as a list)."""
        if snapshot.progress is not None:
            _check_progress(snapshot.task_id, snapshot.progress)
        if snapshot.arguments is not None:
            problem = arguments_problem(snapshot.arguments)
            if problem is not None:
                raise StoreError(
                    f"cannot store task {snapshot.task_id!r}: {problem}", task_id=snapshot.task_id
                )
        outcome = snapshot.outcome
        if outcome is None:
            return snapshot
        try:
            kept = self.stored_outcome(outcome)
        except ValueError as exc:
            raise StoreError(
                f"cannot store task {snapshot.task_id!r}: {exc}", task_id=snapshot.task_id
            ) from None
        return snapshot if kept is outcome else snapshot.evolve(outcome=kept)

    # ------------------------------------------------------------------ snapshots
    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """See `TaskStore.create`."""
        snapshot = self._kept(snapshot)
        with self._lock:
            self._open()
            self._create(snapshot, transitions)
        self._signal([snapshot])

    def _create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        existing = self._tasks.get(snapshot.task_id)
        if existing is not None:
            found = _read(snapshot.task_id, existing)
            raise version_conflict(
                snapshot.task_id,
                expected=None,
                actual=None if isinstance(found, UnreadableRow) else found.status_version,
            )
        self._tasks[snapshot.task_id] = snapshot
        self._order[snapshot.task_id] = next(self._sequence)
        self._history.setdefault(snapshot.task_id, {})
        self._append(transitions)

    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """See `TaskStore.save`."""
        snapshot = self._kept(snapshot)
        with self._lock:
            self._open()
            self._save(snapshot, expect_version, transitions)
        self._signal([snapshot])

    def _save(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Sequence[Transition]
    ) -> None:
        entry = self._tasks.get(snapshot.task_id)
        if entry is None:
            raise version_conflict(snapshot.task_id, expected=expect_version, actual=None)
        current = _read(snapshot.task_id, entry)
        if isinstance(current, UnreadableRow):  # no version to compare with: not replaced
            raise version_conflict(
                snapshot.task_id, expected=expect_version, actual=None, unreadable=current.problem
            )
        if current.status_version != expect_version:
            raise version_conflict(
                snapshot.task_id, expected=expect_version, actual=current.status_version
            )
        self._tasks[snapshot.task_id] = snapshot
        self._append(transitions)

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        """See `TaskStore.save_many`."""
        conflicts: list[ConcurrencyConflict] = []
        kept = [self._kept(w.snapshot) for w in writes]  # an unstorable item: nothing written
        applied: list[TaskSnapshot] = []
        with self._lock:
            self._open()
            for write, snapshot in zip(writes, kept, strict=True):
                try:
                    if write.expect_version is None:
                        self._create(snapshot, write.transitions)
                    else:
                        self._save(snapshot, write.expect_version, write.transitions)
                except ConcurrencyConflict as conflict:
                    conflicts.append(conflict)
                else:
                    applied.append(snapshot)
        self._signal(applied)
        return conflicts

    def _signal(self, written: Sequence[TaskSnapshot]) -> None:
        """Wake this store's waiters for what `written` (applied writes) changed."""
        if any(wakes_workers(s) for s in written):
            self._work.set()
        ended = [s.task_id for s in written if s.durable and s.is_terminal]
        if ended:
            self._changes.notify(ended)

    def get(self, task_id: str) -> TaskSnapshot | None:
        """See `TaskStore.get`."""
        with self._lock:
            self._open()
            entry = self._tasks.get(task_id)
        if entry is None:
            return None
        found = _read(task_id, entry)
        if isinstance(found, UnreadableRow):
            raise found.error("InMemoryTaskStore")
        return found

    def _matching(self, query: TaskQuery | None) -> tuple[list[TaskSnapshot | UnreadableRow], bool]:
        """The entries `query` selects in its order, and whether one of them is unreadable
        (kept wherever no filter can rule it out: only its id is known)."""
        q = query or TaskQuery()
        tasks = self._tasks
        pairs: Iterable[tuple[str, object]]
        if q.task_ids is not None:
            pairs = [(t, tasks[t]) for t in q.task_ids if t in tasks]
        else:
            pairs = tasks.items()
        matches = q.matches
        found: list[TaskSnapshot | UnreadableRow] = []
        append = found.append
        damaged = False
        for task_id, entry in pairs:
            snapshot = entry if type(entry) is TaskSnapshot else _read(task_id, entry)
            if isinstance(snapshot, UnreadableRow):  # rare: decoded like a row (the module)
                damaged = True
                append(snapshot)
            elif matches(snapshot):
                append(snapshot)
        order = self._order
        found.sort(key=lambda s: order[s.task_id], reverse=q.newest_first)
        return found, damaged

    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """See `TaskStore.query`."""
        q = query or TaskQuery()
        with self._lock:
            self._open()
            found, damaged = self._matching(q)
        end = None if q.limit is None else q.offset + q.limit
        chosen = found[q.offset : end]
        return Listing.split(chosen) if damaged else Listing(chosen)  # type: ignore[arg-type]

    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        """See `TaskStore.status_counts`."""
        counts: dict[TaskStatus, int] = {}
        unreadable: list[UnreadableRow] = []
        with self._lock:
            self._open()
            for s in self._matching(query)[0]:
                if isinstance(s, UnreadableRow):
                    unreadable.append(s)
                else:
                    counts[s.status] = counts.get(s.status, 0) + 1
        return Counts(counts, unreadable)

    def bucket_counts(self, query: TaskQuery | None = None) -> dict[int, int]:
        """See `TaskStore.bucket_counts`."""
        counts: dict[int, int] = {}
        unreadable: list[UnreadableRow] = []
        with self._lock:
            self._open()
            for s in self._matching(query)[0]:
                if isinstance(s, UnreadableRow):
                    unreadable.append(s)
                elif s.bucket is not None:
                    counts[s.bucket] = counts.get(s.bucket, 0) + 1
        return Counts(counts, unreadable)

    # ------------------------------------------------------------------ audit trail
    def append(self, transitions: Iterable[Transition]) -> None:
        """See `TaskStore.append`."""
        with self._lock:
            self._open()
            self._append(transitions)

    def _append(self, transitions: Iterable[Transition]) -> None:
        history = self._history
        for record in transitions:
            versions = history.get(record.task_id)
            if versions is None:
                versions = history[record.task_id] = {}
            versions.setdefault(record.status_version, record)  # a record is written once

    def history(self, task_id: str) -> list[Transition]:
        """See `TaskStore.history`."""
        with self._lock:
            self._open()
            records = dict(self._history.get(task_id, {}))
        return Listing.split(_read_transition(task_id, v, records[v]) for v in sorted(records))

    # ------------------------------------------------------------------ side path
    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        """See `TaskStore.touch_many`."""
        for update in updates:  # all checked first: an unstorable update writes nothing
            if isinstance(update.progress, Progress):
                _check_progress(update.task_id, update.progress)
        applied = 0
        with self._lock:
            self._open()
            for update in updates:
                current = self._tasks.get(update.task_id)
                if not isinstance(current, TaskSnapshot):  # unknown, or unreadable: untouched
                    continue
                if not update.applies_to(current):  # moved on by another writer: fenced off
                    continue
                self._tasks[update.task_id] = update.apply(current)
                applied += 1
        return applied

    # ------------------------------------------------------------------ commands
    def submit_command(self, command: Command) -> None:
        """See `TaskStore.submit_command`."""
        with self._lock:
            self._open()
            if command.command_id in self._commands:
                return
            self._commands[command.command_id] = command
            self._command_order[command.command_id] = next(self._sequence)

    def _held_by_another(self, task_id: object, owner: str, now: datetime) -> bool:
        """Whether another owner holds `task_id` under a live lease. Under the lock."""
        entry = self._tasks.get(task_id) if isinstance(task_id, str) else None
        found = None if entry is None else _read(task_id, entry)  # type: ignore[arg-type]
        if not isinstance(found, TaskSnapshot):
            return False
        until = found.lease_until
        return found.lease_owner not in (None, owner) and until is not None and until > now

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
        """See `TaskStore.claim_commands`."""
        until = now + timedelta(seconds=lease_seconds)
        wanted_ids = None if task_ids is None else set(task_ids)
        wanted_buckets = None if buckets is None else set(buckets)
        claimed: list[Command] = []
        with self._lock:
            self._open()
            for command_id in sorted(self._commands, key=self._command_order.__getitem__):
                if len(claimed) >= limit:
                    break
                cmd = self._commands[command_id]
                if cmd.completed_at is not None:  # complete, even if it is not a time
                    continue
                # read as stored (D64): any object may have been handed to submit_command
                read = checked_command(cmd)
                if (
                    read.claimed_by is not None
                    and read.lease_until is not None
                    and (read.lease_until > now)
                ):
                    continue
                if wanted_ids is not None and read.task_id not in wanted_ids:
                    continue
                if wanted_buckets is not None and read.bucket not in wanted_buckets:
                    continue
                if self._held_by_another(read.task_id, owner, now):
                    continue
                leased = _replace_command(cmd, claimed_by=owner, lease_until=until)
                read = checked_command(leased)  # the lease replaced what it held
                if read.problem is not None and not _is_text(command_id):
                    # nobody could name it to complete it: settled here (TaskStore docs)
                    result = f"rejected: {read.problem}"
                    done = {"completed_at": now, "result": result, "lease_until": None}
                    leased = _replace_command(leased, **done)
                    read = _replace_command(read, **done)
                self._commands[command_id] = leased
                claimed.append(read)
        return claimed

    def complete_command(self, command_id: str, *, owner: str, now: datetime, result: str) -> bool:
        """See `TaskStore.complete_command`."""
        with self._lock:
            self._open()
            cmd = self._commands.get(command_id)
            if cmd is None or cmd.is_complete or cmd.claimed_by != owner:
                return False
            self._commands[command_id] = _replace_command(
                cmd, completed_at=now, result=result, lease_until=None
            )
            return True

    def release_command(self, command_id: str, *, owner: str) -> bool:
        """See `TaskStore.release_command`."""
        with self._lock:
            self._open()
            cmd = self._commands.get(command_id)
            if cmd is None or cmd.is_complete or cmd.claimed_by != owner:
                return False
            self._commands[command_id] = _replace_command(cmd, claimed_by=None, lease_until=None)
            return True

    def commands(
        self,
        *,
        task_id: str | None = None,
        include_complete: bool = True,
        limit: int | None = None,
    ) -> list[Command]:
        """See `TaskStore.commands`."""
        with self._lock:
            self._open()
            ordered = sorted(self._commands, key=self._command_order.__getitem__)
            found = [
                checked_command(self._commands[c])
                for c in ordered
                if (task_id is None or self._commands[c].task_id == task_id)
                and (include_complete or self._commands[c].completed_at is None)
            ]
        return found if limit is None else found[:limit]

    # ------------------------------------------------------------------ durable work
    def claim_tasks(self, request: ClaimRequest) -> list[TaskSnapshot]:
        """See `TaskStore.claim_tasks`: chosen and leased under the store's lock."""
        if not isinstance(request, ClaimRequest):
            raise ConfigurationError(f"claim_tasks needs a ClaimRequest, got {request!r}")
        with self._lock:
            self._open()
            if request.limit <= 0 or not request.names:
                return []
            readable = [s for s in self._tasks.values() if isinstance(s, TaskSnapshot)]
            candidates = sorted(
                (s for s in readable if claimable(s, request)),
                key=lambda s: (-s.priority, self._order[s.task_id]),
            )
            fleet_active: dict[str, int] = {}
            if request.fleet_limits:
                for s in readable:
                    if holds_fleet_slot(s, request.now):
                        for tag in s.tags & request.fleet_limits.keys():
                            fleet_active[tag] = fleet_active.get(tag, 0) + 1
            writes = claim_writes(choose_claims(candidates, request, fleet_active), request)
            for write in writes:
                self._tasks[write.snapshot.task_id] = self._kept(write.snapshot)
                self._append(write.transitions)
            return [write.snapshot for write in writes]

    def release_claim(self, task_id: str, owner: str, version: int) -> bool:
        """See `TaskStore.release_claim`."""
        with self._lock:
            self._open()
            current = self._tasks.get(task_id)
            if (
                not isinstance(current, TaskSnapshot)
                or current.lease_owner != owner
                or current.status is not TaskStatus.QUEUED
                or current.status_version != version
            ):
                return False
            released = current.evolve(lease_owner=None, lease_until=None)
            self._tasks[task_id] = released
        self._signal([released])
        return True

    def register_worker(self, record: WorkerRecord) -> None:
        """See `TaskStore.register_worker`."""
        if not isinstance(record, WorkerRecord):
            raise ConfigurationError(f"register_worker needs a WorkerRecord, got {record!r}")
        with self._lock:
            self._open()
            self._workers[record.owner] = record

    def renew_worker(self, owner: str, *, last_seen: datetime, lease_until: datetime) -> bool:
        """See `TaskStore.renew_worker`."""
        with self._lock:
            self._open()
            record = self._workers.get(owner)
            if record is None:
                return False
            self._workers[owner] = dataclasses.replace(
                record, last_seen=last_seen, lease_until=lease_until
            )
            return True

    def remove_worker(self, owner: str) -> bool:
        """See `TaskStore.remove_worker`."""
        with self._lock:
            self._open()
            return self._workers.pop(owner, None) is not None

    def workers(self) -> list[WorkerRecord]:
        """See `TaskStore.workers`."""
        with self._lock:
            self._open()
            return [self._workers[owner] for owner in sorted(self._workers)]

    def served_names(self, now: datetime) -> frozenset[str]:
        """See `TaskStore.served_names`."""
        with self._lock:
            self._open()
            live = [w for w in self._workers.values() if w.is_live(now)]
        return frozenset(name for w in live for name in w.names)

    def wait_for_work(self, timeout: float) -> bool:
        """See `TaskStore.wait_for_work`: woken by this store's own writes."""
        self._open()
        return self._work.wait(timeout)

    def wake_work_waiters(self) -> None:
        """See `TaskStore.wake_work_waiters`."""
        self._work.set()

    def wait_for_change(self, task_id: str, timeout: float) -> bool:
        """See `TaskStore.wait_for_change`: woken by this store's own writes."""
        self._open()
        return self._changes.wait(task_id, timeout, lambda: _has_ended(self.get(task_id)))

    # ------------------------------------------------------------------ housekeeping
    def prune(self, keep_terminal: int) -> int:
        """See `TaskStore.prune`."""
        keep = validate_keep_terminal(keep_terminal)
        with self._lock:
            self._open()
            readable = (_read(t, entry) for t, entry in self._tasks.items())
            terminal = [s for s in readable if isinstance(s, TaskSnapshot) and s.is_terminal]
            terminal.sort(
                key=lambda s: (
                    s.finished_at or s.updated_at or s.created_at or _EPOCH,
                    self._order[s.task_id],
                ),
                reverse=True,
            )
            doomed = {s.task_id for s in terminal[keep:]}
            for task_id in doomed:
                del self._tasks[task_id]
                del self._order[task_id]
                self._history.pop(task_id, None)
            for command_id in [c for c, cmd in self._commands.items() if cmd.task_id in doomed]:
                del self._commands[command_id]
                del self._command_order[command_id]
            return len(doomed)

    def archive(self, *, finished_before: datetime, path: str | os.PathLike[str]) -> int:
        """See `TaskStore.archive`."""
        with self._lock:
            self._open()
            moved: list[Transition] = []
            for task_id, entry in self._tasks.items():
                snap = _read(task_id, entry)
                if isinstance(snap, UnreadableRow):
                    continue  # whether it ended is unknown: left as it is
                if not snap.is_terminal or snap.finished_at is None:
                    continue
                if snap.finished_at >= finished_before:
                    continue
                records = self._history.get(task_id, {})
                versions = sorted(records)
                # an unreadable entry is not written to the archive: it stays where it is
                moved.extend(
                    r for r in (records[v] for v in versions[:-1]) if isinstance(r, Transition)
                )
            write_jsonl(path, moved)
            for record in moved:
                del self._history[record.task_id][record.status_version]
            return len(moved)

    def close(self) -> None:
        """See `TaskStore.close`."""
        with self._lock:
            self._closed = True


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _has_ended(snapshot: TaskSnapshot | None) -> bool:
    """Whether `snapshot` is a durable task in a terminal status."""
    return snapshot is not None and snapshot.durable and snapshot.is_terminal


def _is_text(value: object) -> bool:
    """Whether `value` is a `str` (a key of `_commands` is whatever was submitted)."""
    return isinstance(value, str)


def _read(task_id: str, entry: object) -> TaskSnapshot | UnreadableRow:
    """A task entry as a snapshot: itself, or a stored document decoded (see the module)."""
    if isinstance(entry, TaskSnapshot):
        return entry
    return decode_row(task_id, lambda: _decoded(task_id, entry, TaskSnapshot.from_dict))


def _read_transition(task_id: str, version: int, entry: object) -> Transition | UnreadableRow:
    if isinstance(entry, Transition):
        return entry
    decode = lambda: _decoded(task_id, entry, Transition.from_dict)  # noqa: E731
    return decode_row(task_id, decode, part=f"history entry {version}")


def _decoded(task_id: str, entry: object, decode: Any) -> Any:
    if not isinstance(entry, Mapping):
        raise ValueError(f"the stored entry is {shown(entry)}, not a record")
    record = decode(entry)
    if record.task_id != task_id:
        raise ValueError(f"its record names task {shown(record.task_id)}")
    return record


def _replace_command(cmd: Command, **changes: object) -> Command:
    return dataclasses.replace(cmd, **changes)  # type: ignore[arg-type]


def _check_progress(task_id: str, progress: Progress) -> None:
    problem = progress_problem(progress)
    if problem is not None:
        raise StoreError(f"cannot store task {task_id!r}: {problem}", task_id=task_id)
