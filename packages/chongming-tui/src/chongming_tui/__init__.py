"""chongming-tui: the live terminal dashboard (``chongming-task dashboard``).

The dashboard reads through the runtime's `Controller`; this distribution holds
no public API yet.
"""

from __future__ import annotations

__all__: list[str] = []
