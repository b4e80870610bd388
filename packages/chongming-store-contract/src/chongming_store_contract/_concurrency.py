"""Contract cases: racing writers, claimers and appenders (threads, one handle or several).

Every case starts its threads together behind a barrier, waits for them with a
deadline, and asserts an outcome that does not depend on the interleaving.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import TypeVar, cast

from chongming_core import (
    ConcurrencyConflict,
    Progress,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
)
from chongming_store_contract._base import ContractBase
from chongming_store_contract._builders import (
    BuiltTask,
    build_task,
    build_versions,
    next_version,
)
from chongming_store_contract._checks import expect, expect_equal, present

__all__ = ["ConcurrencyContract", "run_concurrently"]

_T = TypeVar("_T")
_S = TaskStatus
_WON = "won"
_LOST = "lost"


def run_concurrently(workers: Sequence[Callable[[], _T]], *, timeout: float = 60.0) -> list[_T]:
    """Run each worker in its own thread, all released at once; return their results in order.

    Raises:
        AssertionError: a worker raised (the first error is chained), or a thread was
            still running after `timeout` seconds (the store hangs or deadlocks).
    """
    barrier = threading.Barrier(len(workers), timeout=timeout)
    results: list[_T | None] = [None] * len(workers)
    errors: list[BaseException | None] = [None] * len(workers)

    def run(index: int, worker: Callable[[], _T]) -> None:
        try:
            barrier.wait()
            results[index] = worker()
        except BaseException as exc:
            errors[index] = exc

    threads = [
        threading.Thread(target=run, args=(i, w), name=f"contract-worker-{i}", daemon=True)
        for i, w in enumerate(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    stuck = [t.name for t in threads if t.is_alive()]
    expect(not stuck, f"threads {stuck} were still running after {timeout} s: the store hangs")
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    if failed:
        index, first = failed[0]
        raise AssertionError(
            f"{len(failed)} of {len(workers)} workers raised; worker {index}: "
            f"{type(first).__module__}.{type(first).__qualname__}: {first}"
        ) from first
    return cast(list[_T], results)


class ConcurrencyContract(ContractBase):
    """Optimistic saves, creates, claims, completions and appends under contention."""

    #: Threads per race; a backend with a small connection budget may lower it.
    contract_threads: int = 8
    #: Extra handles for the ``across_handles`` variants (besides ``self.store``).
    contract_extra_handles: int = 2

    def handles(self, across: bool) -> list[TaskStore]:
        """The store alone, or the store plus independent handles on the same data."""
        if not across:
            return [self.store]
        return [self.store, *(self.other_handle() for _ in range(self.contract_extra_handles))]

    # ------------------------------------------------------------------ saves
    def race_saves(self, across: bool) -> None:
        """Rounds of N writers saving on the same version: one winner per round."""
        handles = self.handles(across)
        current, chain = self.stored("t1", _S.RUNNING)
        expected_history = list(chain)
        for round_number in range(4):
            version = current.status_version
            candidates: list[tuple[TaskSnapshot, list[Transition]]] = []
            for i in range(self.contract_threads):
                nxt, more = next_version(current, clock=self.clock)
                writer = f"writer-{round_number}-{i}"
                candidates.append(
                    (nxt.evolve(label=writer), [dataclasses.replace(more[0], actor=writer)])
                )

            def save(
                i: int,
                version: int = version,
                candidates: list[tuple[TaskSnapshot, list[Transition]]] = candidates,
            ) -> tuple[str, int | None]:
                snapshot, records = candidates[i]
                try:
                    handles[i % len(handles)].save(
                        snapshot, expect_version=version, transitions=records
                    )
                except ConcurrencyConflict as conflict:
                    expect_equal(conflict.expected, version, "ConcurrencyConflict.expected")
                    return _LOST, conflict.actual
                return _WON, None

            outcomes = run_concurrently([partial(save, i) for i in range(self.contract_threads)])
            winners = [i for i, (outcome, _) in enumerate(outcomes) if outcome == _WON]
            expect_equal(len(winners), 1, f"writers that won round {round_number}")
            expect_equal(
                {actual for outcome, actual in outcomes if outcome == _LOST},
                {version + 1},
                f"ConcurrencyConflict.actual seen by the losers of round {round_number}",
            )
            won_snapshot, won_records = candidates[winners[0]]
            expect_equal(self.store.get("t1"), won_snapshot, f"snapshot after round {round_number}")
            expected_history.extend(won_records)
            expect_equal(
                self.store.history("t1"),
                expected_history,
                f"history after round {round_number} (only the winner's transition)",
            )
            current = won_snapshot

    def test_concurrent_saves_of_one_version_have_one_winner(self) -> None:
        self.race_saves(across=False)

    def test_concurrent_saves_across_handles_have_one_winner(self) -> None:
        self.race_saves(across=True)

    # ------------------------------------------------------------------ creates
    def race_creates(self, across: bool) -> None:
        """N creators of the same id: exactly one succeeds, and only its data is stored."""
        handles = self.handles(across)
        for task_id in ("a", "b", "c"):
            candidates = [
                build_task(task_id, _S.QUEUED, clock=self.clock, label=f"creator-{i}")
                for i in range(self.contract_threads)
            ]

            def create(i: int, candidates: list[BuiltTask] = candidates) -> str:
                snapshot, records = candidates[i]
                try:
                    handles[i % len(handles)].create(snapshot, records)
                except ConcurrencyConflict:
                    return _LOST
                return _WON

            outcomes = run_concurrently([partial(create, i) for i in range(self.contract_threads)])
            winners = [i for i, outcome in enumerate(outcomes) if outcome == _WON]
            expect_equal(len(winners), 1, f"creators of {task_id!r} that succeeded")
            winner = candidates[winners[0]]
            expect_equal(self.store.get(task_id), winner.snapshot, f"stored {task_id!r}")
            expect_equal(
                self.store.history(task_id), list(winner.transitions), f"history of {task_id!r}"
            )
        expect_equal(len(self.store.query()), 3, "tasks after the create races")

    def test_concurrent_creates_of_one_id_have_one_winner(self) -> None:
        self.race_creates(across=False)

    def test_concurrent_creates_across_handles_have_one_winner(self) -> None:
        self.race_creates(across=True)

    # ------------------------------------------------------------------ claims
    def race_claims(self, across: bool) -> None:
        """N claimers drain 60 commands: every command goes to exactly one of them."""
        handles = self.handles(across)
        total = 60
        for n in range(total):
            self.clock.advance(1)
            self.store.submit_command(self.command(f"c{n:03d}", f"t{n % 7}"))
        now = self.clock.now()

        def drain(i: int) -> list[str]:
            handle = handles[i % len(handles)]
            mine: list[str] = []
            for _ in range(total + 1):
                got = handle.claim_commands(f"node-{i}", now=now, lease_seconds=300, limit=4)
                if not got:
                    return mine
                mine.extend(c.command_id for c in got)
            raise AssertionError(f"node-{i} was still being handed commands after {total} claims")

        claimed = run_concurrently([partial(drain, i) for i in range(self.contract_threads)])
        every = [c for mine in claimed for c in mine]
        expect_equal(len(every), len(set(every)), "claims of the same command by two claimers")
        expect_equal(sorted(every), [f"c{n:03d}" for n in range(total)], "commands claimed")
        owner_of = {c: f"node-{i}" for i, mine in enumerate(claimed) for c in mine}
        stored = {c.command_id: c.claimed_by for c in self.store.commands()}
        expect_equal(stored, owner_of, "stored holder of each command")

    def test_concurrent_claims_never_hand_a_command_to_two_claimers(self) -> None:
        self.race_claims(across=False)

    def test_concurrent_claims_across_handles_never_hand_a_command_twice(self) -> None:
        self.race_claims(across=True)

    def test_concurrent_completions_succeed_once(self) -> None:
        handles = self.handles(True)
        self.store.submit_command(self.command("c1", "t1"))
        now = self.clock.now()
        self.store.claim_commands("node-1", now=now, lease_seconds=60)

        def complete(i: int) -> bool:
            return handles[i % len(handles)].complete_command(
                "c1", owner="node-1", now=now + timedelta(seconds=1), result=f"r{i}"
            )

        results = run_concurrently([partial(complete, i) for i in range(self.contract_threads)])
        expect_equal(results.count(True), 1, "complete_command() calls that returned True")
        winner = results.index(True)
        expect_equal(self.store.commands()[0].result, f"r{winner}", "stored result")

    # ------------------------------------------------------------------ appends
    def race_appends(self, across: bool) -> None:
        """N appenders send overlapping slices of one chain: history stays the chain."""
        handles = self.handles(across)
        snapshot, chain = build_versions("t1", 40, clock=self.clock)
        self.store.create(snapshot)

        def append(i: int) -> None:
            order = list(chain)
            random.Random(i).shuffle(order)
            handle = handles[i % len(handles)]
            for start in range(0, len(order), 7):
                handle.append(order[start : start + 9])  # slices overlap by two

        run_concurrently([partial(append, i) for i in range(self.contract_threads)])
        history = self.store.history("t1")
        expect_equal(
            [t.status_version for t in history],
            list(range(1, 41)),
            "versions in history (contiguous, no duplicates)",
        )
        expect_equal(history, list(chain), "history after concurrent appends")

    def test_concurrent_appends_keep_history_contiguous(self) -> None:
        self.race_appends(across=False)

    def test_concurrent_appends_across_handles_keep_history_contiguous(self) -> None:
        self.race_appends(across=True)

    # ------------------------------------------------------------------ side path vs saves
    def test_touches_never_conflict_with_concurrent_saves(self) -> None:
        handles = self.handles(True)
        current, _ = self.stored("t1", _S.RUNNING)
        versions = [next_version(current, clock=self.clock)]
        for _ in range(19):
            versions.append(next_version(versions[-1].snapshot, clock=self.clock))

        def saver() -> int:
            for built in versions:
                self.store.save(
                    built.snapshot,
                    expect_version=built.snapshot.status_version - 1,
                    transitions=built.transitions,
                )
            return len(versions)

        def toucher(i: int) -> int:
            handle = handles[i % len(handles)]
            for n in range(30):
                expect(
                    handle.touch("t1", progress=Progress(done=n, message=f"toucher {i}")),
                    "touch() of an existing task returned False",
                )
            return 30

        workers: list[Callable[[], int]] = [saver, *(partial(toucher, i) for i in range(1, 4))]
        run_concurrently(workers)
        stored = present(self.store.get("t1"), "task t1 after the race")
        expect_equal(stored.status_version, 23, "version after 20 saves raced by touches")
        expect_equal(len(self.store.history("t1")), 23, "history length")
        expect_equal(stored.label, versions[-1].snapshot.label, "label after the last save")
