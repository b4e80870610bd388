"""Tables, migrations, roles without DDL rights, native types, and NUL bytes."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from chongming_core import (
    Failure,
    FailureKind,
    Progress,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskStatus,
    TouchUpdate,
)
from chongming_store_contract import BASE_TIME, build_command, build_task, next_version
from chongming_store_postgres import PostgresTaskStore
from chongming_store_postgres._schema import (
    CREATE_SCHEMA,
    CREATE_VERSION_TABLE,
    MIGRATIONS,
    SCHEMA_VERSION,
    WRITE_VERSION,
    table_names,
)

pytestmark = pytest.mark.postgres
Admin = psycopg.Connection[tuple[Any, ...]]
NUL_MESSAGE = r"contains a NUL byte \(\\x00\), which PostgreSQL cannot store"


def _tables(admin: Admin, schema: str) -> set[str]:
    rows = admin.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [schema]
    ).fetchall()
    return {r[0] for r in rows}


# ---------------------------------------------------------------------- bootstrap
def test_first_connect_creates_schema_tables_indexes_and_version(
    store: PostgresTaskStore, admin: Admin
) -> None:
    assert _tables(admin, store.schema) == {
        "tasks",
        "transitions",
        "commands",
        "workers",
        "schema_version",
    }
    version = admin.execute(
        sql.SQL("SELECT version FROM {}").format(sql.Identifier(store.schema, "schema_version"))
    ).fetchone()
    assert version == (SCHEMA_VERSION,)
    indexes: dict[str, str] = dict(
        admin.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", [store.schema]
        ).fetchall()
    )
    assert "text_pattern_ops" in indexes["tasks_name_prefix_idx"]
    assert "USING gin (tags)" in indexes["tasks_tags_idx"]
    for name in (
        "tasks_status_idx",
        "tasks_bucket_idx",
        "tasks_lease_idx",
        "tasks_lease_until_idx",
        "tasks_finished_at_idx",
        "tasks_pipeline_idx",
        "commands_open_idx",
        "commands_task_idx",
    ):
        assert name in indexes
    assert "WHERE (completed_at IS NULL)" in indexes["commands_open_idx"]
    assert (
        "(priority DESC, seq) WHERE (durable AND (status = 'queued'::text))"
        in (indexes["tasks_claim_idx"])
    )


def test_native_column_types(store: PostgresTaskStore, admin: Admin) -> None:
    rows = admin.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s",
        [store.schema],
    ).fetchall()
    types = {(t, c): d for t, c, d in rows}
    assert types["tasks", "tags"] == "ARRAY"
    assert types["tasks", "failure"] == "jsonb"
    assert types["tasks", "attempts"] == "jsonb"
    assert types["tasks", "outcome"] == "json"  # keeps the user's numbers as written
    assert types["tasks", "progress"] == "json"
    assert types["tasks", "seq"] == "bigint"
    for column in ("created_at", "updated_at", "finished_at", "lease_until", "retry_at"):
        assert types["tasks", column] == "timestamp with time zone"
    assert types["transitions", "at"] == "timestamp with time zone"
    assert types["commands", "issued_at"] == "timestamp with time zone"


def test_a_second_store_on_existing_tables_runs_no_ddl(
    store: PostgresTaskStore, make_store: Callable[..., PostgresTaskStore], admin: Admin
) -> None:
    store.create(*build_task("t1", TaskStatus.RUNNING))
    other = make_store()
    assert other.get("t1") == store.get("t1")


def test_stores_starting_at_once_create_the_tables_once(
    make_store: Callable[..., PostgresTaskStore], admin: Admin, schema: str
) -> None:
    barrier = threading.Barrier(6, timeout=30)
    errors: list[BaseException] = []
    stores: list[PostgresTaskStore] = []

    def start() -> None:
        try:
            barrier.wait()
            stores.append(make_store(min_size=0, max_size=1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(stores) == 6
    assert _tables(admin, schema) == {
        "tasks",
        "transitions",
        "commands",
        "workers",
        "schema_version",
    }
    count = admin.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "schema_version"))
    ).fetchone()
    assert count == (1,)


def test_a_newer_schema_version_is_refused(
    store: PostgresTaskStore, make_store: Callable[..., PostgresTaskStore], admin: Admin
) -> None:
    admin.execute(
        sql.SQL("UPDATE {} SET version = %s").format(
            sql.Identifier(store.schema, "schema_version")
        ),
        [SCHEMA_VERSION + 5],
    )
    with pytest.raises(StoreError, match=f"version {SCHEMA_VERSION + 5}") as info:
        make_store()
    assert "upgrade chongming-store-postgres" in str(info.value)


def test_an_older_schema_version_is_migrated_forward(
    store: PostgresTaskStore, make_store: Callable[..., PostgresTaskStore], admin: Admin
) -> None:
    admin.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(store.schema, "schema_version")))
    make_store()
    version = admin.execute(
        sql.SQL("SELECT version FROM {}").format(sql.Identifier(store.schema, "schema_version"))
    ).fetchone()
    assert version == (SCHEMA_VERSION,)


def test_tables_of_version_1_gain_paused_seconds_and_keep_their_rows(
    make_store: Callable[..., PostgresTaskStore], admin: Admin, schema: str
) -> None:
    """A store written by the previous release (no ``paused_seconds`` column) is migrated
    on connect; its rows read 0 s paused (no pause was counted then) and new writes keep
    the field."""
    names = table_names(schema)
    admin.execute(sql.SQL(CREATE_SCHEMA).format(**names))
    admin.execute(sql.SQL(CREATE_VERSION_TABLE).format(**names))
    for statement in MIGRATIONS[1]:
        admin.execute(sql.SQL(statement).format(**names))
    admin.execute(sql.SQL(WRITE_VERSION).format(**names), {"version": 1})
    admin.execute(
        sql.SQL(
            "INSERT INTO {} (task_id, name, status, status_version, attempt, max_attempts, "
            "priority, id_fold, name_fold, label_fold) "
            "VALUES ('old', 'job', 'running', 3, 1, 1, 0, 'old', 'job', '')"
        ).format(sql.Identifier(schema, "tasks"))
    )
    store = make_store()
    old = store.get("old")
    assert old is not None
    assert (old.status, old.paused_seconds) == (TaskStatus.RUNNING, 0.0)
    snapshot, transitions = build_task("new", TaskStatus.RUNNING)
    store.create(snapshot.evolve(paused_seconds=12.5), transitions)
    assert store.get("new").paused_seconds == 12.5  # type: ignore[union-attr]
    version = admin.execute(
        sql.SQL("SELECT version FROM {}").format(sql.Identifier(schema, "schema_version"))
    ).fetchone()
    assert version == (SCHEMA_VERSION,) == (3,)


def test_schema_names_are_identifiers_not_sql(
    postgres_dsn: str, make_store: Callable[..., PostgresTaskStore], admin: Admin
) -> None:
    name = f'odd "name"; DROP TABLE x; -- 数据 {uuid.uuid4().hex[:8]}'
    try:
        odd = make_store(schema=name)
        odd.create(*build_task("t1"))
        assert [s.task_id for s in odd.query()] == ["t1"]
        assert _tables(admin, name) == {
            "tasks",
            "transitions",
            "commands",
            "workers",
            "schema_version",
        }
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


# ---------------------------------------------------------------------- roles
@pytest.fixture
def dml_role(postgres_dsn: str, store: PostgresTaskStore, admin: Admin) -> Iterator[str]:
    """A LOGIN role with USAGE on the store's schema and DML on its tables, and no CREATE."""
    role = f"chongming_dml_{uuid.uuid4().hex[:12]}"
    ident = sql.Identifier(role)
    schema = sql.Identifier(store.schema)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
    try:
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, ident))
        admin.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
                schema, ident
            )
        )
        yield role
    finally:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role]
        )
        admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def _as_role(dsn: str, role: str) -> str:
    params: dict[str, Any] = {**conninfo_to_dict(dsn), "user": role}
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def test_a_role_without_ddl_rights_uses_existing_tables(
    postgres_dsn: str,
    store: PostgresTaskStore,
    make_store: Callable[..., PostgresTaskStore],
    dml_role: str,
    admin: Admin,
) -> None:
    limited = make_store(dsn=_as_role(postgres_dsn, dml_role))
    user = limited.get  # every kind of statement, as the limited role
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    limited.create(snapshot, chain)
    nxt, more = next_version(snapshot)
    limited.save(nxt, expect_version=snapshot.status_version, transitions=more)
    assert user("t1") == nxt
    assert limited.touch("t1", progress=Progress(done=1))
    assert limited.query(TaskQuery(name_prefix="jo")) == [store.get("t1")]
    limited.submit_command(build_command("c1", "t1"))
    assert [c.command_id for c in limited.claim_commands("n", now=BASE_TIME, lease_seconds=5)] == [
        "c1"
    ]
    assert limited.prune(0) == 0
    who = admin.execute(
        "SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name = %s",
        [limited.application_name],
    ).fetchall()
    assert who == [(dml_role,)]


def test_a_role_without_ddl_rights_on_a_missing_schema_gets_a_clear_error(
    postgres_dsn: str, make_store: Callable[..., PostgresTaskStore], dml_role: str
) -> None:
    missing = f"chongming_missing_{uuid.uuid4().hex}"
    with pytest.raises(StoreError, match="may not create them") as info:
        make_store(dsn=_as_role(postgres_dsn, dml_role), schema=missing)
    assert "USAGE on the schema" in str(info.value)


# ---------------------------------------------------------------------- NUL bytes
NUL = "before\x00after"


def test_nul_in_text_fields_is_refused_before_anything_is_written(store: PostgresTaskStore) -> None:
    snapshot, chain = build_task("base", TaskStatus.SUCCEEDED)
    failing = {
        "id": snapshot.evolve(task_id=NUL),
        "name": snapshot.evolve(task_id="name", name=NUL),
        "label": snapshot.evolve(task_id="label", label=NUL),
        "tag": snapshot.evolve(task_id="tag", tags=frozenset({"ok", NUL})),
        "lease_owner": snapshot.evolve(task_id="owner", lease_owner=NUL),
        "failure": snapshot.evolve(
            task_id="failure", failure=Failure.of(FailureKind.EXCEPTION, NUL)
        ),
    }
    for field, candidate in failing.items():
        with pytest.raises(StoreError, match=NUL_MESSAGE) as info:
            store.create(candidate)
        assert field in str(info.value) or field == "id"
        assert info.value.__cause__ is None  # refused by the store, not by the driver
    bad_reason = [dataclasses.replace(chain[0], task_id="reason", reason=NUL)]
    with pytest.raises(StoreError, match=NUL_MESSAGE):
        store.create(snapshot.evolve(task_id="reason"), bad_reason)
    assert store.query() == []
    assert store.history("reason") == []


def test_nul_in_one_item_of_save_many_writes_no_item(store: PostgresTaskStore) -> None:
    good, good_chain = build_task("good", TaskStatus.QUEUED)
    bad, bad_chain = build_task("bad", TaskStatus.QUEUED, label=NUL)
    with pytest.raises(StoreError, match=NUL_MESSAGE):
        store.save_many(
            [SnapshotWrite(good, None, good_chain), SnapshotWrite(bad, None, bad_chain)]
        )
    assert store.query() == []


def test_nul_in_appends_commands_and_touches_is_refused(store: PostgresTaskStore) -> None:
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    store.create(snapshot, chain[:1])
    with pytest.raises(StoreError, match=NUL_MESSAGE):
        store.append([chain[1], dataclasses.replace(chain[2], actor=NUL)])
    assert store.history("t1") == list(chain[:1])
    with pytest.raises(StoreError, match=NUL_MESSAGE):
        store.submit_command(build_command("c1", "t1", reason=NUL))
    assert store.commands() == []
    with pytest.raises(StoreError, match=NUL_MESSAGE):
        store.touch_many([TouchUpdate("t1", pid=1), TouchUpdate("t1", lease_owner=NUL)])
    assert store.get("t1") == snapshot
    with pytest.raises(StoreError, match=NUL_MESSAGE):
        store.claim_commands(NUL, now=BASE_TIME, lease_seconds=1)


def test_lookups_with_a_nul_find_nothing(store: PostgresTaskStore) -> None:
    store.create(*build_task("t1"))
    assert store.get(NUL) is None
    assert store.history(NUL) == []
    assert store.query(TaskQuery(search=NUL)) == []
    assert store.query(TaskQuery(task_ids=frozenset({NUL, "t1"})))[0].task_id == "t1"
    assert store.status_counts(TaskQuery(name_prefix=NUL)) == {}
    assert store.touch(NUL, pid=1) is False
    assert store.commands(task_id=NUL) == []
    assert store.complete_command(NUL, owner="n", now=BASE_TIME, result="x") is False


def test_nul_inside_outcome_and_progress_round_trips(store: PostgresTaskStore) -> None:
    """Outcome and progress are ``json`` columns, which keep an escaped NUL."""
    snapshot, chain = build_task("t1", TaskStatus.SUCCEEDED)
    odd = snapshot.evolve(outcome={"raw": NUL, NUL: [NUL]})
    store.create(odd, chain)
    assert store.get("t1") == odd
    assert store.touch("t1", progress=Progress(done=1, message=NUL))
    found = store.get("t1")
    assert found is not None
    assert found.progress == Progress(done=1, message=NUL)


def test_values_json_cannot_carry_are_refused(store: PostgresTaskStore) -> None:
    snapshot, chain = build_task("t1", TaskStatus.SUCCEEDED)
    for outcome in (float("nan"), {"x": float("inf")}, {1, 2}, object()):
        with pytest.raises(StoreError, match="cannot be stored as JSON"):
            store.create(snapshot.evolve(outcome=outcome), chain)
    assert store.get("t1") is None


def test_an_outcome_beyond_what_one_value_holds_is_refused(
    store: PostgresTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL keeps at most 1 GiB in a value; the limit is lowered here to 1,000 bytes
    (counted in UTF-8: 300 CJK characters are 900 bytes, 400 are 1,200)."""
    from chongming_store_postgres import _codec

    monkeypatch.setattr(_codec, "OUTCOME_LIMIT", 1000)
    snapshot, chain = build_task("t1", TaskStatus.SUCCEEDED)
    fits, too_big = "数" * 300, {"rows": ["数" * 400]}
    assert store.stored_outcome(fits) == fits
    with pytest.raises(ValueError, match=r"the result is 1,213 bytes of JSON, more than the 1,000"):
        store.stored_outcome(too_big)
    with pytest.raises(
        StoreError, match="task 't1' outcome cannot be stored as JSON: the result is 1,213"
    ):
        store.create(snapshot.evolve(outcome=too_big), chain)
    assert store.get("t1") is None
    store.create(snapshot.evolve(outcome=fits), chain)
    found = store.get("t1")
    assert found is not None
    assert found.outcome == fits


def test_a_naive_datetime_is_refused(store: PostgresTaskStore) -> None:
    snapshot, _ = build_task("t1")
    naive = BASE_TIME.replace(tzinfo=None)
    with pytest.raises(StoreError, match="naive datetime"):
        store.create(snapshot.evolve(created_at=naive))
    store.create(snapshot)
    with pytest.raises(StoreError, match="naive datetime"):
        store.touch("t1", lease_until=naive + timedelta(seconds=1))


def test_an_integer_too_large_for_bigint_is_a_store_error(store: PostgresTaskStore) -> None:
    snapshot, _ = build_task("t1")
    with pytest.raises(StoreError, match=r"64 bits|out of range"):
        store.create(snapshot.evolve(priority=2**70))
    assert store.get("t1") is None


def test_times_come_back_as_the_same_instants_in_utc(store: PostgresTaskStore) -> None:
    snapshot, chain = build_task("t1", TaskStatus.RUNNING)
    store.create(snapshot, chain)
    found = store.get("t1")
    assert found is not None
    assert found.created_at == snapshot.created_at
    assert found.created_at is not None
    assert found.created_at.utcoffset() == timedelta(0)


def test_the_writes_refuse_what_the_store_s_own_check_refuses(
    postgres_dsn: str, schema: str
) -> None:
    """A subclass with a stricter `stored_outcome` is held to it by every write."""

    class Strict(PostgresTaskStore):
        def stored_outcome(self, value: Any) -> Any:
            if value == "forbidden":
                raise ValueError("the result is the forbidden word")
            return super().stored_outcome(value)

    with Strict(postgres_dsn, schema=schema, max_size=2) as store:
        snapshot, chain = build_task("t1", TaskStatus.SUCCEEDED)
        with pytest.raises(StoreError, match="the result is the forbidden word"):
            store.save_many([SnapshotWrite(snapshot.evolve(outcome="forbidden"), None, chain)])
        assert store.get("t1") is None
