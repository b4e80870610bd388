"""Property tests: `StateMachine` against a model of §9.2 + §9.3, and the bounds of backoff.

The model is built from the transition table written out below (not from the
code's table) plus the guards of §9.3 and rulings R3/R8. Every random event must
do exactly what the model predicts: legal moves succeed, illegal ones raise and
change nothing, and the trajectory stays one contiguous chain from ``pending``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from chongming_core import (
    AttemptsExhausted,
    ExponentialBackoff,
    Failure,
    FailureKind,
    FakeClock,
    FixedBackoff,
    InvalidTransition,
    Jitter,
    StateMachine,
    TaskStatus,
    Transition,
)

S = TaskStatus

SPEC_TABLE: dict[str, set[str]] = {
    "pending": {"blocked", "queued", "skipped", "cancelled", "stopped"},
    "blocked": {"queued", "skipped", "cancelled", "stopped"},
    "queued": {"starting", "paused", "skipped", "stopped", "cancelled"},
    "starting": {"running", "retry_wait", "pausing", "stopping", "failed", "cancelled", "lost"},
    "running": {"succeeded", "failed", "retry_wait", "pausing", "stopping", "cancelled", "lost"},
    "pausing": {"paused", "running", "stopping", "failed", "cancelled", "lost"},
    "paused": {"queued", "running", "stopped", "cancelled"},
    "retry_wait": {"starting", "queued", "paused", "stopped", "failed", "cancelled"},
    "stopping": {"stopped", "succeeded", "failed", "lost"},
    "succeeded": set(),
    "failed": set(),
    "stopped": set(),
    "cancelled": set(),
    "skipped": set(),
    "lost": set(),
}
ACTIVE = {"starting", "running", "pausing", "stopping"}
REVIVABLE = {"failed", "stopped", "cancelled", "lost"}

#: events that aim at one status through the table and the guards
TARGET_OF = {
    "mark_blocked": "blocked",
    "mark_queued": "queued",
    "mark_starting": "starting",
    "mark_running": "running",
    "mark_pausing": "pausing",
    "mark_paused": "paused",
    "mark_stopping": "stopping",
    "mark_stopped": "stopped",
    "mark_succeeded": "succeeded",
    "mark_failed": "failed",
    "mark_retry_wait": "retry_wait",
    "mark_cancelled": "cancelled",
    "mark_skipped": "skipped",
    "mark_lost": "lost",
}
EVENTS = sorted([*TARGET_OF, "abort_pause", "resume", "retry", "reset"])
#: forward moves are listed several times so that random walks reach deep situations
#: (an in-place pause needs queued -> starting -> running -> pausing -> paused)
_WEIGHTS = {
    "mark_queued": 4,
    "mark_starting": 4,
    "mark_running": 4,
    "mark_pausing": 6,
    "mark_paused": 8,
    "mark_retry_wait": 3,
    "mark_stopping": 3,
    "resume": 3,
    "retry": 3,
}
WEIGHTED_EVENTS = [event for event in EVENTS for _ in range(_WEIGHTS.get(event, 1))]
FAILURE = Failure.of(FailureKind.EXCEPTION, "boom")


@dataclass
class Model:
    status: str = "pending"
    started: bool = False
    paused_in_place: bool = False
    attempt: int = 0
    max_attempts: int = 1
    attempt_records: int = 0


class Refused(Exception):
    """The model's verdict that an event must raise `kind`."""

    def __init__(self, kind: type[BaseException]) -> None:
        super().__init__(kind.__name__)
        self.kind = kind


def refusal(model: Model, target: str) -> type[BaseException] | None:
    """Which error moving to `target` must raise (None: it is allowed)."""
    if target not in SPEC_TABLE[model.status]:
        return InvalidTransition
    if target == "running":
        if not model.started:
            return InvalidTransition  # §9.3: mark_running() needs started_at
        if model.status == "paused" and not model.paused_in_place:
            return InvalidTransition  # paused before start resumes to queued (§4.3)
    if target == "starting" and model.attempt + 1 > model.max_attempts:
        return AttemptsExhausted  # §9.3 / R8
    if target == "retry_wait" and model.attempt >= model.max_attempts:
        return InvalidTransition  # nothing to wait for
    if (
        model.status == "paused"
        and model.paused_in_place
        and target in {"stopped", "cancelled", "queued"}
    ):
        return InvalidTransition  # R3: the body must unwind through running first
    return None


def predict(model: Model, event: str) -> tuple[str, Model]:
    """The status `event` leads to and the model after it, or raise `Refused`."""
    status = model.status
    after = Model(**vars(model))
    if event == "retry":
        if status not in REVIVABLE:
            raise Refused(InvalidTransition)
        after.max_attempts = max(model.max_attempts, model.attempt + 1)
        target = "queued"
    elif event == "reset":
        if status in ACTIVE or model.paused_in_place:
            raise Refused(InvalidTransition)  # an executor still holds the task
        after.attempt, after.started, after.attempt_records = 0, False, 0
        target = "pending"
    elif event == "abort_pause":
        if status != "pausing":
            raise Refused(InvalidTransition)
        target = "running"
    elif event == "resume":
        if status not in {"paused", "pausing"}:
            raise Refused(InvalidTransition)
        target = "queued" if status == "paused" and not model.paused_in_place else "running"
        error = refusal(model, target)
        if error is not None:
            raise Refused(error)
    else:
        target = TARGET_OF[event]
        error = refusal(model, target)
        if error is not None:
            raise Refused(error)
    if target == "starting":
        after.attempt += 1
        after.started = True
    # a body suspended in place is still in its attempt: leaving it ends the attempt (D88)
    executing = status in ACTIVE or model.paused_in_place
    if executing and target not in ACTIVE and target != "paused" and event != "reset":
        after.attempt_records += 1
    after.paused_in_place = target == "paused" and status == "pausing"
    after.status = target
    return target, after


def outcome(model: Model, event: str) -> tuple[str, Model] | type[BaseException]:
    """`predict`'s answer: the new status and model, or the error the event must raise."""
    try:
        return predict(model, event)
    except Refused as verdict:
        return verdict.kind


def _is_legal(model: Model, event: str) -> bool:
    return isinstance(outcome(model, event), tuple)


def expect_refusal(machine: StateMachine, event: str, kind: type[BaseException]) -> None:
    """`event` must raise `kind` and change neither the snapshot nor the trajectory."""
    before = machine.snapshot
    history = machine.transitions
    with pytest.raises((InvalidTransition, AttemptsExhausted)) as info:
        apply(machine, event)
    assert type(info.value) is kind, (event, before, info.value)
    assert machine.snapshot is before
    assert machine.transitions == history


def apply(machine: StateMachine, event: str) -> Transition:
    if event == "mark_failed":
        return machine.mark_failed(FAILURE)
    if event == "mark_retry_wait":
        return machine.mark_retry_wait(FAILURE)
    if event == "reset":
        return machine.reset(confirm=True)
    if event == "mark_starting":
        return machine.mark_starting(executor="thread")
    method = getattr(machine, event)
    result = method()
    assert isinstance(result, Transition)
    return result


def assert_matches(machine: StateMachine, model: Model) -> None:
    snap = machine.snapshot
    assert snap.status.value == model.status
    assert snap.paused_in_place is model.paused_in_place
    assert snap.attempt == model.attempt
    assert snap.max_attempts == model.max_attempts
    assert (snap.started_at is not None) is model.started
    assert len(snap.attempts) == model.attempt_records
    assert (snap.finished_at is not None) is snap.status.is_terminal


class StateMachineAgainstTheModel(RuleBasedStateMachine):
    """Random events against `StateMachine`, judged by `predict`."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.machine = StateMachine.create("prop", "性质", clock=self.clock)
        # the same events, its snapshot read only by `twin_reads_the_same`: the changes of
        # several events are built into one snapshot at once, which must be the same
        self.twin = StateMachine.create("prop", "性质", clock=self.clock)
        self.model = Model()

    @initialize(
        max_attempts=st.integers(min_value=1, max_value=3),
        seed=st.integers(min_value=0, max_value=2**32),
    )
    def create(self, max_attempts: int, seed: int) -> None:
        self.machine = StateMachine.create(
            "prop", "性质", max_attempts=max_attempts, clock=self.clock
        )
        self.twin = StateMachine.create("prop", "性质", max_attempts=max_attempts, clock=self.clock)
        self.model = Model(max_attempts=max_attempts)
        # picks among the events the model allows or refuses right now (a uniform choice
        # reaches deep situations far more often than hypothesis' simplest-first draws)
        self.rnd = random.Random(seed)

    @rule(seconds=st.integers(min_value=0, max_value=5))
    def legal_event(self, seconds: int) -> None:
        """Walk along a legal move, favouring the ones that lead deeper into the lifecycle."""
        legal = [e for e in WEIGHTED_EVENTS if _is_legal(self.model, e)]
        if legal:
            self._step(self.rnd.choice(legal), seconds)

    @rule()
    def illegal_event(self) -> None:
        """Try an event the model refuses in the current situation."""
        illegal = [e for e in EVENTS if not _is_legal(self.model, e)]
        if illegal:
            self._step(self.rnd.choice(illegal), 0)

    def _step(self, event: str, seconds: int) -> None:
        note(f"{self.model.status} --{event}-->")
        self.clock.advance(seconds)
        before = self.machine.snapshot
        result = outcome(self.model, event)
        if not isinstance(result, tuple):
            expect_refusal(self.machine, event, result)
            with pytest.raises(result):
                apply(self.twin, event)
            return
        target, after = result
        record = apply(self.machine, event)
        assert apply(self.twin, event) == record
        assert record.to_status.value == target, (event, self.model)
        assert record.from_status is before.status
        assert record.status_version == before.status_version + 1
        assert record.at == self.clock.now()
        self.model = after

    @rule(
        status=st.sampled_from(list(TaskStatus)),
        actor=st.sampled_from(["ops", "", "  "]),
        reason=st.sampled_from(["checked by hand", "", "\t"]),
    )
    def force(self, status: TaskStatus, actor: str, reason: str) -> None:
        target = status
        before = self.machine.snapshot
        history = self.machine.transitions
        if not actor.strip() or not reason.strip():
            with pytest.raises(InvalidTransition):
                self.machine.force_transition(target, actor=actor, reason=reason)
            assert self.machine.snapshot is before
            assert self.machine.transitions == history
            return
        record = self.machine.force_transition(target, actor=actor, reason=reason)
        assert self.twin.force_transition(target, actor=actor, reason=reason) == record
        assert (record.to_status, record.trigger, record.actor) == (target, "control:force", actor)
        current = self.model.status
        executing = current in ACTIVE or self.model.paused_in_place
        if executing and target.value not in ACTIVE and target is not S.PAUSED:
            self.model.attempt_records += 1
        self.model.paused_in_place = target is S.PAUSED and self.model.paused_in_place
        self.model.status = target.value

    @rule()
    def twin_reads_the_same(self) -> None:
        """A snapshot built after many events equals the one built after each of them."""
        assert self.twin.status is self.machine.status
        assert self.twin.version == self.machine.version
        assert self.twin.attempt == self.machine.snapshot.attempt
        assert self.twin.max_attempts == self.machine.snapshot.max_attempts
        assert self.twin.snapshot == self.machine.snapshot
        assert self.twin.transitions == self.machine.transitions

    @invariant()
    def twin_keeps_its_creation_fields(self) -> None:
        """`base` never builds anything, and its fixed fields are the task's."""
        base = self.twin.base
        assert (base.task_id, base.name, base.tags) == ("prop", "性质", frozenset())
        assert self.twin.status is self.machine.status

    @invariant()
    def matches_the_model(self) -> None:
        assert_matches(self.machine, self.model)

    @invariant()
    def every_event_does_what_the_model_says_from_here(self) -> None:
        """Try every event on a copy of the machine: one step, exhaustively, in each situation."""
        for event in EVENTS:
            copy = StateMachine(self.machine.snapshot, self.machine.transitions, clock=self.clock)
            before = copy.snapshot
            result = outcome(self.model, event)
            if not isinstance(result, tuple):
                expect_refusal(copy, event, result)
                continue
            target, after = result
            record = apply(copy, event)
            assert record.to_status.value == target, (event, self.model)
            assert record.status_version == before.status_version + 1
            assert_matches(copy, after)

    @invariant()
    def trajectory_is_one_contiguous_chain_from_pending(self) -> None:
        transitions = self.machine.transitions
        assert self.machine.snapshot.status_version == len(transitions)
        assert [t.status_version for t in transitions] == list(range(1, len(transitions) + 1))
        previous = S.PENDING
        for record in transitions:
            assert record.from_status is previous
            previous = record.to_status
        assert previous is self.machine.status
        times = [t.at for t in transitions]
        assert times == sorted(times)


StateMachineAgainstTheModel.TestCase.settings = settings(stateful_step_count=40)
TestStateMachineAgainstTheModel = StateMachineAgainstTheModel.TestCase


# ---------------------------------------------------------------- backoff bounds
class _Draw(random.Random):
    """A random source whose next draw is chosen by hypothesis."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


#: the largest value `random.random()` can return
_LAST_DRAW = 1.0 - 2.0**-53
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
seconds = st.floats(min_value=0.0, max_value=10_000.0, allow_subnormal=False)
attempts = st.integers(min_value=1, max_value=3_000)


@given(
    base=seconds,
    factor=st.floats(min_value=1.0, max_value=10.0),
    max_delay=seconds,
    first=attempts,
    second=attempts,
)
@example(base=0.0, factor=10.0, max_delay=300.0, first=1, second=1_000)  # 10.0**999 overflows
@example(base=2.0, factor=10.0, max_delay=300.0, first=999, second=1_000)
def test_exponential_ceiling_is_monotone_and_capped(
    base: float, factor: float, max_delay: float, first: int, second: int
) -> None:
    policy = ExponentialBackoff(base=base, factor=factor, max_delay=max_delay)
    low, high = sorted((first, second))
    assert 0.0 <= policy.ceiling(low) <= policy.ceiling(high) <= max_delay
    assert policy.ceiling(1) == min(base, max_delay)
    if base == 0:
        assert policy.ceiling(high) == 0.0


@given(
    base=seconds,
    factor=st.integers(min_value=1, max_value=4),
    max_delay=seconds,
    attempt=attempts,
    draw=draws,
    jitter=st.sampled_from(list(Jitter)),
)
@example(base=1.0, factor=2, max_delay=300.0, attempt=1, draw=_LAST_DRAW, jitter=Jitter.EQUAL)
@example(base=1.0, factor=2, max_delay=300.0, attempt=1, draw=_LAST_DRAW, jitter=Jitter.FULL)
@example(base=3.0, factor=3, max_delay=300.0, attempt=9, draw=_LAST_DRAW, jitter=Jitter.FULL)
def test_jittered_delay_stays_within_its_bounds(
    base: float, factor: int, max_delay: float, attempt: int, draw: float, jitter: Jitter
) -> None:
    policy = ExponentialBackoff(base=base, factor=factor, max_delay=max_delay, jitter=jitter)
    ceiling = policy.ceiling(attempt)
    delay = policy.delay(attempt, _Draw(draw))
    if jitter is Jitter.NONE:
        assert delay == ceiling
    elif ceiling == 0:
        assert delay == 0.0
    elif jitter is Jitter.FULL:
        assert 0.0 <= delay < ceiling
    else:
        assert ceiling / 2 <= delay < ceiling


@given(seed=st.integers(min_value=0, max_value=2**32), attempt=attempts)
def test_full_jitter_with_a_real_random_source(seed: int, attempt: int) -> None:
    policy = ExponentialBackoff(base=1, factor=2, max_delay=300)
    assert policy.jitter is Jitter.FULL
    delay = policy.delay(attempt, random.Random(seed))
    assert 0.0 <= delay < policy.ceiling(attempt)


@given(attempt=attempts, jitter=st.sampled_from(list(Jitter)), draw=draws)
def test_fixed_backoff_zero_is_always_zero(attempt: int, jitter: Jitter, draw: float) -> None:
    assert FixedBackoff(0).delay(attempt) == 0.0
    assert FixedBackoff(0, jitter=jitter).delay(attempt, _Draw(draw)) == 0.0


@given(delay=seconds, attempt=attempts)
def test_fixed_backoff_without_jitter_is_exact(delay: float, attempt: int) -> None:
    assert FixedBackoff(delay).delay(attempt) == delay
