"""`bounded`: a librdkafka call blocked far past its own timeout gives up its producer."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror.errors import ProducerFencedError, ProducerStuckError
from mirror.kafka import transactions
from mirror.kafka.event_loop import process_loop
from mirror.kafka.packing_producer import PackingProducer
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


class _SlowOffsets:
    """librdkafka's send_offsets_to_transaction while the group coordinator moves: it answers late."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.timeouts: list[float] = []

    def send_offsets_to_transaction(self, offsets: object, group: object, timeout: float) -> None:
        self.timeouts.append(timeout)
        time.sleep(self.seconds)


class _SlowAiokafkaOffsets(PackingProducer, _SlowOffsets):
    """aiokafka's, as slow: it looks the moved coordinator up again by itself."""

    def __init__(self, seconds: float) -> None:  # no loop, no broker: only the call
        _SlowOffsets.__init__(self, seconds)

    send_offsets_to_transaction = _SlowOffsets.send_offsets_to_transaction  # type: ignore[assignment]


def _short_offsets_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transactions, "SEND_OFFSETS_SECONDS", 0.1)
    monkeypatch.setattr(transactions, "SEND_OFFSETS_GRACE_SECONDS", 0.1)
    monkeypatch.setattr(transactions, "AIOKAFKA_SEND_OFFSETS_SECONDS", 2.0)


def test_librdkafkas_offsets_slower_than_their_short_bound_give_up_the_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka waits on the coordinator it cached (#5456, #5511): a new producer asks afresh.
    _short_offsets_bounds(monkeypatch)
    with pytest.raises(ProducerStuckError, match=r"adding offsets: librdkafka did not return 0\.2s"):
        transactions.send_offsets(_SlowOffsets(0.6), [], None, "adding offsets")


def test_aiokafkas_producer_waits_out_a_group_coordinators_move_under_a_commits_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Replaced at 4 s while the group moved, a copy task stood still twice as long as the other.
    _short_offsets_bounds(monkeypatch)
    producer = _SlowAiokafkaOffsets(0.6)
    transactions.send_offsets(producer, [], None, "adding offsets")
    assert producer.timeouts == [2.0]
    assert transactions.AIOKAFKA_SEND_OFFSETS_SECONDS == 2.0
    monkeypatch.undo()
    assert transactions.send_offsets_bound(producer) == (transactions.COMMIT_SECONDS, None)


def test_an_aiokafka_call_past_its_own_bound_says_so_not_that_the_loop_hung() -> None:
    producer = PackingProducer.__new__(PackingProducer)  # no broker: only the bounded call
    producer._loop = process_loop()
    with pytest.raises(ProducerStuckError, match=r"^adding offsets: not done within 0\.1s; replacing"):
        producer._call(asyncio.sleep(5), 0.1, "adding offsets")
