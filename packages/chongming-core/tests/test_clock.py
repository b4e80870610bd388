"""Clocks (§12, R23): `FakeClock` fires deadlines inside `advance()`; one real timer thread."""

from __future__ import annotations

import logging
import math
import threading
from datetime import UTC, datetime, timedelta

import pytest

from chongming_core import SYSTEM_CLOCK, Clock, FakeClock, SystemClock, TimerHandle

WAIT = 10.0  # generous bound for real-time waits; the tests finish in milliseconds


def test_fake_clock_starts_where_told() -> None:
    clock = FakeClock(datetime(2030, 5, 1, tzinfo=UTC), monotonic_start=50.0)
    assert clock.now() == datetime(2030, 5, 1, tzinfo=UTC)
    assert clock.monotonic() == 50.0
    clock.advance(2.5)
    assert clock.now() == datetime(2030, 5, 1, 0, 0, 2, 500000, tzinfo=UTC)
    assert clock.monotonic() == 52.5
    assert clock.now().tzinfo is not None
    assert isinstance(clock, Clock)
    assert isinstance(SYSTEM_CLOCK, Clock)


def test_fake_clock_needs_an_aware_start() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2030, 5, 1))


def test_advance_fires_every_due_deadline_in_order_at_its_own_time() -> None:
    clock = FakeClock()
    start = clock.monotonic()
    fired: list[tuple[str, float]] = []

    def record(name: str) -> None:
        fired.append((name, clock.monotonic() - start))

    clock.call_later(3, lambda: record("c"))
    clock.call_later(1, lambda: record("a"))
    clock.call_later(2, lambda: record("b1"))
    clock.call_later(2, lambda: record("b2"))  # same deadline: insertion order
    clock.call_later(10, lambda: record("late"))
    assert clock.pending_timers == 5

    clock.advance(5)
    assert fired == [("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("c", 3.0)]
    assert clock.monotonic() - start == 5.0
    assert clock.pending_timers == 1

    clock.advance(5)
    assert fired[-1] == ("late", 10.0)
    assert clock.pending_timers == 0


def test_a_deadline_exactly_at_the_end_of_the_window_fires() -> None:
    clock = FakeClock()
    fired: list[bool] = []
    clock.call_later(5, lambda: fired.append(True))
    clock.advance(4.999)
    assert fired == []
    clock.advance(0.001)
    assert fired == [True]


def test_deadlines_scheduled_by_callbacks_within_the_window_fire_too() -> None:
    clock = FakeClock()
    start = clock.monotonic()
    fired: list[tuple[str, float]] = []

    def first() -> None:
        fired.append(("first", clock.monotonic() - start))
        clock.call_later(1.5, second)  # due at 2.5: inside the window
        clock.call_later(10, lambda: fired.append(("outside", clock.monotonic() - start)))
        clock.call_later(0, lambda: fired.append(("now", clock.monotonic() - start)))

    def second() -> None:
        fired.append(("second", clock.monotonic() - start))
        clock.call_later(0.5, lambda: fired.append(("third", clock.monotonic() - start)))

    clock.call_later(1, first)
    clock.advance(4)
    assert fired == [("first", 1.0), ("now", 1.0), ("second", 2.5), ("third", 3.0)]
    assert clock.monotonic() - start == 4.0
    assert clock.pending_timers == 1


def test_cancelled_handles_never_fire() -> None:
    clock = FakeClock()
    fired: list[str] = []
    keep = clock.call_later(1, lambda: fired.append("keep"))
    drop = clock.call_later(1, lambda: fired.append("drop"))
    assert isinstance(drop, TimerHandle)
    drop.cancel()
    assert drop.cancelled
    assert not keep.cancelled
    assert clock.pending_timers == 1

    # a callback may cancel a later one within the same advance
    victim = clock.call_later(3, lambda: fired.append("victim"))
    clock.call_later(2, victim.cancel)
    clock.advance(10)
    assert fired == ["keep"]
    assert clock.pending_timers == 0


def test_advance_takes_a_finite_number_and_leaves_the_clock_usable() -> None:
    """advance(inf) used to fire every timer and leave a clock whose now() overflowed."""
    clock = FakeClock()
    before = (clock.now(), clock.monotonic())
    fired: list[float] = []
    clock.call_later(10, lambda: fired.append(clock.monotonic()))
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="finite"):
            clock.advance(bad)
    for wrong in ("5", None, True):
        with pytest.raises(TypeError, match="number of seconds"):
            clock.advance(wrong)  # type: ignore[arg-type]
    assert (clock.now(), clock.monotonic()) == before
    assert fired == []
    clock.advance(10)
    assert fired == [before[1] + 10]
    assert clock.now() == before[0] + timedelta(seconds=10)


def test_time_never_goes_backwards() -> None:
    clock = FakeClock()
    far = clock.call_later(3600, lambda: None)
    for bad in (-1, -0.001):
        with pytest.raises(ValueError, match="backwards"):
            clock.advance(bad)
    assert not far.cancelled
    assert clock.pending_timers == 1
    far.cancel()
    seen: list[float] = []
    before = clock.monotonic()
    # a deadline already in the past fires at the current time, not in the past
    clock.call_at(before - 100, lambda: seen.append(clock.monotonic()))
    clock.call_later(1, lambda: seen.append(clock.monotonic()))
    clock.run_due()
    assert seen == [before]
    assert clock.monotonic() == before
    clock.advance(2)
    assert seen == [before, before + 1]
    readings = [clock.monotonic()]
    for step in (0, 0.25, 0, 3):
        clock.advance(step)
        readings.append(clock.monotonic())
    assert readings == sorted(readings)


def test_wall_clock_and_monotonic_move_together() -> None:
    clock = FakeClock()
    wall, mono = clock.now(), clock.monotonic()
    clock.advance(90)
    assert clock.now() - wall == timedelta(seconds=90)
    assert clock.monotonic() - mono == 90


def test_a_failing_callback_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    fired: list[str] = []

    def broken() -> None:
        raise RuntimeError("callback broke")

    clock.call_later(1, broken)
    clock.call_later(2, lambda: fired.append("after"))
    with caplog.at_level(logging.ERROR, logger="chongming_task.clock"):
        clock.advance(3)
    assert fired == ["after"]
    assert any("failed" in r.getMessage() and r.exc_info for r in caplog.records)


# ---------------------------------------------------------------- SystemClock
def test_system_clock_reads_aware_utc_time() -> None:
    clock = SystemClock()
    now = clock.now()
    assert now.tzinfo is not None
    assert now.utcoffset() == timedelta(0)
    first = clock.monotonic()
    assert clock.monotonic() >= first


def test_system_clock_serves_many_timers_from_one_named_thread() -> None:
    clock = SystemClock()
    count = 25
    threads: list[threading.Thread] = []
    lock = threading.Lock()
    all_fired = threading.Event()

    def callback() -> None:
        with lock:
            threads.append(threading.current_thread())
            if len(threads) == count:
                all_fired.set()

    for index in range(count):
        clock.call_later(0.001 * (index % 5), callback)
    assert all_fired.wait(WAIT), f"only {len(threads)} of {count} timers fired"
    assert len({id(t) for t in threads}) == 1
    (timer_thread,) = set(threads)
    assert timer_thread.name == "chongming-timer"
    assert timer_thread.daemon
    assert timer_thread is not threading.main_thread()


def test_system_clock_fires_in_deadline_order_and_skips_cancelled() -> None:
    clock = SystemClock()
    fired: list[str] = []
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def gate() -> None:
        # holds the timer thread while the test schedules and cancels: no race with it
        entered.set()
        release.wait(WAIT)

    clock.call_later(0, gate)
    assert entered.wait(WAIT)
    base = clock.monotonic()

    def last() -> None:
        fired.append("last")
        done.set()

    clock.call_at(base + 0.03, last)
    cancelled = clock.call_at(base + 0.01, lambda: fired.append("cancelled"))
    clock.call_at(base + 0.02, lambda: fired.append("second"))
    clock.call_at(base, lambda: fired.append("first"))
    cancelled.cancel()
    release.set()
    assert done.wait(WAIT)
    assert fired == ["first", "second", "last"]


def test_a_deadline_too_far_to_sleep_for_never_ends_the_timer_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ended: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: ended.append(args.exc_value))
    clock = SystemClock()
    fired = threading.Event()
    clock.call_later(1e300, lambda: None)  # beyond any platform's sleep
    clock.call_later(0.01, fired.set)
    assert fired.wait(WAIT)
    threading.Event().wait(0.1)  # the timer thread now sleeps towards the far deadline
    assert ended == []
    assert clock._thread is not None
    assert clock._thread.is_alive()
    again = threading.Event()
    clock.call_later(0.01, again.set)
    assert again.wait(WAIT)


@pytest.mark.parametrize(
    "raised",
    [SystemExit("a callback exits"), KeyboardInterrupt(), GeneratorExit()],
    ids=["SystemExit", "KeyboardInterrupt", "GeneratorExit"],
)
def test_no_exception_of_a_callback_ends_the_timer_thread(
    raised: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    # the one timer thread serves every deadline of the process: one callback raising
    # a BaseException ended it, and every timeout, graceful window and lease renewal
    # after it never fired (until some later call_at happened to start a new thread)
    clock = SystemClock()
    threads: list[threading.Thread] = []
    after = threading.Event()

    def broken() -> None:
        threads.append(threading.current_thread())
        raise raised

    def later() -> None:
        threads.append(threading.current_thread())
        after.set()

    with caplog.at_level(logging.ERROR, logger="chongming_task.clock"):
        clock.call_later(0, broken)
        clock.call_later(0.05, later)  # scheduled before the failure: no new thread for it
        assert after.wait(WAIT)
    assert threads[0] is threads[1]
    assert threads[0].is_alive()
    assert any(type(raised).__name__ in (r.exc_text or "") for r in caplog.records)
