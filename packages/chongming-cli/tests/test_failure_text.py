"""How `status` and `run` show a failure: ``kind: message``, the kind said once."""

from __future__ import annotations

from chongming_cli._output import failure_text
from chongming_core import Failure, FailureKind


def test_a_message_that_begins_with_its_kind_is_not_prefixed_again() -> None:
    fail_fast = Failure.of(FailureKind.CANCELLED, "cancelled: fail_fast: node 'x' ended failed")
    assert failure_text(fail_fast) == "cancelled: fail_fast: node 'x' ended failed"
    assert failure_text(Failure.of(FailureKind.CANCELLED, "cancelled")) == "cancelled"


def test_any_other_message_is_prefixed_with_its_kind() -> None:
    boom = Failure.of(FailureKind.EXCEPTION, "ValueError: boom")
    assert failure_text(boom) == "exception: ValueError: boom"
    stopped = Failure.of(FailureKind.CANCELLED, "stopped: release window")
    assert failure_text(stopped) == "cancelled: stopped: release window"
    # only the kind itself, followed by ": ", counts: a longer word is not the kind
    assert failure_text(Failure.of(FailureKind.LOST, "lostness")) == "lost: lostness"
