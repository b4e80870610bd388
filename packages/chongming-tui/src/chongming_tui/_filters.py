"""What the operator is looking at: status group, narrowing filters, order and limit.

A `TaskFilter` becomes the keyword arguments of one ``Controller.list_tasks``
call: every filter is a query to the store with a limit, never a pass over an
in-memory copy of all tasks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

from chongming_core import TaskStatus

__all__ = ["SORT_COLUMNS", "StatusGroup", "TaskFilter"]

_S = TaskStatus


class StatusGroup(Enum):
    """The common status groups, one key each."""

    ALL = "all"
    ACTIVE = "active"
    QUEUED = "queued"
    PAUSED = "paused"
    FAILED = "failed/lost"

    @property
    def statuses(self) -> frozenset[TaskStatus] | None:
        """The statuses of the group (None: any status)."""
        return _GROUPS[self]


_GROUPS: dict[StatusGroup, frozenset[TaskStatus] | None] = {
    StatusGroup.ALL: None,
    StatusGroup.ACTIVE: frozenset({_S.STARTING, _S.RUNNING, _S.PAUSING, _S.STOPPING}),
    StatusGroup.QUEUED: frozenset({_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RETRY_WAIT}),
    StatusGroup.PAUSED: frozenset({_S.PAUSING, _S.PAUSED}),
    StatusGroup.FAILED: frozenset({_S.FAILED, _S.LOST}),
}

#: Columns the table can be ordered by (``created`` is the store's own order).
SORT_COLUMNS = (
    "created", "id", "name", "status", "attempt", "elapsed", "progress", "bucket", "lease",
    "failure",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """The current view: which tasks, in which order, how many.

    Attributes:
        group: the status group.
        tag: only tasks carrying this tag.
        bucket: only tasks in this bucket.
        name_prefix: only tasks whose registered name starts with this.
        search: case-insensitive text in the id, name or label.
        limit: at most this many rows are fetched.
        newest_first: the store's order (by creation), newest first by default.
        sort: the column the fetched rows are ordered by (``created``: store order).
        sort_reverse: reverse `sort`.
    """

    group: StatusGroup = StatusGroup.ALL
    tag: str | None = None
    bucket: int | None = None
    name_prefix: str | None = None
    search: str | None = None
    limit: int = 200
    newest_first: bool = True
    sort: str = "created"
    sort_reverse: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {self.limit!r}")
        if self.sort not in SORT_COLUMNS:
            raise ValueError(f"unknown sort column {self.sort!r}; choose from {SORT_COLUMNS}")

    def replace(self, **changes: Any) -> TaskFilter:
        """A copy with `changes`; empty text filters become None."""
        for key in ("tag", "name_prefix", "search"):
            if key in changes and not changes[key]:
                changes[key] = None
        return dataclasses.replace(self, **changes)

    def query_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``Controller.list_tasks`` for this view."""
        statuses = self.group.statuses
        return {
            "status": None if statuses is None else sorted(statuses),
            "tag": self.tag,
            "bucket": self.bucket,
            "name_prefix": self.name_prefix,
            "search": self.search,
            "limit": self.limit,
            "newest_first": self.newest_first,
        }

    def describe(self) -> str:
        """One line for the filter bar, e.g. ``status: active · tag: etl · newest first``."""
        parts = [f"status: {self.group.value}"]
        if self.tag is not None:
            parts.append(f"tag: {self.tag}")
        if self.bucket is not None:
            parts.append(f"bucket: {self.bucket}")
        if self.name_prefix is not None:
            parts.append(f"name: {self.name_prefix}*")
        if self.search is not None:
            parts.append(f"search: {self.search}")
        parts.append("newest first" if self.newest_first else "oldest first")
        if self.sort != "created":
            arrow = "desc" if self.sort_reverse else "asc"
            parts.append(f"sorted by {self.sort} {arrow}")
        parts.append(f"limit {self.limit}")
        return " · ".join(parts)
