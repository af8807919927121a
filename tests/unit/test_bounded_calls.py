"""`bounded`: a librdkafka call blocked far past its own timeout gives up its producer."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

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


class _Committer:
    """A producer's commit_transaction that times out (retriable) `failures` times, then commits."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.timeouts: list[float] = []

    def commit_transaction(self, timeout: float) -> None:
        self.timeouts.append(timeout)
        if len(self.timeouts) <= self.failures:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True))


def test_a_commit_that_times_out_is_tried_again_with_what_is_left_of_one_deadline() -> None:
    producer = _Committer(failures=2)
    transactions.commit(producer, "flow A->B", timeout_seconds=20)  # type: ignore[arg-type]
    assert len(producer.timeouts) == 3
    assert producer.timeouts == sorted(producer.timeouts, reverse=True)
    assert producer.timeouts[0] <= 20


def test_a_commit_still_timing_out_at_its_deadline_gives_up_the_producer_without_an_abort() -> None:
    # Its outcome is unknown (it may still land): the task must replace the producer and re-read
    # what was committed, which ProducerStuckError (a fence, to callers) makes it do.
    producer = _Committer(failures=10**6)
    with pytest.raises(ProducerStuckError, match=r"commit did not complete within 0\.3s; replacing"):
        transactions.commit(producer, "flow A->B", timeout_seconds=0.3)  # type: ignore[arg-type]
    assert all(timeout >= 1.0 for timeout in producer.timeouts)  # never a zero or negative timeout


def test_a_commit_refused_for_good_is_not_retried() -> None:
    class Fenced:
        calls = 0

        def commit_transaction(self, timeout: float) -> None:
            Fenced.calls += 1
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    with pytest.raises(ProducerFencedError):
        transactions.commit(Fenced(), "flow A->B")  # type: ignore[arg-type]
    assert Fenced.calls == 1
