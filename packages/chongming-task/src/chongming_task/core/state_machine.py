"""`StateMachine`, the only writer of a task's status (guide §1.3)."""

from __future__ import annotations

from chongming_core import StateMachine as StateMachine
from chongming_core import Transition as Transition

__all__ = ["StateMachine", "Transition"]
