"""The persistence contract: `TaskStore`, `TaskQuery`, `SnapshotWrite`, `TouchUpdate`, `Command`.

Four kinds of data with different write rates and consistency needs, kept apart
on purpose (guide §8.7):

========================  ===========================================  ============================
kind                      methods                                      property
========================  ===========================================  ============================
task snapshots            create / save / save_many / get / query      optimistic ``status_version``
                          / status_counts / bucket_counts
audit trail               append / history                             append-only, idempotent
high-frequency side path  touch / touch_many                           never changes the version
control commands          submit_command / claim_commands /            leased, so a crashed claimer
                          complete_command / release_command /         never loses a command
                          commands
durable work              claim_tasks / release_claim /                one fenced write per claim;
                          register_worker / renew_worker /             optional: see
                          remove_worker / workers / served_names /     ``supports_durable_work``
                          wait_for_work / wait_for_change
housekeeping              prune / close
========================  ===========================================  ============================

A store only persists. It never decides lifecycle: that is `StateMachine`'s job.
Every backend must pass `chongming_store_contract.StoreContract`, the executable
version of the docstrings below.
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any, ClassVar

from chongming_core._errors import ConcurrencyConflict, ConfigurationError
from chongming_core._json import portable_json
from chongming_core._records import Progress, SnapshotWrite, TaskSnapshot, Transition
from chongming_core._status import TERMINAL_STATUSES, TaskStatus
from chongming_core._work import ClaimRequest, WorkerRecord

__all__ = [
    "UNSET",
    "Command",
    "CommandAction",
    "SnapshotWrite",
    "TaskQuery",
    "TaskStore",
    "TouchUpdate",
]


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """A filter over task snapshots. Every field narrows the result; None means "any".

    Results are ordered by creation (the order in which tasks were created in
    the store), oldest first, or newest first with ``newest_first=True``.

    Attributes:
        statuses: only these statuses.
        name_prefix: the registered name starts with this text.
        tag: the task carries this tag.
        bucket: the task is in this bucket.
        buckets: the task is in one of these buckets.
        task_ids: only these ids.
        lease_owner: the lease is held by this owner.
        lease_expired_before: the task has no lease, or its lease ends before this time.
        pipeline_id: the task is a node of this pipeline.
        search: case-insensitive substring of the task id, name or label.
        limit: at most this many results (None: all).
        offset: skip this many results first.
        newest_first: reverse the order.
    """

    statuses: frozenset[TaskStatus] | None = None
    name_prefix: str | None = None
    tag: str | None = None
    bucket: int | None = None
    buckets: frozenset[int] | None = None
    task_ids: frozenset[str] | None = None
    lease_owner: str | None = None
    lease_expired_before: datetime | None = None
    pipeline_id: str | None = None
    search: str | None = None
    limit: int | None = None
    offset: int = 0
    newest_first: bool = False

    def __post_init__(self) -> None:
        if self.statuses is not None:
            object.__setattr__(self, "statuses", frozenset(TaskStatus(s) for s in self.statuses))
        if self.buckets is not None:
            object.__setattr__(self, "buckets", frozenset(self.buckets))
        if self.task_ids is not None:
            object.__setattr__(self, "task_ids", frozenset(self.task_ids))
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0
        ):
            raise ConfigurationError(f"limit must be an integer >= 0 or None, got {self.limit!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < 0:
            raise ConfigurationError(f"offset must be an integer >= 0, got {self.offset!r}")
        if self.lease_expired_before is not None and self.lease_expired_before.tzinfo is None:
            raise ConfigurationError("lease_expired_before must be a timezone-aware datetime")

    def matches(self, snapshot: TaskSnapshot) -> bool:
        """Whether `snapshot` passes every filter (ignores limit, offset and order)."""
        s = snapshot
        if self.statuses is not None and s.status not in self.statuses:
            return False
        if self.name_prefix is not None and not s.name.startswith(self.name_prefix):
            return False
        if self.tag is not None and self.tag not in s.tags:
            return False
        if self.bucket is not None and s.bucket != self.bucket:
            return False
        if self.buckets is not None and s.bucket not in self.buckets:
            return False
        if self.task_ids is not None and s.task_id not in self.task_ids:
            return False
        if self.lease_owner is not None and s.lease_owner != self.lease_owner:
            return False
        if self.lease_expired_before is not None and not (
            s.lease_until is None or s.lease_until < self.lease_expired_before
        ):
            return False
        if self.pipeline_id is not None and s.pipeline_id != self.pipeline_id:
            return False
        if self.search is not None:
            needle = self.search.casefold()
            haystacks = (s.task_id, s.name, s.label or "")
            if not any(needle in h.casefold() for h in haystacks):
                return False
        return True


class _Unset(Enum):
    UNSET = "unset"


#: Marks a `TouchUpdate` field that must be left as it is.
UNSET = _Unset.UNSET


@dataclass(frozen=True, slots=True)
class TouchUpdate:
    """Side-path fields to refresh without a new version. None clears a field; `UNSET` keeps it.

    `held_version`, when given, fences the update: it applies only while the task's row is
    still at that ``status_version``. A holder renewing its lease or its progress passes the
    version it last wrote, so once anyone else moved the task on (``reconcile()`` marking it
    ``lost``, a claim by another node) its renewals change nothing and are not counted.
    """

    task_id: str
    progress: Progress | _Unset | None = UNSET
    heartbeat_at: datetime | _Unset | None = UNSET
    lease_owner: str | _Unset | None = UNSET
    lease_until: datetime | _Unset | None = UNSET
    pid: int | _Unset | None = UNSET
    held_version: int | None = None

    @classmethod
    def given(
        cls,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
        pid: int | None = None,
    ) -> TouchUpdate:
        """The update `TaskStore.touch` describes: arguments left as None are not changed."""

        def kept(value: object) -> object:
            return UNSET if value is None else value

        return cls(
            task_id,
            progress=kept(progress),  # type: ignore[arg-type]
            heartbeat_at=kept(heartbeat_at),  # type: ignore[arg-type]
            lease_owner=kept(lease_owner),  # type: ignore[arg-type]
            lease_until=kept(lease_until),  # type: ignore[arg-type]
            pid=kept(pid),  # type: ignore[arg-type]
        )

    def fields(self) -> dict[str, object]:
        """The fields this update sets, by name (``progress``, ``heartbeat_at``, ...)."""
        values = {
            "progress": self.progress,
            "heartbeat_at": self.heartbeat_at,
            "lease_owner": self.lease_owner,
            "lease_until": self.lease_until,
            "pid": self.pid,
        }
        return {name: value for name, value in values.items() if value is not UNSET}

    def applies_to(self, snapshot: TaskSnapshot) -> bool:
        """Whether the fence lets this update change `snapshot` (always without a fence)."""
        return self.held_version is None or snapshot.status_version == self.held_version

    def apply(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        """`snapshot` with this update's fields applied (version untouched)."""
        changes = self.fields()
        if "heartbeat_at" in changes:
            changes["last_heartbeat_at"] = changes.pop("heartbeat_at")
        return snapshot.evolve(**changes) if changes else snapshot


class CommandAction(StrEnum):
    """The control actions a command row may carry."""

    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"


@dataclass(frozen=True, slots=True)
class Command:
    """A control request for a task held by another process (a row of the command channel).

    `action` is kept as text: a row found in the store is data, and an unknown
    action must be rejected by the reader, not crash it. For the same reason a
    store reads each row on its own: a row holding a value that is not what its
    column holds (written by anyone, outside `submit_command`) comes back with
    `problem` saying what is wrong, a bad text field holding the stored value's
    rendering and a bad time (`issued_at` included) or bucket None (D64). Nobody
    acts on such a command; its claimer completes it as rejected.
    """

    command_id: str
    task_id: str
    action: str
    issued_by: str
    issued_at: datetime | None
    reason: str | None = None
    bucket: int | None = None
    claimed_by: str | None = None
    lease_until: datetime | None = None
    completed_at: datetime | None = None
    result: str | None = None
    problem: str | None = None

    @property
    def is_complete(self) -> bool:
        """True once a holder completed it."""
        return self.completed_at is not None

    def known_action(self) -> CommandAction | None:
        """The action as a `CommandAction`, or None when the row holds an unknown one."""
        try:
            return CommandAction(self.action)
        except ValueError:
            return None


class TaskStore(abc.ABC):
    """Where snapshots, trajectories and commands live. Thread-safe in every implementation.

    Errors: a backend failure (I/O, connection, corruption, lock timeout) raises
    `StoreError` naming the store and what to do; an optimistic conflict raises
    `ConcurrencyConflict`. No driver exception ever reaches the caller.

    Rows that cannot be decoded (written by another program or by hand): each row is
    decoded on its own. A listing (`query`, `history`, `status_counts`, `bucket_counts`)
    leaves such a row out and names it in the result's ``unreadable`` (a `Listing` or
    `Counts`, which are a list and a dict), so one damaged row never hides the others;
    reading the task directly (`get`) raises `StoreError` naming it and what is wrong.
    A store that returns plain lists and dicts names none (see `unreadable_in`).
    """

    #: True when a write is a memory operation of this process (no I/O, no commit worth
    #: sharing): a controller's writer then makes a durable write on the thread that
    #: asked for it instead of waking its background thread to batch it.
    writes_in_memory: ClassVar[bool] = False

    #: True when this store implements durable work: `claim_tasks`, `release_claim`, the
    #: worker rows and the wake-ups. A store without it raises `ConfigurationError` from
    #: each of those methods (it still stores durable snapshots like any other).
    supports_durable_work: ClassVar[bool] = False
    #: True when `wait_for_work` is woken by enqueues of any process (a notification
    #: channel): its workers then poll only as a fallback (for tasks due later, and a
    #: lost notification), not at every ``poll_interval``.
    notifies_workers: ClassVar[bool] = False
    #: True when `wait_for_work` notices work written by any process by looking at the
    #: store when it ends (a cheap look, not a query: SQLite's data version): a worker
    #: waits in slices of its ``poll_interval`` and claims only when a look saw a change,
    #: or once a second as a fallback (for tasks due later).
    watches_work: ClassVar[bool] = False

    # ------------------------------------------------------------------ values
    def stored_outcome(self, value: Any) -> Any:
        """`value`, a task's outcome, as every reader of this store will get it back.

        The runtime asks this before it tells anyone a task succeeded, so a result this
        store cannot keep ends the attempt ``failed`` (kind ``result_invalid``) instead of
        a ``succeeded`` that the store never holds. `create`, `save` and `save_many`
        refuse an outcome this refuses with `StoreError`, writing nothing.

        The default applies the rules every store shares (``chongming_core._json``):
        JSON that any process reads back as the same value; what JSON only renames is
        converted (a tuple comes back as a list, an ``IntEnum`` member as an int). A
        backend with limits of its own (a size) overrides this and calls ``super()``
        first; it must never accept what the default refuses.

        Raises:
            ValueError: this store cannot keep `value`; the message says where, why and
                what to return instead.
        """
        return portable_json(value)

    # ------------------------------------------------------------------ snapshots
    @abc.abstractmethod
    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """Insert a new task, together with its first transitions, atomically.

        Raises:
            ConcurrencyConflict: a task with this id already exists (ids are never reused).
        """

    @abc.abstractmethod
    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """Replace a task's snapshot if its stored version is `expect_version` (compare-and-set),
        appending `transitions` in the same atomic step.

        Raises:
            ConcurrencyConflict: the stored version differs (``actual`` holds it) or the
                task does not exist (``actual`` is None). Nothing is written.
        """

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        """Apply several creates and saves (a group commit); each item is checked on its own.

        Returns the conflicts of the items that were not applied, in order; every
        other item is applied with its transitions. Backends override this to use
        one transaction; this default applies the items one by one.
        """
        conflicts: list[ConcurrencyConflict] = []
        for write in writes:
            try:
                if write.expect_version is None:
                    self.create(write.snapshot, write.transitions)
                else:
                    self.save(
                        write.snapshot,
                        expect_version=write.expect_version,
                        transitions=write.transitions,
                    )
            except ConcurrencyConflict as conflict:
                conflicts.append(conflict)
        return conflicts

    @abc.abstractmethod
    def get(self, task_id: str) -> TaskSnapshot | None:
        """The task's snapshot, or None when there is no such task.

        Raises:
            StoreError: the task's row cannot be decoded; the message (and ``task_id``)
                names the task, and the message says what is wrong.
        """

    @abc.abstractmethod
    def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
        """Snapshots matching `query`, ordered by creation (see `TaskQuery`).

        A matching row that cannot be decoded is left out (it still takes its place
        for limit and offset) and named in the `Listing` returned, never raised.
        """

    @abc.abstractmethod
    def status_counts(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        """How many tasks matching `query` are in each status (limit and offset are ignored).

        Statuses with no task are absent from the result. A row whose status is not a
        status is counted under none and named in the `Counts` returned.
        """

    @abc.abstractmethod
    def bucket_counts(self, query: TaskQuery | None = None) -> dict[int, int]:
        """How many tasks matching `query` are in each bucket; tasks without a bucket are
        not counted, and empty buckets are absent. A row whose bucket is not an integer
        is counted under none and named in the `Counts` returned."""

    # ------------------------------------------------------------------ audit trail
    @abc.abstractmethod
    def append(self, transitions: Iterable[Transition]) -> None:
        """Append transitions to their tasks' histories.

        Idempotent: a transition whose ``(task_id, status_version)`` is already
        stored is ignored, so a writer may safely repeat an append after a failure.
        """

    @abc.abstractmethod
    def history(self, task_id: str) -> list[Transition]:
        """Every stored transition of the task, in ``status_version`` order (empty if unknown).

        A transition row that cannot be decoded is left out and named in the `Listing`
        returned, never raised.
        """

    # ------------------------------------------------------------------ side path
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
        pid: int | None = None,
    ) -> bool:
        """Refresh the given side-path fields; arguments left as None are not changed.

        Never changes ``status_version`` (progress and heartbeats would otherwise
        conflict with every status write). Returns False when the task is unknown.
        One `touch_many` of one update: a backend implements that one.
        """
        update = TouchUpdate.given(
            task_id,
            progress=progress,
            heartbeat_at=heartbeat_at,
            lease_owner=lease_owner,
            lease_until=lease_until,
            pid=pid,
        )
        return self.touch_many([update]) == 1

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        """Apply several side-path updates (None clears a field, `UNSET` keeps it).

        An update with a `held_version` applies only while the row is at that version
        (`TouchUpdate`). Returns how many updates found their task (at the held version)
        and were applied. Backends override this to
        use one transaction.
        """
        applied = 0
        for update in updates:
            snapshot = self.get(update.task_id)
            if snapshot is None or not update.applies_to(snapshot):
                continue
            self._touch_fields(update.apply(snapshot))
            applied += 1
        return applied

    def _touch_fields(self, snapshot: TaskSnapshot) -> None:
        """Write `snapshot`'s side-path fields verbatim (used by the default `touch_many`)."""
        raise NotImplementedError(
            f"{type(self).__name__} must override touch_many() or _touch_fields()"
        )

    # ------------------------------------------------------------------ commands
    @abc.abstractmethod
    def submit_command(self, command: Command) -> None:
        """Store a new command for the task's holder to claim.

        Idempotent on ``command_id``: submitting the same id again changes nothing.
        """

    @abc.abstractmethod
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
        """Lease up to `limit` incomplete commands to `owner`, oldest first.

        A command is claimable when it is not complete and either unclaimed or its
        lease ended before `now`; it is then leased to `owner` until
        ``now + lease_seconds``, so no two claimers hold it at once, and a claimer
        that crashed gives it up when the lease ends. `task_ids` and `buckets`
        narrow the commands considered. A command of a task that another owner holds
        under a live lease (``lease_owner`` not `owner`, ``lease_until`` after `now`) is
        left to that holder: only it can apply it, and a claim by anyone else would only
        give it back, delaying it and its later commands.

        Each row is read on its own (`read_command`): a row holding a value its
        column cannot hold is leased and returned like the others, with `problem`
        set, and never fails the claim of the rest. A row whose ``command_id``
        itself is not text cannot be named to `complete_command`, so the claim
        completes it at once as ``rejected: ...`` (and returns it, complete).
        """

    @abc.abstractmethod
    def complete_command(self, command_id: str, *, owner: str, now: datetime, result: str) -> bool:
        """Mark a command done with a short `result` text ("applied", "rejected: ...").

        Returns True when `owner` held the command and it was not complete yet;
        False otherwise (another claimer took it over, or it is unknown or done).
        """

    @abc.abstractmethod
    def release_command(self, command_id: str, *, owner: str) -> bool:
        """Give a claimed command back at once, so its real holder can claim it.

        Returns True when `owner` held it and it is now claimable again.
        """

    @abc.abstractmethod
    def commands(
        self,
        *,
        task_id: str | None = None,
        include_complete: bool = True,
        limit: int | None = None,
    ) -> list[Command]:
        """Commands (optionally of one task), oldest first, for inspection. A row that
        cannot be read whole is listed with `problem` set, never raised."""

    # ------------------------------------------------------------------ durable work
    def _no_durable_work(self) -> ConfigurationError:
        return ConfigurationError(
            f"{type(self).__name__} does not support durable tasks (supports_durable_work is "
            "False); use InMemoryTaskStore, SqliteTaskStore or PostgresTaskStore"
        )

    def claim_tasks(self, request: ClaimRequest) -> list[TaskSnapshot]:
        """Claim queued durable tasks for ``request.owner`` and return them, leased.

        Candidates are durable, ``queued``, named in ``request.names``, in
        ``request.buckets`` (any bucket when None), due (``run_at`` None or not after
        ``request.now``) and held by no live lease (no ``lease_owner``, or a lease that
        ended at or before ``request.now``). They are taken highest priority first, then
        oldest (creation order), within the room of the request (`choose_claims`):
        ``limit``, ``tag_room``, ``bucket_room`` and ``fleet_limits``, the last counted
        over the whole store (`holds_fleet_slot`) so that no two claimers both see room.

        Each chosen task gets ONE write fenced by its ``status_version`` (`claim_writes`):
        without ``request.start``, ``lease_owner`` and ``lease_until`` are set, the status
        stays ``queued`` and the version is unchanged, so the claimant's own
        `StateMachine` then moves it on with `save` under that version; with it, the
        write it returns (the task's ``starting`` and its transition) is applied in the
        claim's transaction instead, and a task it declines is not claimed. No task is
        ever claimed by two claimers at once.

        Returns:
            The claimed snapshots as written (leased, or started), in claim order.

        Raises:
            ConfigurationError: this store does not support durable work.
        """
        raise self._no_durable_work()

    def release_claim(self, task_id: str, owner: str, version: int) -> bool:
        """Give a claimed task back (a claimant that cannot start it): clear its lease if
        `owner` still holds it, it is still ``queued`` and at `version`.

        Returns:
            True when the lease was cleared (the task is claimable again).
        """
        raise self._no_durable_work()

    def register_worker(self, record: WorkerRecord) -> None:
        """Store `record`, replacing the row of the same owner if there is one."""
        raise self._no_durable_work()

    def renew_worker(self, owner: str, *, last_seen: datetime, lease_until: datetime) -> bool:
        """Refresh a worker's ``last_seen`` and ``lease_until``; False when it has no row."""
        raise self._no_durable_work()

    def remove_worker(self, owner: str) -> bool:
        """Delete a worker's row; False when it had none."""
        raise self._no_durable_work()

    def workers(self) -> list[WorkerRecord]:
        """Every worker row, live and expired, ordered by owner."""
        raise self._no_durable_work()

    def served_names(self, now: datetime) -> frozenset[str]:
        """The task names served by the workers live at `now` (`WorkerRecord.is_live`)."""
        raise self._no_durable_work()

    def wait_for_work(self, timeout: float) -> bool:
        """Block until work may have become claimable (True) or `timeout` seconds pass.

        A durable task written ``queued`` and unheld (`wakes_workers`), or a released
        claim, wakes the waiter: on PostgreSQL from any process (``NOTIFY``), on the other
        stores only from this process, so their workers also poll.
        """
        raise self._no_durable_work()

    def wake_work_waiters(self) -> None:
        """Make every `wait_for_work` under way on this store in this process return True
        at once (or the next one, when none is): a worker that stops serving does not
        sleep out its wait. A backend whose waits cannot be cut short leaves this as is
        (they end at their timeout)."""
        return None  # the default: nothing to cut short

    def wait_for_change(self, task_id: str, timeout: float) -> bool:
        """Block until the durable task `task_id` is in a terminal status (True) or `timeout`
        seconds pass (False); True at once when it already is. On PostgreSQL a terminal
        save from any process wakes it (``NOTIFY``); elsewhere one of this process does, so
        a caller waiting on another process's work waits in slices and reads the task."""
        raise self._no_durable_work()

    # ------------------------------------------------------------------ housekeeping
    @abc.abstractmethod
    def prune(self, keep_terminal: int) -> int:
        """Delete all but the `keep_terminal` most recently finished terminal tasks, with
        their histories and commands. Live tasks are never deleted.

        Returns how many tasks were deleted.
        """

    @abc.abstractmethod
    def archive(self, *, finished_before: datetime, path: str | os.PathLike[str]) -> int:
        """Move the history of terminal tasks finished before `finished_before` to a file.

        Every transition of such a task except its last one is appended to `path`
        as JSON Lines (one `Transition.to_dict()` per line), the file is flushed and
        fsynced, and only then are those rows deleted from the store. The task's
        snapshot and its final transition stay, as the summary of how it ended; a
        task archived before has nothing left to move. Live tasks are never touched.

        Returns how many transitions were moved.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release every handle. Idempotent; any later call raises `StoreError`."""

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def terminal_statuses() -> frozenset[TaskStatus]:
    """The terminal statuses (for backends building queries)."""
    return TERMINAL_STATUSES


def validate_keep_terminal(keep_terminal: object) -> int:
    """Check `prune`'s argument."""
    if isinstance(keep_terminal, bool) or not isinstance(keep_terminal, int) or keep_terminal < 0:
        raise ConfigurationError(f"keep_terminal must be an integer >= 0, got {keep_terminal!r}")
    return keep_terminal


def counts_of(snapshots: Iterable[TaskSnapshot]) -> Mapping[TaskStatus, int]:
    """Per-status counts of `snapshots`."""
    result: dict[TaskStatus, int] = {}
    for s in snapshots:
        result[s.status] = result.get(s.status, 0) + 1
    return result


def write_jsonl(path: str | os.PathLike[str], transitions: Sequence[Transition]) -> None:
    """Append `transitions` to `path` as JSON Lines and fsync it (used by `archive`). A new
    file is created owner-only (mode 0o600): it holds task data."""
    if not transitions:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(fd, "a", encoding="utf-8") as handle:
        for record in transitions:
            handle.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
