"""``create=False``: open only an existing store, and change nothing on the way.

A console's query must not turn a mistyped path, an empty file or an old store
into a new store (or a migrated one): each is refused with `StoreNotFound`, which
says what was found, and the file is left exactly as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chongming_core import StoreError, StoreNotFound, TaskStatus
from chongming_store_contract import build_task
from chongming_store_sqlite import SqliteTaskStore
from chongming_store_sqlite._schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from chongming_store_sqlite._url import store_from_url


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _not_found(path: Path) -> StoreNotFound:
    with pytest.raises(StoreNotFound) as caught:
        SqliteTaskStore(path, create=False)
    assert str(path) in str(caught.value)
    return caught.value


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    error = _not_found(tmp_path / "typo.db")
    assert error.found == "the file does not exist"
    assert error.schema_version is None
    assert "nothing was created" in str(error)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_a_missing_store(tmp_path: Path) -> None:
    error = _not_found(tmp_path / "no-such-dir" / "tasks.db")
    assert error.found == "the file does not exist"
    assert list(tmp_path.iterdir()) == []


def test_an_empty_file_is_not_turned_into_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    error = _not_found(path)
    assert error.found == "the file is empty"
    assert _files(tmp_path) == {"empty.db": b""}


def test_a_sqlite_database_without_the_tables_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    raw = sqlite3.connect(path)
    raw.execute("VACUUM")  # writes a header: a valid, empty SQLite database
    raw.close()
    before = _files(tmp_path)
    assert before["blank.db"]  # not 0 bytes: the header is there
    error = _not_found(path)
    assert "without the chongming tables" in error.found
    assert _files(tmp_path) == before


def _store_at_schema_1(path: Path) -> None:
    raw = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()


def test_an_older_schema_is_not_migrated_but_create_true_migrates_it(tmp_path: Path) -> None:
    assert SCHEMA_VERSION > 1
    path = tmp_path / "old.db"
    _store_at_schema_1(path)
    before = _files(tmp_path)
    error = _not_found(path)
    assert error.schema_version == 1
    assert f"schema {SCHEMA_VERSION}" in str(error)
    assert "create=True" in str(error)
    assert _files(tmp_path) == before
    with SqliteTaskStore(path) as store:  # the default migrates
        store.create(*build_task("t1"))
    with SqliteTaskStore(path, create=False) as store:
        assert store.get("t1") is not None


def test_a_foreign_or_newer_file_is_still_a_plain_store_error(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE notes (body TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="another application") as caught:
        SqliteTaskStore(path, create=False)
    assert not isinstance(caught.value, StoreNotFound)  # creating would not help either


def test_an_existing_store_opens_and_keeps_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path) as store:
        store.create(*build_task("t1", TaskStatus.RUNNING))
    with SqliteTaskStore(path, create=False) as store:
        found = store.get("t1")
        assert found is not None
        assert found.status is TaskStatus.RUNNING
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        raw.close()


def test_the_url_factory_passes_create_on(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(StoreNotFound):
        store_from_url(f"sqlite:///{path}", create=False)
    with pytest.raises(StoreNotFound):
        store_from_url(str(path), create=False)
    assert not path.exists()
    with store_from_url(f"sqlite:///{path}") as store:
        assert store.path == str(path)
