"""chongming-cli: the ``chongming-task`` command line console (a thin adapter over the Controller).

The console is built on the runtime's `Controller`; this distribution holds no
public API yet.
"""

from __future__ import annotations

__all__: list[str] = []
