"""Messages the dashboard's worker threads post to the UI thread."""

from __future__ import annotations

from textual.message import Message

from chongming_tui._data import Refresh

__all__ = ["ActionDone", "RefreshFailed", "Refreshed"]


class Refreshed(Message):
    """A refresh finished; `refresh` holds what it read."""

    def __init__(self, refresh: Refresh) -> None:
        super().__init__()
        self.refresh = refresh


class RefreshFailed(Message):
    """A refresh raised (the store is unreachable, ...); the last data stays on screen."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


class ActionDone(Message):
    """A stop, pause or resume call returned.

    Attributes:
        task_id: the task.
        action: ``"stop"``, ``"pause"`` or ``"resume"``.
        text: what to tell the operator (honest: "requested" is not "done").
        pending: True when the effect still has to be observed in the store.
        error: True when the call failed.
    """

    def __init__(
        self, task_id: str, action: str, text: str, *, pending: bool, error: bool = False
    ) -> None:
        super().__init__()
        self.task_id = task_id
        self.action = action
        self.text = text
        self.pending = pending
        self.error = error
