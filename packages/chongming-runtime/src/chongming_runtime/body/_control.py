"""The cooperative control flags of one attempt (its "cancel token").

A fresh `AttemptControl` is made for every attempt, so a stop or a pause can
only ever reach the execution it was meant for. The supervisor (`TaskRun`)
writes the flags under its lock; the task body only reads them, and the read
on the hot path is a single attribute (`requested`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["AttemptControl", "ControlView"]


class ControlView(Protocol):
    """What a context reads of its attempt's control flags (in this process or a child)."""

    @property
    def requested(self) -> bool:
        """A stop or a pause is pending (the one flag the hot path reads)."""
        ...

    @property
    def stop_requested(self) -> bool:
        """A stop was requested."""
        ...

    @property
    def pause_requested(self) -> bool:
        """A pause is pending."""
        ...

    @property
    def stop_reason(self) -> str | None:
        """Why the stop was requested."""
        ...

    def wait_while_paused(self) -> None:
        """Block at the checkpoint until resumed or stopped."""
        ...


class AttemptControl:
    """Stop and pause flags of one attempt, written by the supervisor, read by the body.

    Attributes:
        requested: True while a stop or a pause is pending (the hot-path flag).
        stop_requested: a stop was requested (by an operator or by a timeout).
        pause_requested: a pause was requested and not yet withdrawn.
        stop_reason: why the stop was requested.
        pause_generation: bumped by every pause request, so that a late confirmation
            of an earlier request can be told apart from the current one.
    """

    __slots__ = (
        "_hold",
        "_on_change",
        "pause_generation",
        "pause_requested",
        "requested",
        "stop_reason",
        "stop_requested",
    )

    def __init__(self) -> None:
        self.requested = False
        self.stop_requested = False
        self.pause_requested = False
        self.stop_reason: str | None = None
        self.pause_generation = 0
        self._hold: Callable[[], None] | None = None
        self._on_change: Callable[[AttemptControl], None] | None = None

    # ---------------------------------------------------------------- supervisor side
    def bind(
        self,
        *,
        hold: Callable[[], None] | None = None,
        on_change: Callable[[AttemptControl], None] | None = None,
    ) -> None:
        """Attach the in-process pause hold and/or a mirror of the flags (process executor)."""
        if hold is not None:
            self._hold = hold
        if on_change is not None:
            self._on_change = on_change
            on_change(self)

    def unbind(self) -> None:
        """Drop what `bind` attached (its attempt is over): the hold closes over the attempt,
        which holds this control, and the cycle would outlive the attempt until a garbage
        collection."""
        self._hold = None
        self._on_change = None

    def request_stop(self, reason: str | None) -> None:
        """Set the stop flag (idempotent: the first reason is kept)."""
        if not self.stop_requested:
            self.stop_reason = reason
        self.stop_requested = True
        self.requested = True
        self._changed()

    def request_pause(self) -> int:
        """Set the pause flag and return the generation of this request."""
        self.pause_generation += 1
        self.pause_requested = True
        self.requested = True
        self._changed()
        return self.pause_generation

    def clear_pause(self) -> None:
        """Withdraw the pause (resume, or a pause window that passed)."""
        self.pause_requested = False
        self.requested = self.stop_requested
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    # ---------------------------------------------------------------- body side
    def wait_while_paused(self) -> None:
        """Block the calling body at its checkpoint until resumed or stopped."""
        if self._hold is not None:
            self._hold()
