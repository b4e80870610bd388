"""What the status line says, and for how long it still holds.

A sentence about a task is true of the task as it was when it was said: "load-001 is
already succeeded: nothing to stop" stops holding once load-001 is pruned, "pause of
t1 requested, not confirmed" once its outcome is seen. So each `Note` carries the
condition under which it holds, and the app clears the line as soon as a refresh (or
the clock) shows it no longer does, instead of leaving it there for hours.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from chongming_tui._data import Refresh

__all__ = ["PASSING_SECONDS", "Note"]

#: How long a remark that is about no task ("select a task to stop") stays on the line.
PASSING_SECONDS = 10.0


@dataclass(slots=True)
class Note:
    """One sentence of the status line and when it stops holding.

    Attributes:
        text: the sentence.
        style: its Rich style.
        task_id: the task it speaks of (watched by every refresh while it is shown).
        version: that task's ``status_version`` it speaks of (None: not in the store).
        known: whether `version` is known; if not, the first refresh requested after the
            note tells it.
        after: the refresh request the note was said after (older refreshes say nothing
            about it).
        while_pending: it holds while an action on the task awaits its effect.
        expires_at: the monotonic time a passing remark goes (None: it does not expire).
        while_live_off: it holds while the periodic refresh is off.
    """

    text: str
    style: str = ""
    task_id: str | None = None
    version: int | None = None
    known: bool = False
    after: int = 0
    while_pending: bool = False
    expires_at: float | None = None
    while_live_off: bool = False

    def holds(
        self,
        *,
        monotonic: float,
        live: bool,
        pending: Collection[str],
        refresh: Refresh | None = None,
    ) -> bool:
        """Whether the sentence is still true, seen from `refresh` (when one arrived) and the
        clock. A refresh that shows the task at another version, or gone from the store (or
        come into it), ends a note about it."""
        if self.expires_at is not None and monotonic >= self.expires_at:
            return False
        if self.while_live_off and live:
            return False
        task_id = self.task_id
        if task_id is None:
            return True
        if self.while_pending:
            return task_id in pending
        if refresh is None or refresh.request <= self.after or task_id not in refresh.watched:
            return True
        snapshot = refresh.watched[task_id]
        version = None if snapshot is None else snapshot.status_version
        if not self.known:
            self.version, self.known = version, True
            return True
        return version == self.version
