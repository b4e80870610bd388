"""Execution capacity and the ready queue of one controller (guide §8.4, §8.8).

`Capacity` is the per-process account of execution slots: the global
`max_parallel`, per-bucket limits and named-resource units per limited tag. A
task holds its units from the moment it is dispatched until it leaves the
executor — an in-place pause keeps them (R3).

`ReadyQueue` orders queued tasks by priority (higher first) and then by arrival
(FIFO), and hands out the first task that *fits*: a head blocked by a full
bucket or resource does not stop the tasks behind it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Capacity", "ReadyItem", "ReadyQueue"]


@dataclass(frozen=True, slots=True)
class _Hold:
    tags: frozenset[str]
    bucket: int | None


class Capacity:
    """Counts the slots, bucket slots and named-resource units held by active tasks."""

    def __init__(
        self,
        max_parallel: int,
        *,
        limits: Mapping[str, int] | None = None,
        max_per_bucket: int | None = None,
    ) -> None:
        self.max_parallel = max_parallel
        self.limits: dict[str, int] = dict(limits or {})
        self.max_per_bucket = max_per_bucket
        self._holds: dict[str, _Hold] = {}
        self._per_bucket: dict[int, int] = {}
        self._per_tag: dict[str, int] = {}

    @property
    def active(self) -> int:
        """How many tasks hold a slot."""
        return len(self._holds)

    def holds(self, task_id: str) -> bool:
        """Whether `task_id` holds a slot."""
        return task_id in self._holds

    def active_in_bucket(self, bucket: int) -> int:
        """How many slots tasks of `bucket` hold."""
        return self._per_bucket.get(bucket, 0)

    def in_use(self, tag: str) -> int:
        """How many units of the limited resource `tag` are held."""
        return self._per_tag.get(tag, 0)

    def fits(self, tags: Iterable[str], bucket: int | None) -> bool:
        """Whether a task with `tags` in `bucket` could be dispatched now."""
        if len(self._holds) >= self.max_parallel:
            return False
        if (
            self.max_per_bucket is not None
            and bucket is not None
            and self._per_bucket.get(bucket, 0) >= self.max_per_bucket
        ):
            return False
        for tag in tags:
            limit = self.limits.get(tag)
            if limit is not None and self._per_tag.get(tag, 0) >= limit:
                return False
        return True

    def room(self, tags: Iterable[str] = (), bucket: int | None = None) -> int:
        """How many more tasks with `tags` in `bucket` could be dispatched now: the free
        slots, fewer when the bucket's limit or a limited resource leaves less."""
        free = self.max_parallel - len(self._holds)
        if self.max_per_bucket is not None and bucket is not None:
            free = min(free, self.max_per_bucket - self._per_bucket.get(bucket, 0))
        for tag in tags:
            limit = self.limits.get(tag)
            if limit is not None:
                free = min(free, limit - self._per_tag.get(tag, 0))
        return max(0, free)

    def holders(self) -> list[str]:
        """The task ids holding a slot (not the keys of abandoned bodies: `rekey`)."""
        return [key for key in self._holds if "\x00" not in key]

    def acquire(self, task_id: str, tags: Iterable[str], bucket: int | None) -> None:
        """Take a slot (and the bucket slot and resource units) for `task_id`."""
        if task_id in self._holds:
            return
        limited = frozenset(t for t in tags if t in self.limits)
        self._holds[task_id] = _Hold(limited, bucket)
        if bucket is not None:
            self._per_bucket[bucket] = self._per_bucket.get(bucket, 0) + 1
        for tag in limited:
            self._per_tag[tag] = self._per_tag.get(tag, 0) + 1

    def rekey(self, task_id: str, key: str) -> bool:
        """Keep what `task_id` holds under `key` instead; False when it held nothing."""
        hold = self._holds.pop(task_id, None)
        if hold is None:
            return False
        self._holds[key] = hold
        return True

    def release(self, task_id: str) -> bool:
        """Give back everything `task_id` holds; False when it held nothing."""
        hold = self._holds.pop(task_id, None)
        if hold is None:
            return False
        if hold.bucket is not None:
            left = self._per_bucket[hold.bucket] - 1
            if left:
                self._per_bucket[hold.bucket] = left
            else:
                del self._per_bucket[hold.bucket]
        for tag in hold.tags:
            left = self._per_tag[tag] - 1
            if left:
                self._per_tag[tag] = left
            else:
                del self._per_tag[tag]
        return True


@dataclass(slots=True)
class ReadyItem:
    """A queued task as the scheduler sees it (ordered by priority, then arrival)."""

    task_id: str
    priority: int = 0
    tags: frozenset[str] = frozenset()
    bucket: int | None = None
    sequence: int = 0

    @property
    def sort_key(self) -> tuple[int, int]:
        """Higher priority first, then first come first served."""
        return (-self.priority, self.sequence)

    def __lt__(self, other: ReadyItem) -> bool:
        return self.sort_key < other.sort_key


# -priority, sequence, id, then tags and bucket unless the task has neither (see `ReadyQueue`)
_Entry = tuple[int, int, str] | tuple[int, int, str, frozenset[str], int | None]
_NO_TAGS: frozenset[str] = frozenset()


class ReadyQueue:
    """Queued tasks by priority, then FIFO; removal is lazy and O(1).

    A queued task costs one tuple ``(-priority, sequence, task_id, tags, bucket)``,
    shared by the heap and the index: ordering is a C-level tuple comparison (the
    sequence is unique, so nothing after it is ever compared). A task with no tags and
    no bucket, the usual one, is ``(-priority, sequence, task_id)``: 16 bytes less.
    """

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._live: dict[str, _Entry] = {}
        self._counter = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._live

    def push(
        self,
        task_id: str,
        *,
        priority: int = 0,
        tags: frozenset[str] = frozenset(),
        bucket: int | None = None,
    ) -> None:
        """Queue `task_id` behind every task of the same or higher priority."""
        if task_id in self._live:
            return
        entry: _Entry = (
            (-priority, next(self._counter), task_id, tags, bucket)
            if tags or bucket is not None
            else (-priority, next(self._counter), task_id)
        )
        self._live[task_id] = entry
        heapq.heappush(self._heap, entry)

    def remove(self, task_id: str) -> bool:
        """Forget a queued task (it was stopped or paused before it started)."""
        return self._live.pop(task_id, None) is not None

    def pop_fitting(self, capacity: Capacity) -> ReadyItem | None:
        """The first task, in priority/FIFO order, that fits `capacity`; None if none does.

        Tasks skipped because their bucket or resource is full keep their place.
        """
        if len(capacity._holds) >= capacity.max_parallel:
            return None
        skipped: list[_Entry] = []
        found: _Entry | None = None
        heap = self._heap
        live = self._live
        while heap:
            entry = heapq.heappop(heap)
            if live.get(entry[2]) is not entry:
                continue  # removed lazily
            if len(entry) == 3 or capacity.fits(entry[3], entry[4]):
                del live[entry[2]]
                found = entry
                break
            skipped.append(entry)
        for entry in skipped:
            heapq.heappush(heap, entry)
        if found is None:
            return None
        if len(found) == 3:
            return ReadyItem(found[2], -found[0], _NO_TAGS, None, found[1])
        negative, sequence, task_id, tags, bucket = found
        return ReadyItem(task_id, -negative, tags, bucket, sequence)

    def tag_counts(self) -> dict[str, int]:
        """How many queued tasks carry each tag."""
        counts: dict[str, int] = {}
        for entry in self._live.values():
            if len(entry) == 3:
                continue
            for tag in entry[3]:
                counts[tag] = counts.get(tag, 0) + 1
        return counts

    def task_ids(self) -> list[str]:
        """Queued task ids in dispatch order (for inspection)."""
        return [entry[2] for entry in sorted(self._live.values())]
