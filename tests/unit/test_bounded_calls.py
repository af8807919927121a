"""`bounded`: a librdkafka call blocked far past its own timeout gives up its producer."""

from __future__ import annotations

import threading

import pytest

from mirror.errors import ProducerFencedError, ProducerStuckError
from mirror.kafka import transactions
from mirror.kafka.transactions import bounded


def test_a_call_that_returns_in_time_gives_its_value() -> None:
    assert bounded(lambda: 42, 1, "answering") == 42


def test_a_call_that_raises_raises_in_the_callers_thread() -> None:
    def fail() -> None:
        raise KeyError("broker said no")

    with pytest.raises(KeyError, match="broker said no"):
        bounded(fail, 1, "failing")


def test_a_call_blocked_past_its_timeout_and_the_grace_is_abandoned_as_a_stuck_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transactions, "STUCK_GRACE_SECONDS", 0.2)
    release = threading.Event()
    try:
        with pytest.raises(ProducerStuckError, match=r"committing: librdkafka did not return 0\.3s after"):
            bounded(lambda: release.wait(30), 0.1, "committing")
    finally:
        release.set()  # let the abandoned helper thread end
    # Callers treat it like a fence: drop the producer, make a new one.
    assert issubclass(ProducerStuckError, ProducerFencedError)
