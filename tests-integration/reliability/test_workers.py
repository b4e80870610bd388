"""Durable work across real processes: a feeder that registers nothing, two worker processes.

Each worker is ``reliability_worker.py serve``: it serves ``append`` (which writes its task
id and its own name to a report file, the side channel) and ``spin`` (which checkpoints
until stopped). This process enqueues by name, waits through the store, stops tasks on
either worker and kills one with SIGKILL. Checked on a SQLite file and on PostgreSQL, with
the workers on the same buckets and on disjoint ones.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest

from chongming_core import BucketPolicy, TaskStatus
from chongming_runtime import Controller, Job
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


@pytest.mark.parametrize("split", ["same buckets", "disjoint buckets"])
def test_two_workers_run_every_task_once_and_take_stops_from_the_feeder(
    children: Children, target: Target, feeder: Controller, tmp_path: Path, split: str
) -> None:
    owned: list[str | None] = [None, None] if split == "same buckets" else ["0-3", "4-7"]
    workers = start_workers(children, target, tmp_path, owned)
    keys = [f"tenant-{i}" for i in range(40)]
    ids = feeder.enqueue_many("append", [Job(i, bucket_key=key) for i, key in enumerate(keys)])
    spinning = [feeder.enqueue("spin", bucket_key=key) for key in ("tenant-0", "tenant-1")]
    outcomes = [feeder.wait(task_id, timeout=WAIT) for task_id in ids]
    assert [o.status for o in outcomes] == [S.SUCCEEDED] * len(ids)
    assert [o.value for o in outcomes] == list(range(len(ids)))
    reports = [report for _, report, _ in workers]
    ran = ran_by(reports)
    assert sorted(task_id for task_id, _ in ran) == sorted(ids)  # each exactly once
    assert all(count == 1 for count in ran.values())
    by_worker = Counter(owner for _, owner in ran)
    assert set(by_worker) == {"worker-0", "worker-1"}, by_worker  # the work is shared
    if split == "disjoint buckets":
        policy = BucketPolicy(BUCKETS)
        for task_id, owner in ran:
            snapshot = feeder.get(task_id)
            assert snapshot is not None
            assert snapshot.bucket_key is not None
            bucket = policy.bucket_for(snapshot.bucket_key)
            assert snapshot.bucket == bucket
            assert (bucket < 4) == (owner == "worker-0"), (task_id, bucket, owner)
    # a stop from this process reaches each spinning task, on whichever worker holds it
    for task_id in spinning:
        deadline = time.monotonic() + WAIT
        while feeder.get(task_id).status is not S.RUNNING:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"{task_id} never ran"
            time.sleep(0.01)
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
    for task_id in held:
        deadline = time.monotonic() + WAIT
        while feeder.get(task_id).status is not S.RUNNING:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"{task_id} never ran"
            time.sleep(0.01)
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


def test_a_fleet_limit_holds_across_three_worker_processes(
    children: Children, target: Target, feeder: Controller, tmp_path: Path
) -> None:
    """Three workers with room for three tasks each; the tag ``gpu`` is limited to two for
    the whole store. The bodies' own start and end times say how many ran at once."""
    workers = start_workers(children, target, tmp_path, [None, None, None], "--fleet-gpu", "2")
    ids = feeder.enqueue_many("gpu", [() for _ in range(18)])
    for task_id in ids:
        assert feeder.wait(task_id, timeout=WAIT).status is S.SUCCEEDED
    moments = sorted(
        (line["at"], 1 if line["event"] == "began" else -1)
        for _, report, _ in workers
        for line in read_report(report)
        if line["event"] in {"began", "ended"}
    )
    running = most = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    assert most == 2, f"at most {most} gpu tasks ran at once (the fleet limit is 2)"
    owners = {line["owner"] for _, report, _ in workers for line in read_report(report)}
    assert len(owners) >= 2  # the limit is the fleet's, not one worker's
    for proc, _, hold in workers:
        hold.touch()
        code, err = finish(proc, timeout=WAIT)
        assert code == 0, err
