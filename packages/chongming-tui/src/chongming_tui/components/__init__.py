"""The dashboard's screens and panels, one module each.

- `overview`: the default screen (header, filter bar, task table, status line).
- `detail`: one task's snapshot, health warnings and whole trajectory.
- `stop_dialog`: reason, then confirmation.
- `prompt`: a one-line filter value (tag, bucket, name prefix).
- `reconcile`: the ``reconcile(dry_run=True)`` view.
- `header`, `banner`, `filter_bar`, `task_table`, `status_line`: the panels.
"""

from __future__ import annotations

__all__: list[str] = []
