"""Only ``run`` creates or migrates a store: every other command opens an existing one.

A missing file, an empty file, a SQLite database without the tables and a store
at an older schema are each reported in one line that says what is there and how
to make (or upgrade) a store, and the file is left exactly as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_cli import EXIT_FAILED, EXIT_OK, main
from chongming_store_sqlite._schema import APPLICATION_ID, MIGRATIONS

TASKS = ["--tasks", "chongming_cli.demo_tasks"]
COMMANDS = [
    ["ps"],
    ["status", "t1"],
    ["history", "t1"],
    ["stats"],
    ["buckets"],
    ["reconcile", "--dry-run"],
    ["dashboard"],
    ["stop", "t1"],
    ["pause", "t1"],
    ["resume", "t1"],
    ["reconcile"],
    ["prune", "--keep-terminal", "1"],
]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("CHONGMING_DB", "CHONGMING_DSN", "CHONGMING_OWNED_BUCKETS", "CHONGMING_OWNER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


def _missing(path: Path) -> None:
    del path


def _empty(path: Path) -> None:
    path.touch()


def _blank(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("VACUUM")  # a valid SQLite header and nothing else
    raw.close()


def _schema_1(path: Path) -> None:
    raw = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()


def _folder(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}


@pytest.mark.parametrize(
    ("make", "found"),
    [
        (_missing, "the file does not exist"),
        (_empty, "the file is empty"),
        (_blank, "the file is a SQLite database without the chongming tables"),
    ],
    ids=["missing", "empty", "blank-sqlite"],
)
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_no_command_but_run_makes_a_store(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], None],
    found: str,
    argv: list[str],
) -> None:
    make(tmp_path / "tasks.db")
    before = _folder(tmp_path)
    assert main(["--db", "tasks.db", *argv]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        f"chongming-task: error: no task database at 'tasks.db' (from --db): {found}; "
    )
    assert (
        "create one by running a task: chongming-task --db tasks.db run TASK --tasks MODULE" in err
    )
    assert _folder(tmp_path) == before


def test_run_makes_the_store_the_queries_then_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _empty(tmp_path / "tasks.db")
    assert main(["--db", "tasks.db", "run", "transform", *TASKS, "--task-id", "t1"]) == EXIT_OK
    capsys.readouterr()
    assert main(["--db", "tasks.db", "status", "t1"]) == EXIT_OK
    assert "succeeded" in capsys.readouterr().out


def test_an_older_store_is_not_migrated_by_a_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _schema_1(tmp_path / "old.db")
    before = _folder(tmp_path)
    for argv in COMMANDS:
        assert main(["--db", "old.db", *argv]) == EXIT_FAILED
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "holds a store at the older schema 1" in err
        assert "Upgrade it by opening it for writing once" in err
        assert "chongming-task --db old.db run TASK --tasks MODULE" in err
        assert _folder(tmp_path) == before
    assert main(["--db", "old.db", "run", "transform", *TASKS, "--task-id", "t1"]) == EXIT_OK
    assert main(["--db", "old.db", "ps"]) == EXIT_OK
