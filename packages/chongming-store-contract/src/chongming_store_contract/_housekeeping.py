"""Contract cases: `prune`, `archive` and `close`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

from chongming_core import (
    ConfigurationError,
    Progress,
    SnapshotWrite,
    StateMachine,
    StoreError,
    TaskStatus,
    TouchUpdate,
    Transition,
)
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import advance, next_version
from chongming_store_contract._checks import expect, expect_equal, raises

__all__ = ["HousekeepingContract"]

_S = TaskStatus


def _archived(path: Path) -> list[dict[str, object]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


class HousekeepingContract(ContractBase):
    """Pruning finished tasks, archiving their history, and closing the store."""

    # ------------------------------------------------------------------ prune
    def finish_in_a_different_order(self) -> None:
        """Create ``late`` first but finish it after ``old1`` and ``old2``; then ``last``.

        Finish order: old1 < old2 < late < last; live tasks ``live-run`` and ``live-q``.
        """
        late, _ = self.stored("late", _S.RUNNING)
        self.stored("live-run", _S.RUNNING)
        self.stored("old1", _S.SUCCEEDED)
        self.stored("old2", _S.FAILED)
        done, more = advance(late, StateMachine.mark_succeeded, clock=self.clock)
        self.store.save(done, expect_version=late.status_version, transitions=more)
        self.stored("last", _S.CANCELLED)
        self.stored("live-q", _S.QUEUED)
        for task_id in ("late", "old1", "live-run"):
            self.clock.advance(1)
            self.store.submit_command(self.command(f"cmd-{task_id}", task_id))

    def test_prune_keeps_the_most_recently_finished_terminal_tasks(self) -> None:
        self.finish_in_a_different_order()
        kept_history = self.store.history("late")
        expect_equal(self.store.prune(keep_terminal=2), 2, "prune(keep_terminal=2) count")
        remaining = sorted(s.task_id for s in self.store.query())
        expect_equal(
            remaining,
            ["last", "late", "live-q", "live-run"],
            "tasks left by prune(keep_terminal=2) (the two latest finished, and every live one)",
        )
        expect_equal(self.store.history("old1"), [], "history of a pruned task")
        expect_equal(self.store.history("old2"), [], "history of a pruned task")
        expect_equal(self.store.commands(task_id="old1"), [], "commands of a pruned task")
        expect_equal(self.store.history("late"), kept_history, "history of a kept task")
        expect_equal(
            [c.command_id for c in self.store.commands()],
            ["cmd-late", "cmd-live-run"],
            "commands left after prune()",
        )

    def test_prune_zero_removes_every_terminal_task_and_no_live_one(self) -> None:
        self.finish_in_a_different_order()
        expect_equal(self.store.prune(0), 4, "prune(0) count")
        expect_equal(
            sorted(s.task_id for s in self.store.query()),
            ["live-q", "live-run"],
            "tasks left by prune(0)",
        )
        expect_equal(
            [c.command_id for c in self.store.commands()], ["cmd-live-run"], "commands left"
        )

    def test_prune_never_removes_live_tasks(self) -> None:
        live = [_S.PENDING, _S.BLOCKED, _S.QUEUED, _S.RUNNING, _S.PAUSED, _S.RETRY_WAIT]
        for status in live:
            self.stored(f"t-{status.value}", status)
        expect_equal(self.store.prune(0), 0, "prune(0) of a store with only live tasks")
        expect_equal(len(self.store.query()), len(live), "live tasks after prune(0)")

    def test_prune_with_room_to_spare_removes_nothing(self) -> None:
        self.finish_in_a_different_order()
        expect_equal(self.store.prune(4), 0, "prune(4) with four terminal tasks")
        expect_equal(self.store.prune(100), 0, "prune(100)")
        expect_equal(len(self.store.query()), 6, "tasks after pruning nothing")
        expect_equal(self.store.prune(0), 4, "prune(0) afterwards")
        expect_equal(self.store.prune(0), 0, "prune(0) again")

    def test_prune_rejects_a_bad_keep_terminal_and_deletes_nothing(self) -> None:
        self.finish_in_a_different_order()
        for bad in (-1, True, 1.5, "2", None):
            with raises(ConfigurationError, f"prune(keep_terminal={bad!r})"):
                self.store.prune(bad)  # type: ignore[arg-type]
        expect_equal(len(self.store.query()), 6, "tasks after refused prunes")

    # ------------------------------------------------------------------ archive
    def test_archive_moves_finished_history_and_keeps_the_final_transition(self) -> None:
        done, done_chain = self.stored("done", _S.SUCCEEDED)
        failed, failed_chain = self.stored("failed", _S.FAILED)
        live, live_chain = self.stored("live", _S.RUNNING)
        self.clock.advance(100)
        cutoff = self.clock.now()
        self.clock.advance(1)
        recent, recent_chain = self.stored("recent", _S.STOPPED)
        path = self.scratch_dir() / "archive.jsonl"
        path.write_text(json.dumps({"earlier": "line"}) + "\n", encoding="utf-8")

        moved = self.store.archive(finished_before=cutoff, path=path)

        expect_equal(moved, 6, "transitions moved by archive()")
        lines = _archived(path)
        expect_equal(lines[0], {"earlier": "line"}, "first line (archive appends)")
        expected = [*done_chain[:-1], *failed_chain[:-1]]
        found = sorted(lines[1:], key=lambda d: (str(d["task_id"]), str(d["status_version"])))
        expect_equal(
            found,
            [t.to_dict() for t in expected],
            "archived lines (one Transition.to_dict() each, any order)",
        )
        expect_equal(
            [Transition.from_dict(line) for line in found], expected, "archived transitions"
        )
        expect_equal(self.store.history("done"), [done_chain[-1]], "history left of 'done'")
        expect_equal(self.store.history("failed"), [failed_chain[-1]], "history left of 'failed'")
        expect_equal(self.store.history("live"), list(live_chain), "history of a live task")
        expect_equal(self.store.history("recent"), list(recent_chain), "history of 'recent'")
        for snapshot in (done, failed, live, recent):
            expect_equal(
                self.store.get(snapshot.task_id), snapshot, f"snapshot of {snapshot.task_id!r}"
            )

    def test_a_second_archive_moves_nothing(self) -> None:
        self.stored("done", _S.SUCCEEDED)
        self.clock.advance(10)
        path = self.scratch_dir() / "archive.jsonl"
        first = self.store.archive(finished_before=self.clock.now(), path=str(path))
        expect_equal(first, 3, "first archive()")
        second = self.store.archive(finished_before=self.clock.now(), path=str(path))
        expect_equal(second, 0, "second archive()")
        expect_equal(len(_archived(path)), 3, "lines in the archive after two runs")

    def test_a_new_archive_file_is_readable_by_its_owner_only(self) -> None:
        """It holds task data: failures, tracebacks, reasons (mode 0o600 on POSIX)."""
        self.stored("done", _S.SUCCEEDED)
        self.clock.advance(10)
        path = self.scratch_dir() / "new-archive.jsonl"
        expect_equal(self.store.archive(finished_before=self.clock.now(), path=path), 3, "moved")
        if os.name == "posix":
            expect_equal(path.stat().st_mode & 0o777, 0o600, "mode of a new archive file")

    def test_archive_never_touches_live_tasks(self) -> None:
        live, chain = self.stored("live", _S.RUNNING)
        longer, more = next_version(live, clock=self.clock)
        self.store.save(longer, expect_version=3, transitions=more)
        self.clock.advance(1000)
        path = self.scratch_dir() / "archive.jsonl"
        expect_equal(
            self.store.archive(finished_before=self.clock.now(), path=path),
            0,
            "archive() of a store with only a live task",
        )
        expect_equal(self.store.history("live"), [*chain, *more], "history of the live task")
        lines = _archived(path) if path.exists() else []
        expect_equal(lines, [], "lines archive() wrote for a live task")

    # ------------------------------------------------------------------ close
    def test_close_is_idempotent(self) -> None:
        self.store.close()
        self.store.close()

    def test_every_call_after_close_raises_store_error(self) -> None:
        snapshot, chain = self.stored("t1", _S.RUNNING)
        self.store.submit_command(self.command("c1", "t1"))
        nxt, more = next_version(snapshot, clock=self.clock)
        now = self.clock.now()
        path = self.scratch_dir() / "closed.jsonl"
        self.store.close()
        calls: dict[str, Callable[[], object]] = {
            "create": lambda: self.store.create(*self.task("t2")),
            "save": lambda: self.store.save(nxt, expect_version=3, transitions=more),
            "save_many": lambda: self.store.save_many([SnapshotWrite(nxt, 3, more)]),
            "get": partial(self.store.get, "t1"),
            "query": self.store.query,
            "status_counts": self.store.status_counts,
            "bucket_counts": self.store.bucket_counts,
            "append": lambda: self.store.append(chain),
            "history": partial(self.store.history, "t1"),
            "touch": lambda: self.store.touch("t1", progress=Progress(1)),
            "touch_many": lambda: self.store.touch_many([TouchUpdate("t1", pid=1)]),
            "submit_command": lambda: self.store.submit_command(self.command("c2", "t1")),
            "claim_commands": lambda: self.store.claim_commands("n", now=now, lease_seconds=5),
            "complete_command": lambda: self.store.complete_command(
                "c1", owner="n", now=now, result="applied"
            ),
            "release_command": lambda: self.store.release_command("c1", owner="n"),
            "commands": self.store.commands,
            "prune": lambda: self.store.prune(0),
            "archive": lambda: self.store.archive(
                finished_before=now + timedelta(days=1), path=path
            ),
        }
        for name, call in calls.items():
            with raises(StoreError, f"{name}() after close()"):
                call()
        self.store.close()

    def test_the_store_is_a_context_manager_that_closes(self) -> None:
        with self.store as entered:
            expect(entered is self.store, f"__enter__ returned {entered!r}, not the store")
            self.stored("t1")
        with raises(StoreError, "get() after leaving the with block"):
            self.store.get("t1")
