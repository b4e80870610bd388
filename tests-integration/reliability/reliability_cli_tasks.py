"""The task module the hostile-input tests hand to the CLI (``--tasks reliability_cli_tasks``)."""

from __future__ import annotations

from typing import Any

from chongming_core import task


@task
def echo(ctx: Any, value: Any = None, **more: Any) -> Any:
    """Return what it was given."""
    ctx.checkpoint()
    return {"value": value, **more} if more else value
