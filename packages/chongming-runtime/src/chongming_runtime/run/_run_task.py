"""`run_task`: the one-line way to run a task and block until it is terminal (guide §3.1)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from chongming_core import Clock, RetryPolicy, Timeout
from chongming_runtime.executors._base import Executor
from chongming_runtime.run._outcome import TaskOutcome
from chongming_runtime.run._task_run import TaskRun

__all__ = ["run_task"]


def run_task(
    fn: Callable[..., Any],
    /,
    *args: Any,
    task_id: str | None = None,
    name: str | None = None,
    label: str | None = None,
    tags: Iterable[str] | None = None,
    executor: Executor | None = None,
    retry: RetryPolicy | None = None,
    timeout: Timeout | None = None,
    graceful_stop: float = 5.0,
    clock: Clock | None = None,
    artifact_dir: str | Path | None = None,
    upstream: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> TaskOutcome:
    """Run ``fn(ctx, *args, **kwargs)`` under supervision and block until it is terminal.

    Do not use it when you need to intervene midway: use `TaskRun`. Keyword
    arguments not named here are passed to the task.

    Example::

        outcome = run_task(extract, "s3://bucket/x", task_id="job-1", name="extract")
    """
    run = TaskRun(
        fn,
        args,
        kwargs,
        task_id=task_id,
        name=name,
        label=label,
        tags=tags,
        executor=executor,
        retry=retry,
        timeout=timeout,
        graceful_stop=graceful_stop,
        clock=clock,
        artifact_dir=artifact_dir,
        upstream=upstream,
    )
    run.start()
    return run.wait()
