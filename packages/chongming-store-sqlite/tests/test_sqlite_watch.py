"""Waits on a SQLite file notice what other processes commit (`FileWatch`, D161).

The writes come from a real child process, so the in-process wake-ups cannot be what
woke the wait; an idle worker is checked to query only after the file changed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chongming_core import ClaimRequest, TaskSnapshot
from chongming_runtime import Controller
from chongming_runtime.testing import wait_until
from chongming_store_contract import build_command
from chongming_store_sqlite import SqliteTaskStore

WAIT = 30.0

_CHILD = textwrap.dedent(
    """
    import sys
    from chongming_runtime import Controller
    from chongming_store_sqlite import SqliteTaskStore

    store = SqliteTaskStore(sys.argv[1])
    controller = Controller(store=store, owner="feeder")
    controller.enqueue("noop", task_id="from-another-process")
    controller.close()
    store.close()
    """
)


def in_another_process(db: Path) -> None:
    """Enqueue a task from a child process, and wait for the process to finish."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(db)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "work.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteTaskStore]:
    opened = SqliteTaskStore(db)
    yield opened
    opened.close()


def test_a_wait_notices_an_enqueue_another_process_committed_before_it(
    store: SqliteTaskStore, db: Path
) -> None:
    assert store.watches_work
    store.wait_for_work(0)  # this thread's first look
    assert not store.wait_for_work(0.2)  # nothing written since
    in_another_process(db)
    started = time.monotonic()
    assert store.wait_for_work(WAIT)
    assert time.monotonic() - started < WAIT / 2  # at its first look, not at its end
    assert not store.wait_for_work(0.2)  # the change was seen once


def test_a_wait_under_way_notices_an_enqueue_by_another_process(
    store: SqliteTaskStore, db: Path
) -> None:
    store.wait_for_work(0)
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(store.wait_for_work(60)), daemon=True)
    waiter.start()
    in_another_process(db)
    waiter.join(WAIT)
    assert woken == [True]


def test_each_thread_and_each_kind_of_wait_sees_a_change_for_itself(
    store: SqliteTaskStore, db: Path
) -> None:
    store.wait_for_work(0)
    store.wait_for_commands(0)
    written = threading.Event()
    other: list[bool] = []

    def another_thread() -> None:
        other.append(store.wait_for_work(0))  # its first look
        written.wait(WAIT)
        other.append(store.wait_for_work(WAIT))

    looking = threading.Thread(target=another_thread, daemon=True)
    looking.start()
    wait_until(lambda: len(other) == 1, timeout=WAIT)
    in_another_process(db)
    assert store.wait_for_work(WAIT)
    assert store.wait_for_commands(WAIT)  # the other kind was not used up by the first
    written.set()
    looking.join(WAIT)
    assert other == [False, True]  # nor was the other thread's


def test_a_command_submitted_in_this_process_wakes_a_command_wait_at_once(
    store: SqliteTaskStore, db: Path
) -> None:
    store.wait_for_commands(0)
    assert not store.wait_for_commands(0.2)
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(store.wait_for_commands(60)))
    waiter.start()
    other = SqliteTaskStore(db)
    try:
        other.submit_command(build_command("c1", "somebody-elses-task"))
    finally:
        other.close()
    waiter.join(WAIT)
    assert woken == [True]


def test_an_idle_worker_queries_only_after_the_file_changed(db: Path) -> None:
    """With nothing written, a worker polling every 20 ms claims about once a second (its
    fallback), not fifty times; an enqueue from another process is claimed and run."""
    store = SqliteTaskStore(db)
    claims: list[float] = []
    claim_tasks = store.claim_tasks

    def counted(request: ClaimRequest) -> list[TaskSnapshot]:
        claims.append(time.monotonic())
        return claim_tasks(request)

    store.claim_tasks = counted  # type: ignore[method-assign]
    worker = Controller(store=store, owner="worker", poll_interval=0.02)
    try:
        worker.register("noop", lambda ctx: 7)
        worker.serve()
        wait_until(lambda: len(claims) >= 1, timeout=WAIT)
        time.sleep(1.5)
        assert len(claims) <= 4, f"{len(claims)} claims in 1.5 s with nothing written"
        in_another_process(db)
        outcome = worker.wait("from-another-process", timeout=WAIT)
        assert outcome.value == 7
    finally:
        worker.close(timeout=30)
        store.close()
