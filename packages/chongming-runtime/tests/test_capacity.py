"""Capacity accounting and the ready queue: priority, FIFO, scanning past a blocked head."""

from __future__ import annotations

from chongming_runtime.controller._capacity import Capacity, ReadyQueue


def _drain(queue: ReadyQueue, capacity: Capacity) -> list[str]:
    order = []
    while (item := queue.pop_fitting(capacity)) is not None:
        capacity.acquire(item.task_id, item.tags, item.bucket)
        order.append(item.task_id)
    return order


def test_priority_then_fifo() -> None:
    queue = ReadyQueue()
    queue.push("a")
    queue.push("b", priority=10)
    queue.push("c")
    queue.push("d", priority=10)
    queue.push("e", priority=-1)
    assert _drain(queue, Capacity(10)) == ["b", "d", "a", "c", "e"]


def test_global_limit_stops_dispatch_and_release_reopens_it() -> None:
    queue = ReadyQueue()
    for name in "abc":
        queue.push(name)
    capacity = Capacity(2)
    assert _drain(queue, capacity) == ["a", "b"]
    assert capacity.active == 2
    assert len(queue) == 1
    assert capacity.release("a") is True
    assert capacity.release("a") is False
    assert _drain(queue, capacity) == ["c"]


def test_scan_passes_a_head_blocked_by_a_full_bucket() -> None:
    queue = ReadyQueue()
    queue.push("a1", bucket=1)
    queue.push("a2", bucket=1)
    queue.push("b1", bucket=2)
    capacity = Capacity(10, max_per_bucket=1)
    assert _drain(queue, capacity) == ["a1", "b1"]
    assert queue.task_ids() == ["a2"]
    assert capacity.active_in_bucket(1) == 1
    capacity.release("a1")
    assert capacity.active_in_bucket(1) == 0
    assert _drain(queue, capacity) == ["a2"]


def test_named_resources_need_room_in_each_limited_tag() -> None:
    capacity = Capacity(20, limits={"db": 2, "gpu": 1})
    queue = ReadyQueue()
    queue.push("train-1", tags=frozenset({"gpu", "db"}))
    queue.push("train-2", tags=frozenset({"gpu"}))
    queue.push("sync-1", tags=frozenset({"db"}))
    queue.push("sync-2", tags=frozenset({"db"}))
    queue.push("plain", tags=frozenset({"io"}))  # unlimited tags never throttle
    assert _drain(queue, capacity) == ["train-1", "sync-1", "plain"]
    assert capacity.in_use("db") == 2
    assert capacity.in_use("gpu") == 1
    assert capacity.in_use("io") == 0
    capacity.release("train-1")
    assert _drain(queue, capacity) == ["train-2", "sync-2"]


def test_removed_items_are_skipped() -> None:
    queue = ReadyQueue()
    queue.push("a")
    queue.push("b")
    assert queue.remove("a") is True
    assert queue.remove("a") is False
    assert "a" not in queue
    assert _drain(queue, Capacity(5)) == ["b"]


def test_acquire_is_idempotent() -> None:
    capacity = Capacity(3, limits={"db": 1}, max_per_bucket=2)
    capacity.acquire("x", {"db"}, 4)
    capacity.acquire("x", {"db"}, 4)
    assert capacity.active == 1
    assert capacity.in_use("db") == 1
    assert capacity.active_in_bucket(4) == 1
    assert not capacity.fits({"db"}, None)
    assert capacity.fits({"io"}, 4)
