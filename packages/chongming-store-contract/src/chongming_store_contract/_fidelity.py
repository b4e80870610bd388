"""Contract cases: every value a store keeps comes back exactly as it was given."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

from chongming_core import (
    AttemptRecord,
    Failure,
    FailureKind,
    Progress,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import BASE_TIME, build_command, next_version
from chongming_store_contract._checks import (
    expect,
    expect_equal,
    present,
    same_json,
    short_repr,
)

__all__ = [
    "SQL_TEXTS",
    "UNICODE_TEXTS",
    "FidelityContract",
    "expect_same_snapshot",
    "rich_snapshot",
]

_S = TaskStatus

#: Text in many scripts: CJK, emoji (with joiners and flags), right-to-left, combining marks.
UNICODE_TEXTS: tuple[str, ...] = (
    "数据同步：租户A（第 3 批）",
    "データ移行・ｶﾀｶﾅ・한국어",
    "deploy 🚀🔥 👩‍💻 🇨🇳 🏳️‍🌈",
    "مرحبا بالعالم — שלום עולם",
    "e\u0301 a\u0308 \u200b\u200dzero-width",
    "tab\tnew\nline\r\nend",
)

#: Text that breaks naive SQL or quoting.
SQL_TEXTS: tuple[str, ...] = (
    "'; DROP TABLE x; --",
    "\"\\'",
    "Robert'); DROP TABLE tasks;--",
    "50%_off \\ back\\\\slash",
    "$1 ? :name %s {0} /* c */ -- tail",
    "''''\"\"\"\"",
)

_UTC8 = timezone(timedelta(hours=8))
_WEST = timezone(timedelta(hours=-5, minutes=-30))
_FAR = timezone(timedelta(hours=14))


def expect_same_snapshot(found: TaskSnapshot | None, expected: TaskSnapshot, what: str) -> None:
    """Compare field by field, so a failure names the field (and the failure's traceback)."""
    found = present(found, f"{what}: task {expected.task_id!r}")
    for field in dataclasses.fields(TaskSnapshot):
        expect_equal(
            getattr(found, field.name), getattr(expected, field.name), f"{what}: {field.name}"
        )
    expect_equal(
        None if found.failure is None else found.failure.traceback,
        None if expected.failure is None else expected.failure.traceback,
        f"{what}: failure.traceback",
    )
    expect_equal(
        [None if a.failure is None else a.failure.traceback for a in found.attempts],
        [None if a.failure is None else a.failure.traceback for a in expected.attempts],
        f"{what}: attempts[*].failure.traceback",
    )
    expect(
        same_json(found.outcome, expected.outcome),
        f"{what}: outcome types differ: expected {short_repr(expected.outcome)}, "
        f"found {short_repr(found.outcome)}",
    )


def _failure_with_traceback() -> Failure:
    try:
        raise ValueError("bad row 17: '; DROP TABLE x; -- 数据")
    except ValueError as exc:
        return Failure.from_exception(exc)


def rich_snapshot(task_id: str) -> TaskSnapshot:
    """A snapshot in which every field holds a non-default value."""
    failure = _failure_with_traceback()
    start = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=_UTC8)
    return TaskSnapshot(
        task_id=task_id,
        name="etl.同步",
        status=_S.RETRY_WAIT,
        status_version=17,
        attempt=2,
        max_attempts=5,
        label="租户A 同步 🚀",
        description="line one\nline two: 'quoted' \"double\"",
        tags=frozenset({"io", "数据", "tenant:a"}),
        priority=-7,
        bucket=13,
        bucket_key="tenant-Ä",
        pipeline_id="pipe-1",
        node_id="node-extract",
        progress=Progress(done=120.5, total=500, unit="行", message="第 3 批"),
        last_heartbeat_at=start + timedelta(seconds=9, microseconds=1),
        failure=failure,
        outcome={"partial": [1, 2.5, None, True, "半"], "nested": {"k": {"deep": False}}},
        created_at=datetime(2026, 3, 4, 0, 0, 0, 1, tzinfo=_WEST),
        updated_at=start + timedelta(seconds=30),
        started_at=start,
        finished_at=start + timedelta(seconds=20),
        retry_at=datetime(2026, 3, 5, 0, 0, tzinfo=_FAR),
        lease_owner="node-1@host-b",
        lease_until=start + timedelta(minutes=5),
        executor="process",
        pid=31337,
        paused_in_place=True,
        attempts=(
            AttemptRecord(1, start - timedelta(minutes=1), start, _S.RETRY_WAIT, failure),
            AttemptRecord(
                2,
                start,
                start + timedelta(seconds=20),
                _S.FAILED,
                Failure.of(FailureKind.TIMEOUT_IDLE, "idle for 60 s", retryable=True),
                paused_seconds=7.125,
            ),
        ),
        paused_seconds=3.0625,
        durable=True,
        arguments={"args": ["租户A", [1, 2.5e300, None]], "kwargs": {"path": "/数据/a.csv"}},
        run_at=datetime(2026, 3, 4, 5, 0, 0, 999999, tzinfo=_WEST),
    )


class FidelityContract(ContractBase):
    """Round-trips of text, times, JSON outcomes, large payloads and every snapshot field."""

    def round_trip(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """Create `snapshot` and check `get`, `query` and `history` return it exactly."""
        self.store.create(snapshot, transitions)
        what = f"task {short_repr(snapshot.task_id)}"
        expect_same_snapshot(self.store.get(snapshot.task_id), snapshot, f"get() of {what}")
        found = self.store.query(TaskQuery(task_ids=frozenset({snapshot.task_id})))
        expect_equal(len(found), 1, f"query(task_ids=...) results for {what}")
        expect_same_snapshot(found[0], snapshot, f"query() of {what}")
        expect_equal(self.store.history(snapshot.task_id), list(transitions), f"history of {what}")

    def text_task(self, index: int, text: str) -> tuple[TaskSnapshot, list[Transition]]:
        """A task with `text` in every text field (ids stay unique through `index`)."""
        task_id = f"{index}-{text}"
        snapshot = rich_snapshot(task_id).evolve(
            name=text,
            label=text,
            description=text,
            tags=frozenset({text, f"tag-{index}"}),
            bucket_key=text,
            pipeline_id=text,
            node_id=text,
            lease_owner=text,
            executor=text,
            outcome={text: [text]},
            progress=Progress(done=1, unit=text, message=text),
            failure=Failure.of(FailureKind.EXCEPTION, text, exception_type=text, traceback=text),
            status_version=1,
        )
        record = Transition(task_id, _S.PENDING, _S.QUEUED, text, text, text, 1, BASE_TIME)
        return snapshot, [record]

    def check_texts(self, texts: Sequence[str]) -> None:
        """Round-trip each of `texts` through tasks, transitions, queries and commands."""
        for index, text in enumerate(texts):
            snapshot, transitions = self.text_task(index, text)
            self.round_trip(snapshot, transitions)
            expect_equal(
                [s.task_id for s in self.store.query(TaskQuery(tag=text))],
                [snapshot.task_id],
                f"query(tag={short_repr(text)})",
            )
            command = build_command(
                f"cmd-{index}-{text}", snapshot.task_id, action=text, issued_by=text, reason=text
            )
            self.store.submit_command(command)
            expect_equal(
                self.store.commands(task_id=snapshot.task_id),
                [command],
                f"command carrying {short_repr(text)}",
            )

    def test_every_snapshot_field_round_trips(self) -> None:
        snapshot = rich_snapshot("rich")
        defaults = TaskSnapshot(task_id="x", name="x")
        unset = [
            f.name
            for f in dataclasses.fields(TaskSnapshot)
            if f.name not in {"task_id", "name"}
            and getattr(snapshot, f.name) == getattr(defaults, f.name)
        ]
        expect_equal(unset, [], "TaskSnapshot fields the rich snapshot leaves at their default")
        self.round_trip(snapshot)

    def test_every_status_round_trips(self) -> None:
        for status in TaskStatus:
            snapshot, transitions = self.task(f"t-{status.value}", status)
            self.round_trip(snapshot, transitions)
        for status in TaskStatus:
            found = self.store.query(TaskQuery(statuses=frozenset({status})))
            expect_equal(
                [s.task_id for s in found], [f"t-{status.value}"], f"query(statuses={{{status}}})"
            )

    def test_unicode_text_round_trips(self) -> None:
        self.check_texts(UNICODE_TEXTS)

    def test_sql_metacharacters_round_trip(self) -> None:
        self.check_texts(SQL_TEXTS)

    def test_empty_strings_and_zero_values_stay_distinct_from_none(self) -> None:
        snapshot = TaskSnapshot(
            task_id="zeros",
            name="job",
            label="",
            description="",
            bucket=0,
            bucket_key="",
            pid=0,
            progress=Progress(done=0, total=0, unit="", message=""),
            outcome={"empty": "", "zero": 0, "false": False, "none": None, "list": [], "obj": {}},
            created_at=BASE_TIME,
        )
        self.round_trip(snapshot)
        empties: list[object] = ["", 0, False, [], {}]
        for outcome in empties:
            other = TaskSnapshot(task_id=f"o-{outcome!r}", name="job", outcome=outcome)
            self.round_trip(other)

    def test_datetimes_keep_their_instant_across_offsets(self) -> None:
        moments = [
            datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=_UTC8),
            datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=_WEST),
            datetime(2025, 12, 31, 23, 0, tzinfo=_FAR),
        ]
        for index, moment in enumerate(moments):
            snapshot = rich_snapshot(f"t{index}").evolve(
                created_at=moment,
                updated_at=moment + timedelta(microseconds=1),
                started_at=moment,
                finished_at=moment,
                last_heartbeat_at=moment,
                lease_until=moment,
                retry_at=moment,
                status_version=1,
            )
            record = Transition(f"t{index}", _S.PENDING, _S.QUEUED, "x", "y", None, 1, moment)
            self.round_trip(snapshot, [record])
            cmd = build_command(f"c{index}", f"t{index}", issued_at=moment)
            self.store.submit_command(cmd)
            expect_equal(self.store.commands(task_id=f"t{index}"), [cmd], f"command at {moment}")
        expect_equal([s.task_id for s in self.store.query()], ["t0", "t1", "t2"], "creation order")

    def test_json_outcomes_round_trip_with_their_types(self) -> None:
        outcomes: list[Any] = [
            None,
            True,
            False,
            0,
            -(2**40),
            2**53 + 1,
            0.1,
            1.5e300,
            -2.25,
            1.0,
            "plain text",
            "数据 🚀 \"quoted\" 'single' \\ back",
            [],
            [1, "two", 3.0, None, False, [[]], {}],
            {},
            {"键": "值", "nested": {"list": [{"a": 1}, {"b": [True, None]}]}, "n": None},
            {"'; DROP TABLE x; --": "\"\\'", "": "empty key"},
        ]
        for index, outcome in enumerate(outcomes):
            snapshot, transitions = self.task(f"t{index}", _S.SUCCEEDED)
            self.round_trip(snapshot.evolve(outcome=outcome), transitions)

    def test_large_payloads_round_trip(self) -> None:
        megabyte = ("0123456789abcdef数据🚀" * 60_000)[:1_048_576]
        snapshot, transitions = self.task("big", _S.SUCCEEDED)
        big = snapshot.evolve(
            outcome={"blob": megabyte, "list": [megabyte[:1000]] * 10}, description=megabyte
        )
        last = dataclasses.replace(transitions[-1], reason=megabyte)
        self.round_trip(big, [*transitions[:-1], last])

    def test_text_with_a_nul_byte_round_trips_or_is_refused(self) -> None:
        text = "before\x00after"
        snapshot, transitions = self.task("base", _S.SUCCEEDED)
        cases: dict[str, tuple[TaskSnapshot, list[Transition]]] = {
            "label": (snapshot.evolve(task_id="label", label=text), []),
            "description": (snapshot.evolve(task_id="desc", description=text), []),
            "tag": (snapshot.evolve(task_id="tag", tags=frozenset({text})), []),
            "outcome": (snapshot.evolve(task_id="outcome", outcome={"k": text}), []),
            "reason": (
                snapshot.evolve(task_id="reason"),
                [dataclasses.replace(transitions[0], task_id="reason", reason=text)],
            ),
        }
        for field, (candidate, records) in cases.items():
            try:
                self.store.create(candidate, records)
            except StoreError:
                expect_equal(
                    self.store.get(candidate.task_id),
                    None,
                    f"task left behind by a create() refused for a NUL in {field}",
                )
                expect_equal(
                    self.store.history(candidate.task_id),
                    [],
                    f"history left behind by a create() refused for a NUL in {field}",
                )
                continue
            except Exception as exc:
                raise AssertionError(
                    f"a NUL byte in {field} must round-trip or raise StoreError, found "
                    f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
                ) from exc
            expect_same_snapshot(
                self.store.get(candidate.task_id), candidate, f"task with a NUL in {field}"
            )
            expect_equal(
                self.store.history(candidate.task_id), records, f"history with a NUL in {field}"
            )

    def test_nul_bytes_in_save_touch_and_commands_round_trip_or_are_refused(self) -> None:
        text = "nul\x00inside"
        first, _ = self.stored("t1", _S.RUNNING)
        nxt, more = next_version(first, clock=self.clock)
        attempts: list[tuple[str, Callable[[], object]]] = [
            (
                "save",
                partial(
                    self.store.save,
                    nxt.evolve(label=text),
                    expect_version=3,
                    transitions=[dataclasses.replace(more[0], reason=text)],
                ),
            ),
            ("touch", partial(self.store.touch, "t1", progress=Progress(1, message=text))),
            ("submit_command", partial(self.store.submit_command, build_command("c1", "t1"))),
            (
                "submit_command",
                partial(self.store.submit_command, build_command("c2", "t1", reason=text)),
            ),
        ]
        for name, call in attempts:
            before = (self.store.get("t1"), self.store.history("t1"), self.store.commands())
            try:
                call()
            except StoreError:
                after = (self.store.get("t1"), self.store.history("t1"), self.store.commands())
                expect_equal(after, before, f"store after {name}() refused a NUL byte")
            except Exception as exc:
                raise AssertionError(
                    f"a NUL byte given to {name}() must round-trip or raise StoreError, found "
                    f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
                ) from exc
        stored = present(self.store.get("t1"), "task t1 after the NUL writes")
        if stored.status_version == 4:
            expect_equal(stored.label, text, "label saved with a NUL byte")
            expect_equal(self.store.history("t1")[-1].reason, text, "reason with a NUL byte")
        if stored.progress is not None:
            expect_equal(stored.progress.message, text, "progress message with a NUL byte")
        reasons = {c.command_id: c.reason for c in self.store.commands()}
        expect_equal(reasons.get("c1", "missing"), None, "command c1 (no NUL) was stored")
        if "c2" in reasons:
            expect_equal(reasons["c2"], text, "command reason with a NUL byte")

    def test_a_command_round_trips_every_field(self) -> None:
        issued = datetime(2026, 2, 1, 8, 0, 0, 250000, tzinfo=_UTC8)
        command = build_command(
            "c-同步-'; --",
            "task-数据",
            action="pause",
            issued_at=issued,
            issued_by="运维 ops@host-a",
            reason='发布窗口 🚀 "now"',
            bucket=0,
        )
        self.store.submit_command(command)
        expect_equal(self.store.commands(), [command], "submitted command")
        now = issued + timedelta(seconds=1)
        (claimed,) = self.store.claim_commands("node-1", now=now, lease_seconds=2.5)
        lease = now + timedelta(seconds=2.5)
        expect_equal(
            claimed,
            dataclasses.replace(command, claimed_by="node-1", lease_until=lease),
            "claimed command (fractional lease)",
        )
        done_at = now + timedelta(seconds=1)
        result = "rejected: 任务已结束 'done'"
        self.store.complete_command(command.command_id, owner="node-1", now=done_at, result=result)
        (found,) = self.store.commands()
        expect_equal(
            (found.command_id, found.task_id, found.action, found.issued_by, found.issued_at),
            (command.command_id, command.task_id, "pause", command.issued_by, issued),
            "identity fields of the completed command",
        )
        expect_equal(
            (found.reason, found.bucket, found.claimed_by, found.completed_at, found.result),
            (command.reason, 0, "node-1", done_at, result),
            "state fields of the completed command",
        )
