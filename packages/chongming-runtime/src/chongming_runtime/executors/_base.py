"""The executor seam: how an attempt is carried (guide §7).

An executor only *carries* attempts: it never schedules, retries or decides a
status. The supervisor (`TaskRun`) hands it an `Attempt`; the executor calls
``attempt.begin()`` and ``attempt.finish()`` and returns an `AttemptHandle` that
the supervisor uses when a graceful window runs out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from chongming_runtime.executors._attempt import Attempt, AttemptHandle

__all__ = ["AttemptHandle", "Executor"]


@runtime_checkable
class Executor(Protocol):
    """Carries attempts: inline, on a thread, or in a child process.

    Attributes:
        name: recorded as the snapshot's ``executor`` (``thread``, ``inline``, ``process``).
        inline: True when ``launch`` runs the body in the caller's thread before returning.
        supports_pause: whether a body can be suspended at a checkpoint (inline: no).
    """

    name: str
    inline: bool
    supports_pause: bool

    def validate(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> None:
        """Refuse, with a `ConfigurationError`, a body this executor cannot carry."""
        ...

    def launch(self, attempt: Attempt) -> AttemptHandle:
        """Start carrying `attempt` (inline: carry it to the end before returning)."""
        ...
