"""The executor seam: how an attempt is carried (guide §7).

An executor only *carries* attempts: it never schedules, retries or decides a
status. The supervisor (`TaskRun`) hands it an `Attempt`; the executor calls
``attempt.begin()`` and ``attempt.finish()`` and returns an `AttemptHandle` that
the supervisor uses when a graceful window runs out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from chongming_core import Clock

if TYPE_CHECKING:
    from chongming_runtime._attempt import Attempt

__all__ = ["AttemptHandle", "Executor"]


@runtime_checkable
class AttemptHandle(Protocol):
    """The executor's grip on one running attempt."""

    def force_stop(self, clock: Clock) -> bool:
        """The graceful window is over: end the attempt by force if possible.

        Returns True when the carrier is being ended and a result will still be
        reported (a child process is terminated, then killed); False when it
        cannot be ended (a thread), and the supervisor abandons it if its body
        began. An out-of-process carrier returns False only when it was not started
        yet, and then it never is (D92). Any further deadline (terminate, then kill)
        is a timer on `clock`.
        """
        ...


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
