"""`ControllerStats`: per-status counts (guide §8.2, §8.4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from chongming_core import TERMINAL_STATUSES, TaskStatus, UnreadableRow

__all__ = ["ControllerStats"]


@dataclass(frozen=True, slots=True)
class ControllerStats:
    """How many tasks are in each status.

    `unfinished` counts every non-terminal task, queued and paused included; to
    know how many really occupy execution slots, use ``controller.active_count``.
    `unreadable` names the tasks whose stored status could not be read: they are
    counted under no status (and so not in `total`).

    Example::

        stats = controller.stats()
        stats.unfinished, stats.running, stats[TaskStatus.FAILED]
    """

    counts: Mapping[TaskStatus, int] = field(default_factory=dict)
    unreadable: tuple[UnreadableRow, ...] = ()

    def __post_init__(self) -> None:
        full = {status: int(self.counts.get(status, 0)) for status in TaskStatus}
        object.__setattr__(self, "counts", MappingProxyType(full))
        object.__setattr__(self, "unreadable", tuple(self.unreadable))

    def __getitem__(self, status: TaskStatus | str) -> int:
        return self.counts[TaskStatus(status)]

    def __getattr__(self, name: str) -> int:
        try:
            status = TaskStatus(name)
        except ValueError:
            raise AttributeError(f"ControllerStats has no attribute {name!r}") from None
        return self.counts[status]

    @property
    def total(self) -> int:
        """All tasks."""
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        """Non-terminal tasks (pending, blocked, queued, running, paused, ...)."""
        return sum(n for s, n in self.counts.items() if s not in TERMINAL_STATUSES)

    @property
    def finished(self) -> int:
        """Terminal tasks."""
        return self.total - self.unfinished

    def as_dict(self) -> dict[str, int]:
        """``{"queued": 2, ...}`` for every status, plus ``unfinished`` and ``total``."""
        data = {status.value: n for status, n in self.counts.items()}
        data["unfinished"] = self.unfinished
        data["total"] = self.total
        return data
