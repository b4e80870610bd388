"""Pipeline definitions: node ids, dependencies, cycles, join rules and the overall status."""

from __future__ import annotations

import pytest

from chongming_core import (
    AggregationPolicy,
    CircularDependency,
    ConfigurationError,
    JoinMode,
    TaskStatus,
)
from chongming_runtime.pipeline._definition import (
    JoinDecision,
    Pipeline,
    join_decision,
    pipeline_status,
)

S = TaskStatus


def test_guide_example_structure() -> None:
    pipeline = Pipeline("nightly-etl", aggregation=AggregationPolicy.all_settled())
    fetch = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node("transform", index, node_id=f"shard{index}", depends_on=[fetch])
        for index in range(3)
    ]
    load = pipeline.node("load", node_id="load", depends_on=shards)
    audit = pipeline.node("audit", node_id="audit", depends_on=[load], join=JoinMode.ALL_SETTLED)
    assert [n.node_id for n in pipeline.nodes] == [
        "fetch", "shard0", "shard1", "shard2", "load", "audit",
    ]  # fmt: skip
    assert fetch.args == ("2026-10-02",)
    assert shards[2].args == (2,)
    assert load.depends_on == ("shard0", "shard1", "shard2")
    assert audit.join is JoinMode.ALL_SETTLED
    order = pipeline.validate()
    assert order.index("fetch") < order.index("shard1") < order.index("load") < order.index("audit")
    assert pipeline.downstream()["fetch"] == ["shard0", "shard1", "shard2"]
    assert pipeline.aggregation == AggregationPolicy.all_settled()


def test_default_ids_use_the_task_name_with_suffixes() -> None:
    pipeline = Pipeline("p")
    first = pipeline.node("mark", "before")
    second = pipeline.node("mark", "after")  # "after" is an argument, not a node id
    third = pipeline.node("mark")
    assert [first.node_id, second.node_id, third.node_id] == ["mark", "mark#2", "mark#3"]
    assert second.args == ("after",)
    assert pipeline.aggregation == AggregationPolicy.fail_fast()


def test_duplicate_explicit_id_is_refused() -> None:
    pipeline = Pipeline("p")
    pipeline.node("a", node_id="x")
    with pytest.raises(ConfigurationError, match="already has a node 'x'"):
        pipeline.node("b", node_id="x")


def test_cycles_raise_circular_dependency_naming_the_cycle() -> None:
    pipeline = Pipeline("p")
    pipeline.node("a", node_id="a", depends_on=["c"])
    pipeline.node("b", node_id="b", depends_on=["a"])
    pipeline.node("c", node_id="c", depends_on=["b"])
    with pytest.raises(CircularDependency) as raised:
        pipeline.validate()
    assert set(raised.value.cycle) == {"a", "b", "c"}
    assert raised.value.cycle[0] == raised.value.cycle[-1]
    with pytest.raises(CircularDependency):
        Pipeline("q").node("a", node_id="a", depends_on=["a"])


def test_unknown_dependency_and_empty_pipeline_are_refused() -> None:
    pipeline = Pipeline("p")
    with pytest.raises(ConfigurationError, match="has no nodes"):
        pipeline.validate()
    pipeline.node("a", depends_on=["ghost"])
    with pytest.raises(ConfigurationError, match="'ghost'"):
        pipeline.validate()


def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(ConfigurationError, match="non-empty name"):
        Pipeline("")
    with pytest.raises(ConfigurationError, match="registered task name"):
        Pipeline("p").node("")
    with pytest.raises(ConfigurationError, match="JoinMode"):
        Pipeline("p").node("a", join="sometimes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("join", "upstream", "decision"),
    [
        (JoinMode.ALL_SUCCEEDED, [S.SUCCEEDED, S.SUCCEEDED], JoinDecision.RELEASE),
        (JoinMode.ALL_SUCCEEDED, [S.SUCCEEDED, S.RUNNING], JoinDecision.WAIT),
        (JoinMode.ALL_SUCCEEDED, [S.FAILED, S.RUNNING], JoinDecision.SKIP),
        (JoinMode.ALL_SUCCEEDED, [S.SKIPPED], JoinDecision.SKIP),
        (JoinMode.ALL_SETTLED, [S.FAILED, S.RUNNING], JoinDecision.WAIT),
        (JoinMode.ALL_SETTLED, [S.FAILED, S.SUCCEEDED], JoinDecision.RELEASE),
        (JoinMode.ALL_SETTLED, [S.SKIPPED, S.STOPPED], JoinDecision.RELEASE),
        (JoinMode.ANY_SUCCEEDED, [S.FAILED, S.RUNNING], JoinDecision.WAIT),
        (JoinMode.ANY_SUCCEEDED, [S.RUNNING, S.SUCCEEDED], JoinDecision.RELEASE),
        (JoinMode.ANY_SUCCEEDED, [S.FAILED, S.LOST], JoinDecision.SKIP),
        (JoinMode.ALL_SUCCEEDED, [], JoinDecision.RELEASE),
    ],
)
def test_join_decisions(join: JoinMode, upstream: list[TaskStatus], decision: JoinDecision) -> None:
    assert join_decision(join, upstream) is decision


@pytest.mark.parametrize(
    ("statuses", "overall"),
    [
        ([S.SUCCEEDED, S.SUCCEEDED], S.SUCCEEDED),
        ([S.SUCCEEDED, S.FAILED, S.CANCELLED, S.SKIPPED], S.FAILED),
        ([S.LOST, S.SUCCEEDED], S.FAILED),
        ([S.STOPPED, S.SKIPPED, S.SUCCEEDED], S.STOPPED),
        ([S.FAILED, S.STOPPED], S.FAILED),
        ([S.CANCELLED, S.SKIPPED], S.CANCELLED),
    ],
)
def test_pipeline_status(statuses: list[TaskStatus], overall: TaskStatus) -> None:
    assert pipeline_status(statuses) is overall
