"""Retention in batches (`prune`, `archive`) and a store that outlives a ``fork()``."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from chongming_core import FakeClock, TaskQuery, TaskStatus, Transition
from chongming_store_contract import BASE_TIME, build_command, build_task, build_versions
from chongming_store_sqlite import SqliteTaskStore, _housekeeping


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_housekeeping, "PRUNE_BATCH_TASKS", 3)
    monkeypatch.setattr(_housekeeping, "ARCHIVE_BATCH_TASKS", 2)


@pytest.mark.usefixtures("small_batches")
def test_prune_deletes_the_oldest_terminal_tasks_in_batches(tmp_path: Path) -> None:
    clock = FakeClock(BASE_TIME)
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        finished = []
        for i in range(10):
            built = build_task(f"done{i}", TaskStatus.SUCCEEDED, clock=clock, tags={"io"})
            store.create(*built)
            store.submit_command(build_command(f"c{i}", f"done{i}"))
            finished.append(built.snapshot)
        live = build_task("live", TaskStatus.RUNNING, clock=clock)
        store.create(*live)

        assert store.prune(2) == 8
        kept = {s.task_id for s in store.query()}
        assert kept == {"done8", "done9", "live"}
        for i in range(8):
            assert store.history(f"done{i}") == []
            assert store.commands(task_id=f"done{i}") == []
        assert {s.task_id for s in store.query(TaskQuery(tag="io"))} == {"done8", "done9"}
        assert store.prune(2) == 0
        assert store.prune(0) == 2
        assert [s.task_id for s in store.query()] == ["live"]


@pytest.mark.usefixtures("small_batches")
def test_a_live_task_whose_end_column_was_forged_is_neither_pruned_nor_archived(
    tmp_path: Path,
) -> None:
    """Retention went by the ``terminal_us`` column alone: a value written there by
    another program got a running task deleted. The status decides, as on PostgreSQL."""
    clock = FakeClock(BASE_TIME)
    path = tmp_path / "tasks.db"
    archive = tmp_path / "history.jsonl"
    with SqliteTaskStore(path) as store:
        live = build_task("live", TaskStatus.RUNNING, clock=clock)
        store.create(*live)
        clock.advance(1)
        for i in range(4):
            store.create(*build_task(f"done{i}", TaskStatus.SUCCEEDED, clock=clock))
        forged = sqlite3.connect(path)
        try:
            with forged:  # as old as any end can be: first in line for both
                forged.execute(
                    "UPDATE tasks SET terminal_us = 1, finished_us = 1 WHERE task_id = 'live'"
                )
        finally:
            forged.close()
        history = store.history("live")
        assert store.archive(finished_before=clock.now() + timedelta(days=1), path=archive) > 0
        assert store.history("live") == history
        assert store.prune(0) == 4
        kept = store.get("live")
        assert kept is not None
        assert kept.status is TaskStatus.RUNNING
        assert store.history("live") == history


@pytest.mark.usefixtures("small_batches")
def test_archive_moves_history_in_batches_to_an_owner_only_file(tmp_path: Path) -> None:
    clock = FakeClock(BASE_TIME)
    archive = tmp_path / "history.jsonl"
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        old = [build_task(f"old{i}", TaskStatus.FAILED, clock=clock) for i in range(5)]
        for built in old:
            store.create(*built)
        cut = clock.now() + timedelta(microseconds=1)
        clock.advance(60)
        recent = build_task("recent", TaskStatus.SUCCEEDED, clock=clock)
        store.create(*recent)
        running = build_versions("running", 6, clock=clock)
        store.create(*running)

        assert store.archive(finished_before=BASE_TIME, path=archive) == 0
        assert not archive.exists(), "nothing to move creates no file"
        moved = store.archive(finished_before=cut, path=archive)
        expected = [t for built in old for t in built.transitions[:-1]]
        assert moved == len(expected) == 5 * 3
        lines = archive.read_text(encoding="utf-8").splitlines()
        assert [Transition.from_dict(json.loads(line)) for line in lines] == expected
        if sys.platform != "win32":
            assert stat.S_IMODE(archive.stat().st_mode) == 0o600
        for built in old:
            assert store.history(built.snapshot.task_id) == [built.transitions[-1]]
            assert store.get(built.snapshot.task_id) == built.snapshot
        assert store.history("recent") == list(recent.transitions)
        assert store.history("running") == list(running.transitions)
        assert store.archive(finished_before=cut, path=archive) == 0
        assert len(archive.read_text(encoding="utf-8").splitlines()) == len(expected)


def test_archive_to_an_unwritable_path_deletes_nothing(tmp_path: Path) -> None:
    from chongming_core import StoreError

    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        built = build_task("t1", TaskStatus.SUCCEEDED)
        store.create(*built)
        target = tmp_path / "missing-dir" / "history.jsonl"
        with pytest.raises(StoreError, match="archive file") as caught:
            store.archive(finished_before=BASE_TIME + timedelta(days=1), path=target)
        assert str(target) in str(caught.value)
        assert store.history("t1") == list(built.transitions)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_opens_its_own_connections(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        store.create(*build_task("parent", TaskStatus.QUEUED))
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                store.create(*build_task("child", TaskStatus.QUEUED))
                code = 0 if store.get("parent") is not None else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert store.get("child") is not None
        store.create(*build_task("after", TaskStatus.QUEUED))
        assert {s.task_id for s in store.query()} == {"parent", "child", "after"}
