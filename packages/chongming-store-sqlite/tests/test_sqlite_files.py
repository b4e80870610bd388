"""The database file: WAL, permissions, identity, refusals that leave files unchanged."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_core import StateMachine, StoreError, TaskStatus
from chongming_store_contract import build_task
from chongming_store_sqlite import SqliteTaskStore
from chongming_store_sqlite._schema import APPLICATION_ID, SCHEMA_VERSION

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions and fork")


def make_store_file(path: Path, tasks: int = 3) -> None:
    """A closed store file holding a few tasks (its WAL checkpointed and removed)."""
    with SqliteTaskStore(path) as store:
        for i in range(tasks):
            store.create(*build_task(f"t{i}", TaskStatus.RUNNING))


def refusal(path: Path | str) -> str:
    """The StoreError message of opening `path`; asserts no sqlite3 error leaks."""
    with pytest.raises(StoreError) as caught:
        SqliteTaskStore(path)
    assert not isinstance(caught.value, sqlite3.Error)
    return str(caught.value)


def test_a_new_file_is_owner_only_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    old = os.umask(0o022)
    try:
        store = SqliteTaskStore(path)
    finally:
        os.umask(old)
    try:
        store.create(*build_task("t1"))
        if sys.platform != "win32":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            wal = Path(f"{path}-wal")
            assert wal.exists()
            assert stat.S_IMODE(wal.stat().st_mode) == 0o600
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        raw.close()
    finally:
        store.close()


@posix_only
def test_a_restrictive_umask_still_gives_the_owner_read_and_write(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    old = os.umask(0o277)
    try:
        SqliteTaskStore(path).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    make_store_file(path)
    path.chmod(0o640)
    SqliteTaskStore(path).close()
    if sys.platform != "win32":
        assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_data_survives_reopening_and_close_then_delete_works(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    built = build_task("t1", TaskStatus.SUCCEEDED, tags={"io"})
    with SqliteTaskStore(path) as store:
        store.create(*built)
    store = SqliteTaskStore(path)
    assert store.get("t1") == built.snapshot
    assert store.history("t1") == list(built.transitions)
    store.close()
    store.close()  # idempotent
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    assert list(tmp_path.iterdir()) == []


def test_close_releases_connections_opened_by_other_threads(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    store.create(*build_task("t1"))
    barrier = threading.Barrier(4)

    def reader() -> None:
        barrier.wait(timeout=10)
        for _ in range(20):
            assert store.get("t1") is not None

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    store.close()
    # Only a connection-free file can be opened in exclusive locking mode by a newcomer,
    # and the last close removes the WAL files.
    assert not os.path.exists(f"{path}-wal")
    assert not os.path.exists(f"{path}-shm")
    raw = sqlite3.connect(path)
    try:
        raw.execute("PRAGMA locking_mode = EXCLUSIVE")
        raw.execute("BEGIN EXCLUSIVE")
        raw.execute("ROLLBACK")
    finally:
        raw.close()


def test_every_call_after_close_raises_store_error(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    store = SqliteTaskStore(tmp_path / "tasks.db")
    store.close()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    calls: list[Callable[[], object]] = [
        lambda: store.get("t1"),
        lambda: store.create(*build_task("t2")),
        lambda: store.save_many([]),
        store.query,
        store.status_counts,
        lambda: store.append([]),
        lambda: store.history("t1"),
        lambda: store.touch("t1"),
        lambda: store.touch_many([]),
        lambda: store.claim_commands("me", now=now, lease_seconds=1),
        store.commands,
        lambda: store.prune(0),
        lambda: store.archive(finished_before=now, path=tmp_path / "a.jsonl"),
    ]
    for call in calls:
        with pytest.raises(StoreError, match="closed"):
            call()
    assert "closed" in repr(store)


# ---------------------------------------------------------------------- refusals
def test_a_newer_schema_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    make_store_file(path)
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    raw.close()
    before = path.read_bytes()
    message = refusal(path)
    assert str(path) in message
    assert f"newer chongming (schema {SCHEMA_VERSION + 5})" in message
    assert "upgrade chongming-store-sqlite" in message
    assert path.read_bytes() == before


def test_a_database_of_another_application_is_refused_and_left_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA application_id = 1234")
    raw.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    raw.execute("INSERT INTO accounts (owner) VALUES ('alice')")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    message = refusal(path)
    assert str(path) in message
    assert "another application" in message
    assert path.read_bytes() == before


def test_a_database_without_application_id_but_with_tables_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE notes (body TEXT)")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    message = refusal(path)
    assert "another application" in message
    assert "no application id" in message
    assert path.read_bytes() == before


def test_an_empty_file_becomes_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    path.touch()
    with SqliteTaskStore(path) as store:
        store.create(*build_task("t1"))
        assert store.get("t1") is not None


def test_a_file_that_is_not_a_database_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = path.read_bytes()
    message = refusal(path)
    assert str(path) in message
    assert "not a SQLite database" in message
    assert path.read_bytes() == before
    assert not os.path.exists(f"{path}-wal")


@pytest.mark.parametrize("keep", [0.5, 0.99, 40 / 4096])
def test_a_truncated_file_is_refused_and_left_unchanged(tmp_path: Path, keep: float) -> None:
    path = tmp_path / "tasks.db"
    make_store_file(path, tasks=40)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    before = path.read_bytes()
    message = refusal(path)
    assert str(path) in message
    assert "truncated" in message
    assert path.read_bytes() == before


def open_and_read(path: Path) -> None:
    """Open a store and read every task (the damage may show at either step)."""
    with SqliteTaskStore(path) as store:
        store.query()


def test_a_damaged_page_is_reported_as_store_error_not_sqlite_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    make_store_file(path, tasks=60)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for offset in range(page, len(data)):  # every page but the first
        data[offset] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as caught:
        open_and_read(path)
    message = str(caught.value)
    assert str(path) in message
    assert "damaged" in message
    assert isinstance(caught.value.__cause__, sqlite3.Error)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    message = refusal(tmp_path)
    assert str(tmp_path) in message
    assert "is a directory" in message
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "tasks.db"
    message = refusal(path)
    assert str(path) in message
    assert "does not exist" in message
    assert not path.parent.exists()


@posix_only
def test_an_unreadable_file_is_refused_and_left_unchanged() -> None:
    # A directory every user can traverse (pytest's tmp_path is private to its owner).
    directory = Path(tempfile.mkdtemp(prefix="chongming-perm-"))
    try:
        directory.chmod(0o755)
        path = directory / "tasks.db"
        make_store_file(path)
        before = path.read_bytes()
        path.chmod(0o000)
        try:
            message = _open_unprivileged(path)
        finally:
            path.chmod(0o600)
        assert str(path) in message
        assert "permission denied" in message
        assert path.read_bytes() == before
        assert sorted(p.name for p in directory.iterdir()) == ["tasks.db"]
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@posix_only
def test_an_unreachable_directory_is_reported_as_such() -> None:
    directory = Path(tempfile.mkdtemp(prefix="chongming-perm-"))
    try:
        directory.chmod(0o755)
        private = directory / "private"
        private.mkdir(mode=0o700)
        message = _open_unprivileged(private / "tasks.db")
        assert str(private / "tasks.db") in message
        assert "permission denied" in message
        assert str(private) in message
        assert list(private.iterdir()) == []
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _open_unprivileged(path: Path) -> str:
    """The StoreError message of opening `path` as a user without root's override."""
    if os.geteuid() != 0:
        return refusal(path)
    # root reads any file: drop to 'nobody' in a forked child, which has every
    # module loaded already and only reports the error text back through a pipe.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            try:
                SqliteTaskStore(path).close()
                text = "opened without error"
            except StoreError as exc:
                text = f"StoreError: {exc}"
            except BaseException as exc:
                text = f"{type(exc).__name__}: {exc}"
            os.write(write_end, text.encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        text = reader.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert text.startswith("StoreError: "), text
    return text.removeprefix("StoreError: ")


def test_a_store_file_from_an_older_schema_is_migrated(tmp_path: Path) -> None:
    """A chongming file at schema 0 (created, then interrupted before its tables) upgrades."""
    path = tmp_path / "tasks.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.commit()
    raw.close()
    with SqliteTaskStore(path) as store:
        store.create(*build_task("t1"))
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"busy_timeout": 0}, "busy_timeout"),
        ({"busy_timeout": -1.0}, "busy_timeout"),
        ({"busy_timeout": True}, "busy_timeout"),
        ({"synchronous": "off"}, "synchronous"),
    ],
)
def test_invalid_arguments_are_refused(
    tmp_path: Path, kwargs: dict[str, object], fragment: str
) -> None:
    from chongming_core import ConfigurationError

    with pytest.raises(ConfigurationError, match=fragment):
        SqliteTaskStore(tmp_path / "tasks.db", **kwargs)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_an_empty_path_is_refused() -> None:
    from chongming_core import ConfigurationError

    with pytest.raises(ConfigurationError, match="path"):
        SqliteTaskStore("")


def test_the_write_ahead_log_shrinks_back_after_a_long_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader holding a transaction keeps the log from being reset, so it grows with every
    write; once the reader is gone a checkpoint truncates it back to the limit (it used to
    keep its largest size, gigabytes, for as long as the store stayed open)."""
    import chongming_store_sqlite._store as sqlite_store

    monkeypatch.setattr(sqlite_store, "WAL_SIZE_LIMIT", 32 * 1024)
    db = tmp_path / "tasks.db"
    wal = Path(f"{db}-wal")
    with SqliteTaskStore(db) as store:
        store.create(StateMachine.create("first", "x").snapshot)
        reader = sqlite3.connect(db)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM tasks").fetchone()
            for index in range(800):
                store.create(StateMachine.create(f"t{index}", "x", label="y" * 200).snapshot)
            grown = wal.stat().st_size
        finally:
            reader.close()
        for index in range(800, 1100):
            store.create(StateMachine.create(f"t{index}", "x", label="y" * 200).snapshot)
        assert grown > 10 * 1024 * 1024
        assert wal.stat().st_size < grown / 10


@posix_only
def test_a_url_names_a_file_that_is_not_utf8_by_its_percent_encoded_bytes(
    tmp_path: Path,
) -> None:
    """``%FF`` is the byte 0xff of the file name (as `os.fsdecode` reads it), not U+FFFD,
    which would open, and create, another file."""
    from chongming_store_sqlite._url import store_from_url

    target = os.fsdecode(os.fsencode(tmp_path) + b"/\xff.db")
    make_store_file(Path(target))
    with store_from_url(f"sqlite:///{tmp_path}/%FF.db") as store:
        assert store.get("t0") is not None
    with store_from_url(f"sqlite:///{tmp_path}/%E4%BB%BB.db") as store:
        store.create(*build_task("t9", TaskStatus.RUNNING))
    names = os.listdir(os.fsencode(tmp_path))
    assert b"\xff.db" in names
    assert "任.db".encode() in names
    assert "\ufffd.db".encode() not in names
