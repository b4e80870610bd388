"""Contract cases: command rows that anyone wrote, holding what their columns cannot hold.

The command table is shared, and a row of it may have been written by a script, by
hand, or by a damaged file: an ``issued_at`` that is no time, a blob, text whose
bytes are not UTF-8, a time no `datetime` can hold. Such a row must never fail the
claim (or the listing) of the others — the node that met it used to lose its whole
command channel, and so did each node that claimed the row after it — and nobody
may act on half of it: it is handed out with `Command.problem` saying what is wrong
(design D64). Each backend writes these rows with its own means
(`ContractBase.write_malformed_command`), as far as its columns can hold them.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from chongming_core import Command
from chongming_store_contract._base import ContractBase
from chongming_store_contract._checks import expect, expect_equal
from chongming_store_contract._malformed_values import Malformed

__all__ = ["MALFORMED_CASES", "Malformed", "MalformedCommandsContract"]


_TIME_VALUES = (Malformed.NOT_A_TIME, Malformed.NAIVE_TIME, Malformed.OUT_OF_RANGE_TIME)
_TEXT_VALUES = (Malformed.BLOB, Malformed.NOT_UTF8, Malformed.WRONG_TYPE)

#: Every (column, value) a malformed row is written with; a backend holds what it can.
MALFORMED_CASES: tuple[tuple[str, Malformed], ...] = (
    *(("issued_at", bad) for bad in (*_TIME_VALUES, Malformed.BLOB)),
    *((column, bad) for column in ("task_id", "action", "issued_by") for bad in _TEXT_VALUES),
    ("reason", Malformed.BLOB),
    ("reason", Malformed.NOT_UTF8),
    ("bucket", Malformed.WRONG_TYPE),
    ("bucket", Malformed.BLOB),
    ("command_id", Malformed.BLOB),
    ("command_id", Malformed.NOT_UTF8),
)


class MalformedCommandsContract(ContractBase):
    """A malformed command row is read on its own, handed out with its problem, settled once."""

    def _held(self, index: int, column: str, bad: Malformed) -> Command | None:
        """Write row ``bad-<index>`` with `column` holding `bad`; the command as it was
        meant to be, or None when this backend cannot hold that value."""
        self.clock.advance(1)
        meant = self.command(f"bad-{index}", f"task-bad-{index}", reason="r", bucket=3)
        return meant if self.write_malformed_command(meant, column, bad) else None

    def test_a_malformed_command_row_is_handed_out_with_its_problem(self) -> None:
        held = 0
        for index, (column, bad) in enumerate(MALFORMED_CASES):
            meant = self._held(index, column, bad)
            if meant is None:
                continue
            held += 1
            case = f"a row whose {column} holds {bad.name}"
            self.clock.advance(1)
            good = self.command(f"good-{index}", "task-good")
            self.store.submit_command(good)
            now = self.clock.now()
            claimed = self.store.claim_commands("node-1", now=now, lease_seconds=30)
            expect_equal(len(claimed), 2, f"commands claimed after {case} and a good one")
            first, second = claimed
            until = now + timedelta(seconds=30)
            leased = dataclasses.replace(good, claimed_by="node-1", lease_until=until)
            expect_equal(second, leased, f"the good command claimed after {case}")
            problem = first.problem or ""
            expect(
                column in problem,
                f"{case}: claim_commands must hand it out with a problem naming {column!r}, "
                f"found {first!r}",
            )
            if column != "command_id":
                expect_equal(first.command_id, meant.command_id, f"command_id of {case}")
                expect_equal(
                    self.store.complete_command(
                        first.command_id, owner="node-1", now=now, result=f"rejected: {problem}"
                    ),
                    True,
                    f"complete_command() of {case} by its claimer",
                )
            else:  # nobody can name it: the claim settled it
                expect(
                    first.is_complete and (first.result or "").startswith("rejected: "),
                    f"{case}: the claim must complete it as 'rejected: ...', found {first!r}",
                )
            self.store.complete_command(good.command_id, owner="node-1", now=now, result="ok")
            later = now + timedelta(hours=1)
            again = self.store.claim_commands("node-2", now=later, lease_seconds=30)
            expect_equal(again, [], f"a claim long after {case} was completed")
        expect(
            held > 0,
            f"{type(self).__name__}.write_malformed_command() held none of the malformed "
            "values; a command table always holds some value its reader cannot use",
        )

    def test_commands_lists_a_malformed_row_with_its_problem(self) -> None:
        written = []
        for index, (column, bad) in enumerate(MALFORMED_CASES):
            if self._held(index, column, bad) is not None:
                written.append((index, column))
        listed = self.store.commands()
        expect_equal(len(listed), len(written), "commands() of the malformed rows")
        for (index, column), found in zip(written, listed, strict=True):
            expect(
                column in (found.problem or ""),
                f"commands() must list row bad-{index} with a problem naming {column!r}, "
                f"found {found!r}",
            )
            expect_equal(found.is_complete, False, f"is_complete of row bad-{index}")

    def test_a_malformed_lease_column_is_overwritten_by_the_claim(self) -> None:
        for index, column in enumerate(("lease_until", "claimed_by")):
            bad = Malformed.NOT_A_TIME if column == "lease_until" else Malformed.BLOB
            meant = self._held(index, column, bad)
            if meant is None:
                continue
            now = self.clock.now()
            claimed = self.store.claim_commands("node-1", now=now, lease_seconds=30)
            until = now + timedelta(seconds=30)
            expect_equal(
                claimed,
                [dataclasses.replace(meant, claimed_by="node-1", lease_until=until)],
                f"the claim of a row whose {column} held {bad.name} (the claim writes it)",
            )
            self.store.complete_command(meant.command_id, owner="node-1", now=now, result="ok")

    def test_a_row_completed_at_a_malformed_time_is_never_claimed(self) -> None:
        meant = self._held(0, "completed_at", Malformed.NOT_A_TIME)
        if meant is None:
            meant = self._held(0, "completed_at", Malformed.OUT_OF_RANGE_TIME)
        if meant is None:
            return
        later = self.clock.now() + timedelta(hours=1)
        expect_equal(
            self.store.claim_commands("node-1", now=later, lease_seconds=30),
            [],
            "a claim of a row whose completed_at holds something (it is complete)",
        )
        (found,) = self.store.commands()
        expect("completed_at" in (found.problem or ""), f"commands() lists {found!r}")
