"""The core layer as the guide names it (`chongming_task.core.state_machine`)."""

from __future__ import annotations
