"""Durable work across real processes: a feeder that registers nothing, two worker processes.

Each worker is ``reliability_worker.py serve``: it serves ``append`` (which writes its task
id and its own name to a report file, the side channel) and ``spin`` (which checkpoints
until stopped). This process enqueues by name, waits through the store, stops tasks on
either worker and kills one with SIGKILL. Checked on a SQLite file and on PostgreSQL, with
the workers on the same buckets and on disjoint ones.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest

from chongming_core import BucketPolicy, ClaimRequest, TaskSnapshot, TaskStatus
from chongming_runtime import Controller, Job
from chongming_runtime.testing import wait_until
from reliability.reliability_support import (
    Children,
    Target,
    finish,
    read_report,
    wait_for_line,
)

S = TaskStatus
BUCKETS = 8
WAIT = 60.0


@pytest.fixture
def feeder(target: Target) -> Iterator[Controller]:
    """The feeding process's controller: it registers nothing and serves nothing."""
    store = target[1]()
    controller = Controller(store=store, owner="feeder", bucket_policy=BucketPolicy(BUCKETS))
    try:
        yield controller
    finally:
        controller.close(timeout=30)
        store.close()


def start_workers(
    children: Children,
    target: Target,
    tmp_path: Path,
    buckets: list[str | None],
    *extra_args: str,
) -> list[tuple[Popen[bytes], Path, Path]]:
    """One worker per entry of `buckets` (a range ``"0-3"``, or None for every bucket);
    returns each process with its report file and the file that tells it to close."""
    workers = []
    for index, owned in enumerate(buckets):
        report = tmp_path / f"worker-{index}.jsonl"
        hold = tmp_path / f"close-{index}"
        extra = ["--owned-buckets", owned] if owned else []
        proc = children.start("serve", *target[0], "--report", str(report), "--owner",
                              f"worker-{index}", "--lease-ttl", "1", "--num-buckets",
                              str(BUCKETS), "--burst", "3", "--hold", str(hold),
                              *extra, *extra_args)  # fmt: skip
        workers.append((proc, report, hold))
    for proc, report, _ in workers:
        wait_for_line(report, "ready", proc, timeout=30)
    return workers


def ran_by(reports: list[Path]) -> Counter[tuple[str, str]]:
    """(task id, worker) of every body that ran, from the workers' side channel."""
    return Counter(
        (line["task_id"], line["owner"])
        for report in reports
        for line in read_report(report)
        if line["event"] == "ran"
    )


def keys_in(buckets: range, count: int) -> list[str]:
    """`count` bucket keys whose buckets (of ``BucketPolicy(BUCKETS)``) are in `buckets`."""
    policy = BucketPolicy(BUCKETS)
    keys = (f"tenant-{i}" for i in range(10_000))
    return [key for key in keys if policy.bucket_for(key) in buckets][:count]


def wait_running(feeder: Controller, task_ids: list[str]) -> None:
    """Until every task of `task_ids` is ``running`` in the store (bounded by WAIT).

    Each is a ``spin`` task, which runs until it is stopped: once running, it stays so."""

    def running(task_id: str) -> bool:
        snapshot = feeder.get(task_id)
        return snapshot is not None and snapshot.status is S.RUNNING

    wait_until(
        lambda: all(running(task_id) for task_id in task_ids),
        f"{task_ids} to be running",
        timeout=WAIT,
        interval=0.01,
    )


@pytest.mark.parametrize("split", ["same buckets", "disjoint buckets"])
def test_two_workers_run_every_task_once_and_take_stops_from_the_feeder(
    children: Children, target: Target, feeder: Controller, tmp_path: Path, split: str
) -> None:
    owned: list[str | None] = [None, None] if split == "same buckets" else ["0-3", "4-7"]
    workers = start_workers(children, target, tmp_path, owned)
    keys = [f"tenant-{i}" for i in range(40)]
    ids = feeder.enqueue_many("append", [Job(i, bucket_key=key) for i, key in enumerate(keys)])
    outcomes = [feeder.wait(task_id, timeout=WAIT) for task_id in ids]
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * len(ids)
    assert [o.value for o in outcomes] == list(range(len(ids)))
    reports = [report for _, report, _ in workers]
    ran = ran_by(reports)
    assert sorted(task_id for task_id, _ in ran) == sorted(ids)  # each exactly once
    assert all(count == 1 for count in ran.values())
    if split == "disjoint buckets":
        policy = BucketPolicy(BUCKETS)
        for task_id, owner in ran:
            snapshot = feeder.get(task_id)
            assert snapshot is not None
            assert snapshot.bucket_key is not None
            bucket = policy.bucket_for(snapshot.bucket_key)
            assert snapshot.bucket == bucket
            assert (bucket < 4) == (owner == "worker-0"), (task_id, bucket, owner)
    # Six tasks that run until stopped, for two workers with room for three each: all six
    # running means each worker holds three (the work is shared however fast either one
    # claims). On disjoint buckets, three keys fall in each worker's half.
    spin_keys = keys_in(range(4), 3) + keys_in(range(4, 8), 3)
    spinning = [feeder.enqueue("spin", bucket_key=key) for key in spin_keys]
    wait_running(feeder, spinning)
    held_by = {
        line["task_id"]: line["owner"]
        for report in reports
        for line in read_report(report)
        if line["event"] == "spinning"
    }
    assert sorted(held_by) == sorted(spinning)
    assert Counter(held_by.values()) == {"worker-0": 3, "worker-1": 3}  # the work is shared
    # a stop from this process reaches each spinning task, on whichever worker holds it
    for task_id in spinning:
        assert feeder.stop(task_id, reason="operator")
    for task_id in spinning:
        assert feeder.wait(task_id, timeout=WAIT).status is S.STOPPED
    for proc, _, hold in workers:
        hold.touch()
        code, err = finish(proc, timeout=WAIT)
        assert code == 0, err


def test_a_worker_killed_with_sigkill_leaves_nothing_running_after_reconcile(
    children: Children, target: Target, feeder: Controller, tmp_path: Path
) -> None:
    workers = start_workers(children, target, tmp_path, [None])
    proc, report, _ = workers[0]
    held = [feeder.enqueue("spin") for _ in range(3)]
    wait_running(feeder, held)
    children.kill(proc)
    time.sleep(1.2)  # its lease (1 s) runs out
    report_ = feeder.reconcile()
    assert sorted(s.task_id for s in report_.lost) == sorted(held)
    for task_id in held:
        snapshot = feeder.get(task_id)
        assert snapshot is not None
        assert snapshot.status is S.LOST
        assert snapshot.failure is not None
        assert "worker-0" in snapshot.failure.message
    assert feeder.store.status_counts().get(S.RUNNING, 0) == 0
    (row,) = feeder.store.workers()
    assert (row.owner, row.is_live(feeder.clock.now())) == ("worker-0", False)
    assert {line["task_id"] for line in read_report(report) if line["event"] == "spinning"} == set(
        held
    )


def test_a_worker_frozen_past_its_lease_stops_the_body_that_reconcile_declared_lost(
    children: Children, target: Target, feeder: Controller, tmp_path: Path
) -> None:
    """SIGSTOP past the lease, `reconcile` from the feeder, SIGCONT: the woken worker finds
    the verdict when it renews, leaves the store's `lost` alone and stops its body there,
    instead of running a second copy of a task the fleet was told is gone (D177)."""
    workers = start_workers(children, target, tmp_path, [None])
    proc, report, hold = workers[0]
    held = feeder.enqueue("spin")
    wait_running(feeder, [held])
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        time.sleep(1.3)  # its lease (1 s) runs out
        assert [s.task_id for s in feeder.reconcile().lost] == [held]
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
    verdict = feeder.history(held)
    assert verdict[-1].to_status is S.LOST
    line = wait_for_line(report, "unwound", proc, timeout=WAIT)
    assert line["task_id"] == held
    hold.touch()
    code, err = finish(proc, WAIT)
    assert code == 0, err
    assert feeder.history(held) == verdict  # the woken worker wrote nothing over it
    assert feeder.get(held).status is S.LOST  # type: ignore[union-attr]


def test_a_fleet_limit_holds_across_three_worker_processes(
    children: Children, target: Target, feeder: Controller, tmp_path: Path
) -> None:
    """Three workers with room for one task each; the tag ``gpu`` is limited to two for
    the whole store. The first gpu bodies hold until the gate opens, so two run at once on
    two workers while the third worker, idle with room, is refused the rest; the bodies'
    own start and end times then say how many ran at once."""
    gate = tmp_path / "gate"
    workers = start_workers(children, target, tmp_path, [None, None, None],
                            "--fleet-gpu", "2", "--burst", "1", "--gate", str(gate))  # fmt: skip
    reports = [report for _, report, _ in workers]
    ids = feeder.enqueue_many("gpu", [() for _ in range(12)])

    def began() -> list[dict[str, Any]]:
        return [line for report in reports for line in read_report(report)
                if line["event"] == "began"]  # fmt: skip

    wait_until(lambda: len(began()) >= 2, "two gpu tasks to begin", timeout=WAIT, interval=0.01)
    time.sleep(0.5)  # three workers poll every 20 ms: a third claim would show by now
    first = began()
    assert len(first) == 2, f"{len(first)} gpu tasks began while the fleet limit is 2"
    assert len({line["owner"] for line in first}) == 2  # a worker has room for one
    assert sum(feeder.get(t).status is S.RUNNING for t in ids) == 2  # type: ignore[union-attr]
    gate.touch()
    for task_id in ids:
        assert feeder.wait(task_id, timeout=WAIT).status is S.SUCCEEDED
    moments = sorted(
        (line["at"], 1 if line["event"] == "began" else -1)
        for report in reports
        for line in read_report(report)
        if line["event"] in {"began", "ended"}
    )
    running = most = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    assert most == 2, f"at most {most} gpu tasks ran at once (the fleet limit is 2)"
    for proc, _, hold in workers:
        hold.touch()
        code, err = finish(proc, timeout=WAIT)
        assert code == 0, err


@pytest.mark.postgres
def test_a_worker_listens_for_work_once_serve_returns(postgres_dsn: str, pg_schema: str) -> None:
    """A task enqueued just after the worker's first claim found nothing, before its
    thread first waits, wakes it at once: it was listening when ``serve()`` returned.
    (It used to LISTEN at its first wait and missed that notification, sleeping a fallback
    poll: a minute here.)"""
    from chongming_store_postgres import PostgresTaskStore

    worker_store = PostgresTaskStore(postgres_dsn, schema=pg_schema)
    feeder_store = PostgresTaskStore(postgres_dsn, schema=pg_schema)
    first_claimed, enqueued = threading.Event(), threading.Event()
    claim_tasks = worker_store.claim_tasks

    def first_claim_then_hold(request: ClaimRequest) -> list[TaskSnapshot]:
        found = claim_tasks(request)
        if not first_claimed.is_set():
            first_claimed.set()
            enqueued.wait(WAIT)  # the enqueue commits (and notifies) in this window
        return found

    worker_store.claim_tasks = first_claim_then_hold  # type: ignore[method-assign]
    worker = Controller(store=worker_store, owner="worker", poll_interval=60.0)
    feeder = Controller(store=feeder_store, owner="feeder")
    try:
        worker.register("noop", lambda ctx: 7)
        worker.serve()
        assert first_claimed.wait(WAIT)
        task_id = feeder.enqueue("noop")
        enqueued.set()
        outcome = feeder.wait(task_id, timeout=20)
        assert (outcome.status, outcome.value) == (S.SUCCEEDED, 7)
    finally:
        enqueued.set()
        worker.close(timeout=30)
        feeder.close(timeout=30)
        worker_store.close()
        feeder_store.close()
