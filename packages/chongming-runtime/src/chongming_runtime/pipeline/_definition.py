"""`Pipeline`: a DAG of registered task names (guide §8.12) — its definition and its rules.

This module only describes a pipeline and decides, from node statuses, what
happens next; the controller executes it. The structure lives in memory: task
functions and arguments are never persisted, so a pipeline cannot be resumed
after a restart (its nodes are then marked lost by ``reconcile()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from chongming_core import (
    AggregationPolicy,
    CircularDependency,
    ConfigurationError,
    JoinMode,
    RetryPolicy,
    TaskStatus,
    Timeout,
)
from chongming_runtime.executors._base import Executor
from chongming_runtime.support._text import refuse_unstorable

__all__ = ["JoinDecision", "Pipeline", "PipelineNode", "join_decision", "pipeline_status"]


@dataclass(frozen=True, slots=True)
class PipelineNode:
    """One node: a registered task name, its arguments, and what it waits for."""

    node_id: str
    task_name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    join: JoinMode = JoinMode.ALL_SUCCEEDED
    options: Mapping[str, Any] = field(default_factory=dict)


class Pipeline:
    """A named DAG of task nodes.

    Example::

        pipeline = Pipeline("nightly-etl", aggregation=AggregationPolicy.all_settled())
        fetch = pipeline.node("fetch", "2026-10-02", node_id="fetch")
        load = pipeline.node("load", node_id="load", depends_on=[fetch])
        controller.submit_pipeline(pipeline).wait(timeout=60)
    """

    def __init__(self, name: str, *, aggregation: AggregationPolicy | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a pipeline needs a non-empty name, got {name!r}")
        refuse_unstorable("pipeline name", name)  # a part of every node's task id
        if aggregation is not None and not isinstance(aggregation, AggregationPolicy):
            raise ConfigurationError(
                f"aggregation must be AggregationPolicy.fail_fast() or .all_settled(), "
                f"got {aggregation!r}"
            )
        self.name = name
        self.aggregation = aggregation or AggregationPolicy.fail_fast()
        self._nodes: dict[str, PipelineNode] = {}

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, nodes={list(self._nodes)})"

    @property
    def nodes(self) -> tuple[PipelineNode, ...]:
        """The nodes in definition order."""
        return tuple(self._nodes.values())

    def node(
        self,
        task_name: str,
        *args: Any,
        node_id: str | None = None,
        depends_on: Iterable[PipelineNode | str] = (),
        join: JoinMode = JoinMode.ALL_SUCCEEDED,
        label: str | None = None,
        tags: Iterable[str] | None = None,
        priority: int | None = None,
        bucket_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        executor: Executor | None = None,
        **kwargs: Any,
    ) -> PipelineNode:
        """Add a node running the registered task `task_name` with `args` and `kwargs`.

        The node id defaults to the task name; a repeated default gets ``#2``,
        ``#3``... `depends_on` takes nodes (or node ids). Positional arguments
        after the task name go to the task — the node's id is `node_id`. `retry`,
        `timeout` and `executor` override the task's ``@task`` spec, as in
        ``Controller.submit`` (R12); a start timeout counts from the submission of
        the pipeline, blocked time included (R1).
        """
        if not isinstance(task_name, str) or not task_name:
            raise ConfigurationError(
                f"the first argument of node() is a registered task name, got {task_name!r}"
            )
        if node_id is None:
            node_id = task_name
            suffix = 2
            while node_id in self._nodes:
                node_id = f"{task_name}#{suffix}"
                suffix += 1
        elif not isinstance(node_id, str) or not node_id:
            raise ConfigurationError(f"node_id must be a non-empty string, got {node_id!r}")
        elif node_id in self._nodes:
            raise ConfigurationError(
                f"pipeline {self.name!r} already has a node {node_id!r}; node ids must be unique"
            )
        refuse_unstorable("node_id", node_id)
        try:
            join_mode = JoinMode(join)
        except ValueError:
            raise ConfigurationError(
                f"join must be a JoinMode (ALL_SUCCEEDED, ALL_SETTLED, ANY_SUCCEEDED), got {join!r}"
            ) from None
        upstream: list[str] = []
        for dep in depends_on:
            dep_id = dep.node_id if isinstance(dep, PipelineNode) else dep
            if not isinstance(dep_id, str):
                raise ConfigurationError(
                    f"depends_on takes nodes returned by node() or node ids, got {dep!r}"
                )
            if dep_id == node_id:
                raise CircularDependency([node_id, node_id])
            if dep_id not in upstream:
                upstream.append(dep_id)
        options: dict[str, Any] = {}
        if label is not None:
            options["label"] = label
        if tags is not None:
            options["tags"] = tags
        if priority is not None:
            options["priority"] = priority
        if bucket_key is not None:
            options["bucket_key"] = bucket_key
        for option, value in (("retry", retry), ("timeout", timeout), ("executor", executor)):
            if value is not None:
                options[option] = value
        created = PipelineNode(
            node_id=node_id,
            task_name=task_name,
            args=args,
            kwargs=dict(kwargs),
            depends_on=tuple(upstream),
            join=join_mode,
            options=options,
        )
        self._nodes[node_id] = created
        return created

    def validate(self) -> list[str]:
        """Check references and cycles; return node ids in a topological order.

        Raises:
            ConfigurationError: a node depends on an id that is not in the pipeline.
            CircularDependency: the dependencies form a cycle (the message shows it).
        """
        if not self._nodes:
            raise ConfigurationError(f"pipeline {self.name!r} has no nodes; add some with node()")
        for node in self._nodes.values():
            for dep in node.depends_on:
                if dep not in self._nodes:
                    raise ConfigurationError(
                        f"node {node.node_id!r} depends on {dep!r}, which is not a node of "
                        f"pipeline {self.name!r}; known nodes: {sorted(self._nodes)}"
                    )
        order: list[str] = []
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done

        def visit(node_id: str, path: list[str]) -> None:
            mark = state.get(node_id)
            if mark == 2:
                return
            if mark == 1:
                start = path.index(node_id)
                raise CircularDependency([*path[start:], node_id])
            state[node_id] = 1
            path.append(node_id)
            for dep in self._nodes[node_id].depends_on:
                visit(dep, path)
            path.pop()
            state[node_id] = 2
            order.append(node_id)

        for node_id in self._nodes:
            visit(node_id, [])
        return order

    def downstream(self) -> dict[str, list[str]]:
        """node id -> ids of the nodes that depend on it."""
        result: dict[str, list[str]] = {n: [] for n in self._nodes}
        for node in self._nodes.values():
            for dep in node.depends_on:
                result.setdefault(dep, []).append(node.node_id)
        return result


class JoinDecision(StrEnum):
    """What a waiting node should do, given its upstream statuses."""

    WAIT = "wait"
    RELEASE = "release"
    SKIP = "skip"


def join_decision(join: JoinMode, upstream: Sequence[TaskStatus]) -> JoinDecision:
    """Apply a node's join mode to its upstream statuses.

    - ALL_SUCCEEDED: release when all succeeded; skip once any ended otherwise.
    - ALL_SETTLED: release once all are terminal, whatever the outcome.
    - ANY_SUCCEEDED: release once one succeeded; skip when all ended and none did.
    """
    if not upstream:
        return JoinDecision.RELEASE
    ended = [s for s in upstream if s.is_terminal]
    succeeded = [s for s in ended if s is TaskStatus.SUCCEEDED]
    if join is JoinMode.ALL_SUCCEEDED:
        if len(succeeded) == len(upstream):
            return JoinDecision.RELEASE
        if len(succeeded) < len(ended):
            return JoinDecision.SKIP
        return JoinDecision.WAIT
    if join is JoinMode.ALL_SETTLED:
        return JoinDecision.RELEASE if len(ended) == len(upstream) else JoinDecision.WAIT
    if succeeded:
        return JoinDecision.RELEASE
    return JoinDecision.SKIP if len(ended) == len(upstream) else JoinDecision.WAIT


#: Node statuses that count as a real failure for fail_fast (cancelled never does).
FAIL_FAST_TRIGGERS = frozenset({TaskStatus.FAILED, TaskStatus.LOST})


def pipeline_status(statuses: Iterable[TaskStatus]) -> TaskStatus:
    """The overall status of a settled pipeline (R16).

    ``failed`` when any node failed or was lost; else ``stopped`` when an
    operator stopped any node; else ``succeeded`` when every node succeeded;
    anything else (cancelled or skipped nodes only) is ``cancelled``.
    """
    seen = set(statuses)
    if seen & FAIL_FAST_TRIGGERS:
        return TaskStatus.FAILED
    if TaskStatus.STOPPED in seen:
        return TaskStatus.STOPPED
    if seen <= {TaskStatus.SUCCEEDED}:
        return TaskStatus.SUCCEEDED
    return TaskStatus.CANCELLED
