"""Durable work on the store side: `ClaimRequest`, `WorkerRecord`, the claim rules.

A durable task is a row any worker may claim. What a claim may take is decided
here, once, for every store: `claimable` says whether a stored task is a candidate
at all, `holds_fleet_slot` whether it counts against a store-wide limit, and
`choose_claims` walks the candidates (highest priority first, then oldest) and
applies the worker's room. A store only finds the candidates and fences the writes.

`WakeUp` and `ChangeSignals` are the in-process wake-ups of the stores that have no
notification channel of their own (memory, SQLite): a worker of such a store polls,
and is woken early by enqueues made through the same process.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar

from chongming_core._errors import ConfigurationError
from chongming_core._json import portable_json
from chongming_core._records import SnapshotWrite, TaskSnapshot, Transition
from chongming_core._state_machine import StateMachine
from chongming_core._status import TaskStatus
from chongming_core._triggers import START

__all__ = [
    "FLEET_STATUSES",
    "ChangeSignals",
    "ClaimRequest",
    "ClaimStart",
    "StartPlan",
    "WakeUp",
    "WorkerRecord",
    "choose_claims",
    "claim_tags",
    "claim_writes",
    "claimable",
    "holds_fleet_slot",
    "lease_is_live",
    "wakes_workers",
]

#: The statuses in which a durable task always holds its fleet slot (``paused`` only when
#: paused in place, and ``queued`` only while claimed under a live lease).
FLEET_STATUSES: frozenset[TaskStatus] = frozenset(
    {TaskStatus.STARTING, TaskStatus.RUNNING, TaskStatus.PAUSING, TaskStatus.STOPPING}
)


def _aware(value: object, what: str) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise ConfigurationError(f"{what} must be a timezone-aware datetime, got {value!r}")
    return value


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{what} must be an integer >= 0, got {value!r}")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{what} must be a non-empty str, got {value!r}")
    return value


def _counts(value: object, what: str) -> Mapping[str, int]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{what} must be a mapping of tag to count, got {value!r}")
    return MappingProxyType(
        {_text(k, f"a tag of {what}"): _count(v, f"{what}[{k!r}]") for k, v in value.items()}
    )


@dataclass(frozen=True, slots=True)
class StartPlan:
    """How a worker starts the tasks of one name it serves (see `ClaimStart`).

    Attributes:
        max_attempts: its registered retry budget (a task that already used more keeps
            one more attempt: the start never refuses a claimed task).
        description: its registered description (None: none).
    """

    max_attempts: int
    description: str | None = None

    def __post_init__(self) -> None:
        budget: object = self.max_attempts
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ConfigurationError(f"max_attempts must be an integer >= 1, got {budget!r}")
        if self.description is not None and not isinstance(self.description, str):
            raise ConfigurationError(f"description must be a str or None, got {self.description!r}")


@dataclass(frozen=True, slots=True, eq=False)
class ClaimStart:
    """The start a worker's claim writes with each task it takes, as data: a store can
    apply it in the claim's own statement (PostgreSQL does: one round trip), and every
    store gets the same write from `write`.

    A task of a name in `plans`, found ``queued`` at version ``v`` and leased to the
    claimant, becomes ``starting`` at ``v + 1`` at the claim's ``now``: its next attempt
    (``attempt + 1``), the plan's retry budget (at least that attempt) and description,
    the claim's tags (`claim_tags`), ``executor``, the attempt's fields cleared, with one
    transition ``queued -> starting`` (trigger ``scheduler:dispatched``, actor the
    claimant). A task of a name without a plan is left unclaimed.

    Example::

        start = ClaimStart(executor="thread", plans={"etl.load": StartPlan(max_attempts=3)})
        request = ClaimRequest(owner="node-a", names=frozenset({"etl.load"}), buckets=None,
                               limit=4, now=now, lease_until=now + timedelta(seconds=30),
                               start=start)

    Attributes:
        executor: the name of the executor the claimant runs the tasks with.
        plans: per task name, its `StartPlan`.
    """

    executor: str
    plans: Mapping[str, StartPlan]
    #: the trigger of the transition a start appends (a store writing it in SQL needs it)
    TRIGGER: ClassVar[str] = START

    def __post_init__(self) -> None:
        _text(self.executor, "executor")
        if not isinstance(self.plans, Mapping):
            raise ConfigurationError(
                f"plans must be a mapping of task name to StartPlan, got {self.plans!r}"
            )
        plans: dict[str, StartPlan] = {}
        for name, plan in self.plans.items():
            if not isinstance(plan, StartPlan):
                raise ConfigurationError(f"plans[{name!r}] must be a StartPlan, got {plan!r}")
            plans[_text(name, "a task name in plans")] = plan
        object.__setattr__(self, "plans", MappingProxyType(plans))

    def write(self, leased: TaskSnapshot, now: datetime) -> SnapshotWrite | None:
        """The write that starts `leased` (as claimed: leased, its claim tags filled in)
        at `now`, fenced by its version; None when its name has no plan."""
        plan = self.plans.get(leased.name)
        if plan is None or leased.lease_owner is None:
            return None
        machine = StateMachine(
            leased.evolve(
                max_attempts=max(plan.max_attempts, leased.attempt + 1),
                description=plan.description,
            )
        )
        transition = machine.mark_starting(executor=self.executor, actor=leased.lease_owner, at=now)
        return SnapshotWrite(machine.snapshot, leased.status_version, (transition,))

    @staticmethod
    def transition_of(started: TaskSnapshot) -> Transition:
        """The transition a claim's start wrote for `started` (the snapshot it returned)."""
        at = started.updated_at
        if started.status is not TaskStatus.STARTING or started.lease_owner is None or at is None:
            raise ConfigurationError(
                f"task {started.task_id!r} is {started.status.value} at version "
                f"{started.status_version}: it was not started by a claim"
            )
        return Transition(
            task_id=started.task_id,
            from_status=TaskStatus.QUEUED,
            to_status=TaskStatus.STARTING,
            trigger=ClaimStart.TRIGGER,
            actor=started.lease_owner,
            reason=None,
            status_version=started.status_version,
            at=at,
        )


@dataclass(frozen=True, slots=True, eq=False)
class ClaimRequest:
    """What one worker asks of `TaskStore.claim_tasks`: which tasks, and how many.

    Example::

        request = ClaimRequest(owner="node-a", names=frozenset({"etl.load"}), buckets=None,
                               limit=4, now=now, lease_until=now + timedelta(seconds=30))

    Attributes:
        owner: the worker; the claimed tasks' ``lease_owner``.
        names: the task names this worker registered (only these are claimed).
        buckets: the buckets it owns (None: every bucket).
        limit: its free slots: at most this many tasks are claimed.
        now: the store's notion of now (``run_at`` and leases are compared with it).
        lease_until: the lease each claimed task gets.
        tag_room: local room left per limited tag: a task holding tag ``t`` is claimed
            only while ``tag_room[t] > 0``, counted down as tasks are chosen.
        bucket_room: at most this many tasks of one bucket in this claim (None: no cap).
        default_tags: per task name, the tags a task of that name holds here when it was
            enqueued with none (the worker's registration): they count against
            ``tag_room`` and ``fleet_limits``, and the claim writes them into the task.
        fleet_limits: store-wide limits per tag: the durable tasks holding ``t`` that hold
            a fleet slot (`holds_fleet_slot`) never exceed ``fleet_limits[t]``.
        start: when given, the claim also starts what it takes, in the same transaction:
            a `ClaimStart` (the start as data, which a store may apply in SQL), or a
            callable given each chosen task as claimed (leased to ``owner``, its tags
            filled in) that returns the write that starts it (the ``starting`` snapshot
            at the next version, still leased, with its transition, fenced by the
            claimed version), or None to leave that task unclaimed. The claim then
            returns the started snapshots (`claim_writes`). A worker's body can begin as
            soon as the claim returns: one commit, not a claim and then a start.
    """

    owner: str
    names: frozenset[str]
    buckets: frozenset[int] | None
    limit: int
    now: datetime
    lease_until: datetime
    tag_room: Mapping[str, int] = field(default_factory=dict)
    bucket_room: int | None = None
    fleet_limits: Mapping[str, int] = field(default_factory=dict)
    default_tags: Mapping[str, frozenset[str]] = field(default_factory=dict)
    start: ClaimStart | Callable[[TaskSnapshot], SnapshotWrite | None] | None = None

    def __post_init__(self) -> None:
        _text(self.owner, "owner")
        if self.start is not None and not (
            isinstance(self.start, ClaimStart) or callable(self.start)
        ):
            raise ConfigurationError(
                f"start must be a ClaimStart, a callable or None, got {self.start!r}"
            )
        given: object = self.names
        if isinstance(given, str) or not isinstance(given, Iterable):
            raise ConfigurationError(f"names must be a set of task names, got {given!r}")
        names = frozenset(given)
        for name in names:
            _text(name, "a task name in names")
        object.__setattr__(self, "names", names)
        if self.buckets is not None:
            buckets = frozenset(self.buckets)
            for bucket in buckets:
                _count(bucket, "a bucket in buckets")
            object.__setattr__(self, "buckets", buckets)
        _count(self.limit, "limit")
        _aware(self.now, "now")
        _aware(self.lease_until, "lease_until")
        if self.lease_until <= self.now:
            raise ConfigurationError(
                f"lease_until ({self.lease_until.isoformat()}) must be after now "
                f"({self.now.isoformat()}): a claim's lease must be live when it is written"
            )
        object.__setattr__(self, "tag_room", _counts(self.tag_room, "tag_room"))
        if self.bucket_room is not None:
            _count(self.bucket_room, "bucket_room")
        object.__setattr__(self, "fleet_limits", _counts(self.fleet_limits, "fleet_limits"))
        given_tags: object = self.default_tags
        if not isinstance(given_tags, Mapping):
            raise ConfigurationError(
                f"default_tags must be a mapping of task name to tags, got {given_tags!r}"
            )
        defaults: dict[str, frozenset[str]] = {}
        for name, tags in given_tags.items():
            if isinstance(tags, str) or not isinstance(tags, Iterable):
                raise ConfigurationError(f"default_tags[{name!r}] must be a set of tags")
            defaults[_text(name, "a task name in default_tags")] = frozenset(
                _text(tag, f"a tag of default_tags[{name!r}]") for tag in tags
            )
        object.__setattr__(self, "default_tags", MappingProxyType(defaults))


@dataclass(frozen=True, slots=True, eq=True)
class WorkerRecord:
    """A serving worker as the store keeps it (one row per owner), live or expired.

    Attributes:
        owner: the worker's owner id (the ``lease_owner`` of what it claims).
        host: the machine's host name.
        pid: its process id.
        buckets: the buckets it owns, sorted (None: every bucket).
        names: the task names it serves, sorted.
        capacity: JSON describing its room, e.g. ``{"max_parallel": 4, "limits": {...}}``.
        started_at: when it began serving.
        last_seen: when it last renewed its row.
        lease_until: the row is live until then; after, the worker is presumed gone.
    """

    owner: str
    host: str
    pid: int
    buckets: tuple[int, ...] | None
    names: tuple[str, ...]
    capacity: Mapping[str, Any]
    started_at: datetime
    last_seen: datetime
    lease_until: datetime

    def __post_init__(self) -> None:
        _text(self.owner, "owner")
        if not isinstance(self.host, str):
            raise ConfigurationError(f"host must be a str, got {self.host!r}")
        _count(self.pid, "pid")
        if self.buckets is not None:
            buckets = tuple(sorted({_count(b, "a bucket in buckets") for b in self.buckets}))
            object.__setattr__(self, "buckets", buckets)
        given: object = self.names
        if isinstance(given, str) or not isinstance(given, Iterable):
            raise ConfigurationError(f"names must be a sequence of task names, got {given!r}")
        names = tuple(sorted({_text(n, "a task name in names") for n in given}))
        object.__setattr__(self, "names", names)
        if not isinstance(self.capacity, Mapping):
            raise ConfigurationError(f"capacity must be a JSON object, got {self.capacity!r}")
        try:
            capacity = portable_json(dict(self.capacity))
        except ValueError as exc:
            message = str(exc).replace("the result", "capacity")
            raise ConfigurationError(f"capacity must be plain JSON: {message}") from None
        object.__setattr__(self, "capacity", capacity)
        for name in ("started_at", "last_seen", "lease_until"):
            _aware(getattr(self, name), name)

    def is_live(self, now: datetime) -> bool:
        """True while its lease has not ended at `now`."""
        return self.lease_until > now


def lease_is_live(owner: str | None, until: datetime | None, now: datetime) -> bool:
    """Whether a task is held by a lease that has not ended at `now`."""
    return owner is not None and until is not None and until > now


def claimable(snapshot: TaskSnapshot, request: ClaimRequest) -> bool:
    """Whether `snapshot` is a candidate of `request` (before any room is counted): durable,
    queued, a name it serves, a bucket it owns, due, and held by no live lease."""
    s = snapshot
    return (
        s.durable
        and s.status is TaskStatus.QUEUED
        and s.name in request.names
        and (request.buckets is None or s.bucket in request.buckets)
        and (s.run_at is None or s.run_at <= request.now)
        and not lease_is_live(s.lease_owner, s.lease_until, request.now)
    )


def holds_fleet_slot(snapshot: TaskSnapshot, now: datetime) -> bool:
    """Whether a durable task counts against the fleet limits of its tags at `now`: it is
    starting, running, pausing, stopping or paused in place, or queued and claimed under a
    live lease."""
    s = snapshot
    if not s.durable:
        return False
    if s.status in FLEET_STATUSES or (s.status is TaskStatus.PAUSED and s.paused_in_place):
        return True
    return s.status is TaskStatus.QUEUED and lease_is_live(s.lease_owner, s.lease_until, now)


def wakes_workers(snapshot: TaskSnapshot) -> bool:
    """Whether writing `snapshot` makes work claimable: a durable task, queued, unheld."""
    s = snapshot
    return s.durable and s.status is TaskStatus.QUEUED and s.lease_owner is None


def claim_tags(snapshot: TaskSnapshot, request: ClaimRequest) -> frozenset[str]:
    """The tags `snapshot` holds once `request` claims it: its own, or when it was enqueued
    with none, the claimant's registered tags of its name (``request.default_tags``)."""
    return snapshot.tags or request.default_tags.get(snapshot.name, frozenset())


def claim_writes(chosen: Iterable[TaskSnapshot], request: ClaimRequest) -> list[SnapshotWrite]:
    """The write a claim makes of each `chosen` task (as found, before the lease), in order:
    the lease alone (the task stays ``queued`` at its version), or with ``request.start``
    the write it returns (a task it declines is left out). Every write is fenced by the
    version the task was chosen at.

    Raises:
        ConfigurationError: ``request.start`` returned a write of another task, of another
            version, or one that does not keep the claimant's lease.
    """
    writes: list[SnapshotWrite] = []
    for found in chosen:
        leased = found.evolve(lease_owner=request.owner, lease_until=request.lease_until)
        if request.start is None:
            writes.append(SnapshotWrite(leased, found.status_version))
            continue
        start = request.start
        write = start.write(leased, request.now) if isinstance(start, ClaimStart) else start(leased)
        if write is None:
            continue
        if (
            not isinstance(write, SnapshotWrite)
            or write.snapshot.task_id != found.task_id
            or write.expect_version != found.status_version
            or write.snapshot.lease_owner != request.owner
        ):
            raise ConfigurationError(
                f"the claim's start of task {found.task_id!r} returned {write!r}: it must be a "
                f"SnapshotWrite of that task, expecting version {found.status_version}, that "
                f"keeps the lease of {request.owner!r}"
            )
        writes.append(write)
    return writes


def choose_claims(
    candidates: Iterable[TaskSnapshot],
    request: ClaimRequest,
    fleet_active: Mapping[str, int],
) -> list[TaskSnapshot]:
    """The candidates `request` claims, in the order given (the store's claim order:
    highest priority first, then oldest).

    Args:
        candidates: tasks for which `claimable` holds, in claim order.
        request: the worker's request (limit, tag_room, bucket_room, fleet_limits).
        fleet_active: per tag of ``request.fleet_limits``, the durable tasks holding it
            that hold a fleet slot now (`holds_fleet_slot`), counted by the store under its
            claim lock.

    Returns:
        The chosen snapshots, each with the tags it holds (`claim_tags`; the store writes
        them with the lease when they differ from the stored ones).
    """
    if request.limit <= 0:
        return []
    tag_room = dict(request.tag_room)
    fleet_room = {t: n - fleet_active.get(t, 0) for t, n in request.fleet_limits.items()}
    per_bucket: dict[int | None, int] = {}
    chosen: list[TaskSnapshot] = []
    for s in candidates:
        tags = claim_tags(s, request)
        if any(tag_room.get(t, 1) <= 0 or fleet_room.get(t, 1) <= 0 for t in tags):
            continue
        if request.bucket_room is not None and per_bucket.get(s.bucket, 0) >= request.bucket_room:
            continue
        chosen.append(s if tags == s.tags else s.evolve(tags=tags))
        for t in tags:
            if t in tag_room:
                tag_room[t] -= 1
            if t in fleet_room:
                fleet_room[t] -= 1
        per_bucket[s.bucket] = per_bucket.get(s.bucket, 0) + 1
        if len(chosen) >= request.limit:
            break
    return chosen


class WakeUp:
    """A flag that wakes one waiter: `set` raises it, `wait` returns True when it was raised
    since the last `wait` returned True (and lowers it), False after `timeout` seconds."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._raised = False

    def set(self) -> None:
        """Raise the flag and wake the waiters."""
        with self._cond:
            self._raised = True
            self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Block until the flag is raised (True, lowering it) or `timeout` passes (False)."""
        deadline = time.monotonic() + _seconds(timeout)
        with self._cond:
            while not self._raised:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            self._raised = False
            return True


class ChangeSignals:
    """Waiters per task id: `notify` wakes every `wait` under way for one of its ids."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._generation: dict[str, int] = {}
        self._waiting: dict[str, int] = {}

    def notify(self, task_ids: Iterable[str]) -> None:
        """Wake the waiters of `task_ids` (ids nobody waits for cost a dict lookup)."""
        with self._cond:
            woken = False
            for task_id in task_ids:
                if task_id in self._waiting:
                    self._generation[task_id] = self._generation.get(task_id, 0) + 1
                    woken = True
            if woken:
                self._cond.notify_all()

    def wait(
        self, task_id: str, timeout: float, finished: Callable[[], bool] | None = None
    ) -> bool:
        """Block until `notify` names `task_id` (True) or `timeout` seconds pass (False).

        `finished`, when given, is asked once the wait is registered (so no notification
        can fall in between): when it says True, so does this, at once.
        """
        deadline = time.monotonic() + _seconds(timeout)
        with self._cond:
            self._waiting[task_id] = self._waiting.get(task_id, 0) + 1
            start = self._generation.get(task_id, 0)
        try:
            if finished is not None and finished():
                return True
            with self._cond:
                while self._generation.get(task_id, 0) == start:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return True
        finally:
            with self._cond:
                self._waiting[task_id] -= 1
                if not self._waiting[task_id]:
                    del self._waiting[task_id]
                    self._generation.pop(task_id, None)


def _seconds(timeout: object) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or math.isnan(timeout)
        or timeout < 0
    ):
        raise ConfigurationError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
    return min(float(timeout), 1e9)
