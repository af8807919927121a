"""A copy task's throttle: a token bucket of key and value bytes, one second deep."""

from __future__ import annotations

import pytest

from mirror.source.throttle import Throttle


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bytes_within_one_second_of_the_rate_pass_at_once_and_more_hold_the_task_until_paid_for() -> None:
    clock = _Clock()
    throttle = Throttle(1000, clock)

    assert throttle.charge(1000, 1) == 100.0, "a full bucket: one second's bytes pass"
    assert throttle.charge(500, 1) == pytest.approx(100.5), "then each byte waits its share of a second"
    clock.now = 100.5
    assert throttle.charge(2000, 2) == pytest.approx(102.5)


def test_a_task_that_waits_as_told_copies_at_the_rate_over_a_minute() -> None:
    clock = _Clock()
    throttle = Throttle(10_000, clock)
    start, copied = clock.now, 0
    while clock.now - start < 60:
        copied += 3_000  # batches that do not divide the rate
        clock.now = max(clock.now, throttle.charge(3_000, 3))
    rate = copied / (clock.now - start)
    # One second's burst over sixty, and the last batch's overshoot.
    assert 10_000 <= rate <= 10_000 * 1.02


def test_an_idle_spell_buys_at_most_one_second_of_burst() -> None:
    clock = _Clock()
    throttle = Throttle(1000, clock)
    clock.now += 3600
    assert throttle.charge(1000, 1) == clock.now
    assert throttle.charge(1000, 1) == pytest.approx(clock.now + 1.0)


def test_batches_hold_about_a_tenth_of_a_second_of_the_rate_once_the_record_size_is_known() -> None:
    throttle = Throttle(100_000, _Clock())
    assert throttle.batch(10_000) == 100, "no size seen yet"
    throttle.charge(50_000, 50)  # 1,000-byte records
    assert throttle.batch(10_000) == 10
    assert throttle.batch(5) == 5
    slow = Throttle(10, _Clock())
    slow.charge(1000, 1)
    assert slow.batch(10_000) == 1, "a record larger than a tenth of a second's bytes goes alone"


@pytest.mark.parametrize("rate", [0, -1.0])
def test_a_rate_that_is_not_positive_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="positive rate"):
        Throttle(rate)
