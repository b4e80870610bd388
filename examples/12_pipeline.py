"""12 — a DAG pipeline: joins, blocked nodes, upstream values, and settlement (guide §8.12).

Run: python examples/12_pipeline.py
"""

from __future__ import annotations

from typing import Any

from chongming_task import AggregationPolicy, JoinMode, Pipeline, TaskStatus
from chongming_task.controller import Controller


def fetch(ctx: Any, day: str) -> list[int]:
    """The root: some rows for `day`."""
    return [1, 2, 3, 4]


def transform(ctx: Any, index: int) -> int:
    """One shard; shard 2 fails on purpose."""
    rows = ctx.input("fetch", [])  # the fetch node's return value
    if index == 2:
        raise ValueError(f"shard {index} is corrupt")
    return int(sum(rows)) * (index + 1)


def load(ctx: Any) -> int:
    """Needs every shard (ALL_SUCCEEDED): it will be skipped."""
    return sum(ctx.upstream.values())


def audit(ctx: Any) -> dict[str, Any]:
    """Runs whatever happened (ALL_SETTLED); sees only succeeded upstream values."""
    return {"upstream": sorted(ctx.upstream)}


def main() -> None:
    """Build the guide's pipeline, run it with all_settled, and print every node."""
    controller = Controller(max_parallel=2)
    for fn in (fetch, transform, load, audit):
        controller.register(fn.__name__, fn)

    pipeline = Pipeline("nightly-etl", aggregation=AggregationPolicy.all_settled())
    first = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node("transform", index, node_id=f"shard{index}", depends_on=[first])
        for index in range(3)
    ]
    last = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[last], join=JoinMode.ALL_SETTLED)

    run = controller.submit_pipeline(pipeline)
    outcome = run.wait(timeout=30)
    for node_id, node in outcome.nodes.items():
        detail = node.value if node.ok else (node.failure.message if node.failure else "")
        print(f"{node_id:<7} {node.status.value:<10} {detail}")
    print(f"pipeline: {outcome.status.value}")

    assert outcome.status is TaskStatus.FAILED  # a node failed
    assert outcome.nodes["shard1"].value == 20
    assert outcome.nodes["shard2"].status is TaskStatus.FAILED
    assert outcome.nodes["load"].status is TaskStatus.SKIPPED  # it should not have run
    assert outcome.nodes["audit"].status is TaskStatus.SUCCEEDED
    assert outcome.nodes["audit"].value == {"upstream": []}  # load had no value to pass
    controller.close()


if __name__ == "__main__":
    main()
