"""Tasks for the demo and the walkthrough in ``docs/cli.md`` (``--tasks chongming_cli.demo_tasks``).

A task module is the operator's own code: it decides what may run. This one
shows the usual shapes: short tasks that return a value, a task that fails,
and a long-running worker that winds up gracefully when asked to stop.
"""

from __future__ import annotations

import time
from typing import Any

from chongming_core import TaskCancelled, task

__all__ = ["extract", "fail", "load", "transform", "worker"]


@task(tags={"io"})
def extract(ctx: Any, day: str, rows: int = 200) -> dict[str, Any]:
    """Read one day of rows (simulated), reporting progress."""
    for done in range(0, rows + 1, 50):
        ctx.checkpoint()
        ctx.progress(done, total=rows, unit="rows")
        time.sleep(0.01)
    return {"day": day, "rows": rows}


@task
def transform(ctx: Any, factor: int = 2) -> int:
    """Scale the upstream rows (in a pipeline), or the factor alone."""
    ctx.checkpoint()
    upstream = ctx.input("extract", {"rows": 1})
    return int(upstream["rows"]) * factor


@task(tags={"io"})
def load(ctx: Any, target: str = "warehouse") -> str:
    """Write the result somewhere (simulated)."""
    ctx.checkpoint()
    return f"loaded {ctx.input('transform', 0)} rows into {target}"


@task
def fail(ctx: Any, message: str = "upstream unavailable") -> None:
    """Always fails: shows how a failure is reported."""
    ctx.checkpoint()
    raise ConnectionError(message)


@task
def worker(ctx: Any, source: str = "demo://orders", interval: float = 0.05) -> int:
    """Process batches until asked to stop, then return how many were processed.

    The stop is caught at the checkpoint (the race-free form of the guide's §4.5
    loop): the task winds up and ends ``succeeded`` with its count instead of
    ``stopped`` without one.
    """
    processed = 0
    while True:
        try:
            ctx.checkpoint()  # a pause waits here; a stop raises TaskCancelled here
        except TaskCancelled:
            break
        processed += 1
        ctx.progress(processed, unit="batch", message=source)
        time.sleep(interval)
    ctx.log(f"stop requested: processed {processed} batches")
    return processed
