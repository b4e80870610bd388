"""Contract cases: the leased command channel."""

from __future__ import annotations

import dataclasses
from datetime import timedelta, timezone

from chongming_core import Command, CommandAction, TaskStatus
from chongming_store_contract._base import ContractBase
from chongming_store_contract._checks import expect, expect_equal

__all__ = ["CommandsContract"]


def _ids(commands: list[Command]) -> list[str]:
    return [c.command_id for c in commands]


class CommandsContract(ContractBase):
    """`submit_command`, `claim_commands`, `complete_command`, `release_command`, `commands`."""

    def submit(self, *command_ids: str, task_id: str = "t1", **kwargs: object) -> list[Command]:
        """Submit one command per id, one fake second apart (oldest first)."""
        submitted = []
        for command_id in command_ids:
            self.clock.advance(1)
            cmd = self.command(command_id, task_id, **kwargs)
            self.store.submit_command(cmd)
            submitted.append(cmd)
        return submitted

    # ------------------------------------------------------------------ submit / list
    def test_submitted_command_is_listed_unchanged(self) -> None:
        (cmd,) = self.submit("c1", reason="停止：发布窗口", bucket=4, action="pause")
        expect_equal(self.store.commands(), [cmd], "commands() after one submit")
        expect_equal(cmd.known_action(), CommandAction.PAUSE, "known_action() of the command")
        expect_equal(self.store.commands()[0].is_complete, False, "is_complete of a new command")

    def test_submit_is_idempotent_on_command_id(self) -> None:
        (cmd,) = self.submit("c1")
        self.clock.advance(5)
        self.store.submit_command(self.command("c1", "other-task", action="resume"))
        expect_equal(self.store.commands(), [cmd], "commands() after submitting c1 twice")

    def test_an_unknown_action_is_kept_as_text(self) -> None:
        (cmd,) = self.submit("c1", action="reboot-now")
        (found,) = self.store.commands()
        expect_equal(found.action, "reboot-now", "stored action text")
        expect_equal(found.known_action(), None, "known_action() of an unknown action")
        expect_equal(found, cmd, "stored command")

    def test_commands_lists_oldest_first_with_filters(self) -> None:
        self.submit("c1", "c2", task_id="a")
        self.submit("c3", task_id="b")
        self.submit("c4", task_id="a")
        now = self.clock.now()
        self.store.claim_commands("node-1", now=now, lease_seconds=30, limit=1)
        self.store.complete_command("c1", owner="node-1", now=now, result="applied")
        expect_equal(_ids(self.store.commands()), ["c1", "c2", "c3", "c4"], "commands()")
        expect_equal(_ids(self.store.commands(task_id="a")), ["c1", "c2", "c4"], "task_id='a'")
        expect_equal(
            _ids(self.store.commands(include_complete=False)),
            ["c2", "c3", "c4"],
            "include_complete=False",
        )
        expect_equal(_ids(self.store.commands(limit=2)), ["c1", "c2"], "limit=2")
        expect_equal(
            _ids(self.store.commands(task_id="a", include_complete=False, limit=1)),
            ["c2"],
            "task_id='a', include_complete=False, limit=1",
        )
        expect_equal(self.store.commands(task_id="nobody"), [], "commands of an unknown task")

    # ------------------------------------------------------------------ claim
    def test_claim_leases_oldest_first_up_to_the_limit(self) -> None:
        submitted = self.submit("c1", "c2", "c3")
        now = self.clock.now()
        claimed = self.store.claim_commands("node-1", now=now, lease_seconds=30, limit=2)
        until = now + timedelta(seconds=30)
        expect_equal(
            claimed,
            [dataclasses.replace(c, claimed_by="node-1", lease_until=until) for c in submitted[:2]],
            "claim_commands(limit=2) result",
        )
        expect_equal(
            [(c.command_id, c.claimed_by, c.lease_until) for c in self.store.commands()],
            [("c1", "node-1", until), ("c2", "node-1", until), ("c3", None, None)],
            "stored leases after the claim",
        )

    def test_a_leased_command_is_not_handed_out_twice(self) -> None:
        self.submit("c1", "c2", "c3")
        now = self.clock.now()
        first = self.store.claim_commands("node-1", now=now, lease_seconds=30, limit=2)
        second = self.store.claim_commands("node-2", now=now, lease_seconds=30)
        third = self.store.claim_commands(
            "node-3", now=now + timedelta(seconds=29), lease_seconds=30
        )
        expect_equal(_ids(first), ["c1", "c2"], "first claim")
        expect_equal(_ids(second), ["c3"], "second claim (only the unleased command)")
        expect_equal(third, [], "claim while every lease is still running")
        again = self.store.claim_commands("node-1", now=now, lease_seconds=30)
        expect_equal(again, [], "the holder claiming again while its leases run")

    def test_an_expired_lease_is_handed_out_again(self) -> None:
        self.submit("c1")
        now = self.clock.now()
        self.store.claim_commands("node-1", now=now, lease_seconds=10)
        later = now + timedelta(seconds=11)
        taken = self.store.claim_commands("node-2", now=later, lease_seconds=10)
        expect_equal(
            [(c.command_id, c.claimed_by, c.lease_until) for c in taken],
            [("c1", "node-2", later + timedelta(seconds=10))],
            "claim after the first lease ended",
        )
        done = self.store.complete_command("c1", owner="node-1", now=later, result="applied")
        expect_equal(done, False, "complete_command() by the holder whose lease was taken over")
        done = self.store.complete_command("c1", owner="node-2", now=later, result="applied")
        expect_equal(done, True, "complete_command() by the new holder")

    def test_claim_compares_instants_across_offsets(self) -> None:
        self.submit("c1")
        now = self.clock.now()
        self.store.claim_commands("node-1", now=now, lease_seconds=3600)
        tokyo = now.astimezone(timezone(timedelta(hours=9)))
        expect_equal(
            self.store.claim_commands("node-2", now=tokyo + timedelta(minutes=59), lease_seconds=1),
            [],
            "claim at +09:00 while the UTC lease runs",
        )
        taken = self.store.claim_commands(
            "node-2", now=tokyo + timedelta(minutes=61), lease_seconds=1
        )
        expect_equal(_ids(taken), ["c1"], "claim at +09:00 after the UTC lease ended")

    def test_claim_filters_by_task_ids_and_buckets(self) -> None:
        self.submit("c1", task_id="a", bucket=1)
        self.submit("c2", task_id="b", bucket=2)
        self.submit("c3", task_id="c")
        self.submit("c4", task_id="a", bucket=0)
        now = self.clock.now()
        none = self.store.claim_commands("n", now=now, lease_seconds=5, task_ids=[])
        expect_equal(none, [], "claim with task_ids=[]")
        by_task = self.store.claim_commands("n", now=now, lease_seconds=5, task_ids={"a", "zz"})
        expect_equal(_ids(by_task), ["c1", "c4"], "claim with task_ids={'a', 'zz'}")
        by_bucket = self.store.claim_commands("n", now=now, lease_seconds=5, buckets=[2, 0, 9])
        expect_equal(_ids(by_bucket), ["c2"], "claim with buckets=[2, 0, 9] (c4 already leased)")
        unbucketed = self.store.claim_commands("n", now=now, lease_seconds=5, buckets=[1, 2])
        expect_equal(unbucketed, [], "claim by bucket never takes a command without a bucket")
        rest = self.store.claim_commands("n", now=now, lease_seconds=5)
        expect_equal(_ids(rest), ["c3"], "unfiltered claim")

    def test_claim_with_both_filters_needs_both(self) -> None:
        self.submit("c1", task_id="a", bucket=1)
        self.submit("c2", task_id="a", bucket=2)
        self.submit("c3", task_id="b", bucket=1)
        claimed = self.store.claim_commands(
            "n", now=self.clock.now(), lease_seconds=5, task_ids=["a"], buckets=[1]
        )
        expect_equal(_ids(claimed), ["c1"], "claim with task_ids=['a'] and buckets=[1]")

    def test_claim_skips_the_commands_of_a_task_another_owner_holds_under_a_live_lease(
        self,
    ) -> None:
        now = self.clock.now()
        for task_id, until in (("held", 60), ("expired", -1)):
            built = self.task(task_id, TaskStatus.RUNNING)
            leased = built.snapshot.evolve(
                lease_owner="node-a", lease_until=now + timedelta(seconds=until)
            )
            self.store.create(leased, built.transitions)
        self.submit("c1", task_id="held")
        self.submit("c2", task_id="expired")
        self.submit("c3", task_id="nowhere")
        now = self.clock.now()
        other = self.store.claim_commands("node-b", now=now, lease_seconds=5)
        expect_equal(
            _ids(other),
            ["c2", "c3"],
            "a claim by node-b (node-a holds 'held' under a live lease: only it is offered c1)",
        )
        mine = self.store.claim_commands("node-a", now=now, lease_seconds=5)
        expect_equal(_ids(mine), ["c1"], "a claim by node-a, the holder")

    def test_claim_of_an_empty_channel_returns_nothing(self) -> None:
        expect_equal(
            self.store.claim_commands("n", now=self.clock.now(), lease_seconds=5),
            [],
            "claim of an empty channel",
        )

    # ------------------------------------------------------------------ complete
    def test_complete_only_by_the_holder_and_only_once(self) -> None:
        self.submit("c1")
        now = self.clock.now()
        expect_equal(
            self.store.complete_command("c1", owner="node-1", now=now, result="applied"),
            False,
            "complete_command() of an unclaimed command",
        )
        self.store.claim_commands("node-1", now=now, lease_seconds=30)
        expect_equal(
            self.store.complete_command("c1", owner="node-2", now=now, result="applied"),
            False,
            "complete_command() by someone who does not hold it",
        )
        done_at = now + timedelta(seconds=3)
        expect_equal(
            self.store.complete_command("c1", owner="node-1", now=done_at, result="applied"),
            True,
            "complete_command() by the holder",
        )
        expect_equal(
            self.store.complete_command("c1", owner="node-1", now=done_at, result="again"),
            False,
            "a second complete_command()",
        )
        (found,) = self.store.commands()
        expect_equal(found.completed_at, done_at, "completed_at")
        expect_equal(found.result, "applied", "result (the first completion wins)")
        expect(found.is_complete, f"is_complete after completion, found {found!r}")

    def test_complete_of_an_unknown_command_returns_false(self) -> None:
        expect_equal(
            self.store.complete_command("nope", owner="n", now=self.clock.now(), result="x"),
            False,
            "complete_command() of an unknown id",
        )

    def test_a_completed_command_is_never_claimed_again(self) -> None:
        self.submit("c1")
        now = self.clock.now()
        self.store.claim_commands("node-1", now=now, lease_seconds=5)
        self.store.complete_command("c1", owner="node-1", now=now, result="rejected: not held")
        later = now + timedelta(hours=1)
        expect_equal(
            self.store.claim_commands("node-2", now=later, lease_seconds=5),
            [],
            "claim after completion and long after the lease",
        )
        expect_equal(
            self.store.commands()[0].result, "rejected: not held", "result of the completed command"
        )

    # ------------------------------------------------------------------ release
    def test_release_gives_the_command_back_at_once(self) -> None:
        self.submit("c1", "c2")
        now = self.clock.now()
        self.store.claim_commands("node-1", now=now, lease_seconds=300)
        expect_equal(
            self.store.release_command("c1", owner="node-2"),
            False,
            "release_command() by someone who does not hold it",
        )
        expect_equal(
            self.store.release_command("c1", owner="node-1"), True, "release by the holder"
        )
        expect_equal(
            self.store.release_command("c1", owner="node-1"),
            False,
            "a second release_command() (no longer held)",
        )
        taken = self.store.claim_commands("node-2", now=now, lease_seconds=300)
        expect_equal(_ids(taken), ["c1"], "claim right after the release (c2 is still leased)")
        expect_equal(taken[0].claimed_by, "node-2", "new holder")

    def test_release_of_unknown_or_completed_commands_returns_false(self) -> None:
        self.submit("c1")
        now = self.clock.now()
        expect_equal(
            self.store.release_command("nope", owner="n"), False, "release of an unknown id"
        )
        expect_equal(
            self.store.release_command("c1", owner="n"), False, "release of an unclaimed command"
        )
        self.store.claim_commands("n", now=now, lease_seconds=30)
        self.store.complete_command("c1", owner="n", now=now, result="applied")
        expect_equal(
            self.store.release_command("c1", owner="n"), False, "release of a completed command"
        )
        expect_equal(self.store.commands()[0].is_complete, True, "still complete after release")
