"""Rows the store cannot read: the console prints everything else, names each, exits 1.

The tasks are written straight into a SQLite file, then rows are damaged with raw SQL
as another program would. A listing still prints (and `--json` still is one valid
document of the readable tasks); each damaged row gets one ``error:`` line on stderr,
and the exit code is 1 because the answer is not all that was asked for.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming_cli import EXIT_FAILED, EXIT_OK, main
from chongming_core import FakeClock, StateMachine
from chongming_store_sqlite import SqliteTaskStore

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("CHONGMING_DB", "CHONGMING_DSN", "CHONGMING_OWNED_BUCKETS", "CHONGMING_OWNER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def _write(path: Path, task_ids: list[str]) -> None:
    with SqliteTaskStore(path) as store:
        for task_id in task_ids:
            m = StateMachine.create(task_id, "job", clock=FakeClock(LONG_AGO))
            m.mark_queued(actor="node-a")
            m.mark_starting(executor="thread", actor="node-a")
            m.mark_running(actor="node-a")
            until = LONG_AGO + timedelta(seconds=30)
            store.create(m.snapshot.evolve(lease_owner="node-a", lease_until=until), m.transitions)


def _damage(path: Path, statement: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute(statement).rowcount >= 1


@pytest.fixture
def db(tmp_path: Path) -> str:
    """`good`, `bad` (its status is 'zombie'), `other`, all unsupervised for years."""
    path = tmp_path / "tasks.db"
    _write(path, ["good", "bad", "other"])
    _damage(
        path,
        "UPDATE tasks SET status = 'zombie', data = json_set(data, '$.status', 'zombie') "
        "WHERE task_id = 'bad'",
    )
    return str(path)


_LINE = "error: task 'bad' cannot be read: status 'zombie' is not a status"


def test_ps_lists_the_readable_tasks_names_the_damaged_one_and_exits_1(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "ps"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["good", "other"]
    lines = err.splitlines()
    assert lines[0].startswith("warning: 2 unfinished task(s) with an expired lease")
    assert lines[1] == _LINE
    assert lines[2].startswith(
        "chongming-task: error: 1 stored row could not be read (named above); every other "
        "task was listed. A damaged row was written by another program or by hand: restore"
    )
    assert len(lines) == 3


def test_ps_json_stays_one_document_of_the_readable_tasks(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "ps", "--json"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert [task["task_id"] for task in json.loads(out)] == ["good", "other"]
    assert _LINE in err.splitlines()


def test_status_of_the_damaged_task_says_what_is_wrong_in_one_line(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("status", "history", "stop"):
        assert main(["--db", db, command, "bad"]) == EXIT_FAILED
        out, err = capsys.readouterr()
        assert out == ""
        (line,) = err.splitlines()
        assert line.startswith("chongming-task: error: store error: SQLite task store ")
        assert "task 'bad' cannot be read: status 'zombie' is not a status" in line
        assert "restore it from a backup" in line
    assert main(["--db", db, "status", "good"]) == EXIT_OK


def test_stats_counts_the_others_and_names_the_row_counted_under_no_status(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", db, "stats", "--json"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    counts = json.loads(out)
    assert (counts["running"], counts["total"]) == (2, 2)
    assert _LINE in err.splitlines()
    assert "they are counted under no status" in err


def test_reconcile_marks_the_others_and_reports_the_damaged_row(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _damage(Path(db), "UPDATE tasks SET data = '{nope' WHERE task_id = 'other'")
    assert main(["--db", db, "reconcile", "--dry-run", "--json"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert [task["task_id"] for task in report["lost"]] == ["good"]
    assert [row["task_id"] for row in report["unreadable"]] == ["other"]
    assert report["unreadable"][0]["problem"].startswith("its document is not JSON")
    assert "task 'other' cannot be read: its document is not JSON" in err
    assert main(["--db", db, "reconcile"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "reconcile: marked 1 lost, 0 adoptable, 0 skipped, 1 unreadable"
    assert "those tasks were not judged and are left as they are" in err
    with SqliteTaskStore(db) as store:
        good = store.get("good")
        assert good is not None
        assert good.status.value == "lost"


def test_history_lists_the_readable_transitions_and_names_the_damaged_one(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _damage(
        Path(db),
        "UPDATE transitions SET at = 'noon' WHERE task_id = 'good' AND status_version = 2",
    )
    assert main(["--db", db, "history", "good"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["1", "3"]
    assert (
        "error: history entry 2 of task 'good' cannot be read: at 'noon' is not an ISO-8601 time"
        in err.splitlines()
    )
    assert "every other transition was listed" in err


def test_many_damaged_rows_are_named_up_to_twenty_then_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "many.db"
    _write(path, [f"t{i:02}" for i in range(25)])
    _damage(path, "UPDATE tasks SET data = json_set(data, '$.attempts', 'oops')")
    assert main(["--db", str(path), "ps"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    named = [line for line in err.splitlines() if line.startswith("error: task ")]
    assert len(named) == 20
    assert "error: and 5 more rows that cannot be read" in err.splitlines()
    assert "25 stored rows could not be read" in err
    assert len(out.splitlines()) == 2  # the header and its rule: nothing else reads
