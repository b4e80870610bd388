"""Statuses, failure kinds and the transition table (guide §9)."""

from __future__ import annotations

from chongming_core import ACTIVE_STATUSES as ACTIVE_STATUSES
from chongming_core import NON_TERMINAL_STATUSES as NON_TERMINAL_STATUSES
from chongming_core import TERMINAL_STATUSES as TERMINAL_STATUSES
from chongming_core import TRANSITIONS as TRANSITIONS
from chongming_core import Failure as Failure
from chongming_core import FailureKind as FailureKind
from chongming_core import Progress as Progress
from chongming_core import TaskSnapshot as TaskSnapshot
from chongming_core import TaskStatus as TaskStatus
from chongming_core import Transition as Transition

__all__ = [
    "ACTIVE_STATUSES",
    "NON_TERMINAL_STATUSES",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "Failure",
    "FailureKind",
    "Progress",
    "TaskSnapshot",
    "TaskStatus",
    "Transition",
]
