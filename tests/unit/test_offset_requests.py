"""Offsets of thousands of partitions are asked 250 partitions a request: librdkafka's CPU for one
request grows much faster than its partitions (mirror.kafka.offsets.REQUEST_PARTITIONS)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.errors import MirrorError
from mirror.kafka.offsets import (
    ask_last_stable_offsets,
    committed_with_metadata,
    last_stable_offsets,
    stable_ends,
)
from tests.unit.futures import done

PARTITIONS = [(f"topic-{t:03d}", p) for t in range(250) for p in range(10)]  # 2,500


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """time.monotonic on a clock that only sleeps move (and a stub may): retrying asks again for
    30 s, which then takes no time."""
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(time, "sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


class EndsAdmin:
    """Answers each partition's end (its partition number times 7), recording each request's size."""

    def __init__(self) -> None:
        self.requests: list[int] = []

    def list_offsets(
        self, request: Mapping[TopicPartition, Any], **_: Any
    ) -> dict[TopicPartition, Future[Any]]:
        self.requests.append(len(request))
        return {tp: done(SimpleNamespace(offset=tp.partition * 7)) for tp in request}


class PositionsReader:
    """A group's committed offsets (the partition number), and the seconds each request was given."""

    def __init__(self, clock: list[float], seconds_per_request: float = 0.0) -> None:
        self.requests: list[int] = []
        self.timeouts: list[float] = []
        self._clock, self._seconds = clock, seconds_per_request

    def committed(self, request: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.requests.append(len(request))
        self.timeouts.append(timeout)
        self._clock[0] += self._seconds
        return [TopicPartition(tp.topic, tp.partition, tp.partition, metadata="m") for tp in request]


class EndsReader:
    """A read_committed consumer's offsets_for_times: each partition's end is its number times 7,
    except those named in `unanswered`, which come back with no offset (-1, a leader that did not
    answer), and those in `failed`, which come back with that error (librdkafka sets a partition's
    error when it found no leader for it); records each call's size and timeout, and each call
    moves `clock` on by `seconds_per_call`."""

    def __init__(
        self,
        unanswered: frozenset[tuple[str, int]] = frozenset(),
        failed: Mapping[tuple[str, int], KafkaError] | None = None,
        clock: list[float] | None = None,
        seconds_per_call: float = 0.0,
    ) -> None:
        self.requests: list[int] = []
        self.timeouts: list[float] = []
        self.metadata_asked: list[str] = []
        self._unanswered = unanswered
        self._failed = failed or {}
        self._clock, self._seconds = clock, seconds_per_call

    def offsets_for_times(self, request: list[TopicPartition], timeout: float) -> list[Any]:
        self.requests.append(len(request))
        self.timeouts.append(timeout)
        if self._clock is not None:
            self._clock[0] += self._seconds
        assert all(tp.offset == -1 for tp in request), "asked for anything but the end"
        return [self._answer(tp.topic, tp.partition) for tp in request]

    def _answer(self, topic: str, partition: int) -> Any:
        error = self._failed.get((topic, partition))
        if error is not None:
            return SimpleNamespace(topic=topic, partition=partition, offset=-1001, error=error)
        offset = -1 if (topic, partition) in self._unanswered else partition * 7
        return TopicPartition(topic, partition, offset)

    def list_topics(self, topic: str, timeout: float) -> None:
        self.metadata_asked.append(topic)


def test_the_ends_of_thousands_of_partitions_are_asked_in_small_requests_and_all_answered() -> None:
    admin = EndsAdmin()
    ends = last_stable_offsets(cast(AdminClient, admin), PARTITIONS)
    assert ends == {(t, p): p * 7 for t, p in PARTITIONS}
    assert admin.requests == [250] * 10


def test_ends_asked_without_waiting_are_asked_in_small_requests_too() -> None:
    admin = EndsAdmin()
    pending = ask_last_stable_offsets(cast(AdminClient, admin), PARTITIONS[:600])
    assert admin.requests == [250, 250, 100]
    assert pending.answered() == {(t, p): p * 7 for t, p in PARTITIONS[:600]}


def test_a_groups_offsets_of_thousands_of_partitions_are_read_in_small_requests() -> None:
    reader = PositionsReader([0.0])
    read = committed_with_metadata(cast(Consumer, reader), PARTITIONS)
    assert read == {(t, p): (p, "m") for t, p in PARTITIONS}
    assert reader.requests == [250] * 10


def test_a_read_in_many_requests_waits_no_longer_in_all_than_one_request_may(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    # Each request takes 12 s of a 30 s read: the third is given what is left, the fourth is not sent.
    reader = PositionsReader(clock, seconds_per_request=12.0)
    with pytest.raises(MirrorError, match="reading committed positions: Local: Timed out"):
        committed_with_metadata(cast(Consumer, reader), PARTITIONS[:1000])
    assert reader.timeouts == [30.0, 18.0, 6.0]


def test_ends_read_through_a_consumer_are_asked_in_small_lists_and_all_answered() -> None:
    reader = EndsReader()
    ends = stable_ends(cast(Consumer, reader), PARTITIONS)
    assert ends == {(t, p): p * 7 for t, p in PARTITIONS}
    assert reader.requests == [250] * 10


def test_an_end_its_leader_did_not_answer_is_no_end_and_the_topics_metadata_is_asked_again(
    clock: list[float],
) -> None:
    reader = EndsReader(unanswered=frozenset({("topic-001", 3)}))
    with pytest.raises(MirrorError, match="topic-001-3's leader gave no offset"):
        stable_ends(cast(Consumer, reader), PARTITIONS[:30])
    assert "topic-001" in reader.metadata_asked


def test_an_end_answered_with_an_error_fails_the_read_naming_its_partition(clock: list[float]) -> None:
    reader = EndsReader(failed={("topic-002", 4): KafkaError(KafkaError.LEADER_NOT_AVAILABLE)})
    with pytest.raises(MirrorError, match="topic-002-4"):
        stable_ends(cast(Consumer, reader), PARTITIONS[:30])
    assert len(reader.requests) > 1, "a leader not available yet is asked again before it fails"
    assert "topic-002" in reader.metadata_asked


def test_the_calls_of_one_read_share_one_deadline_and_running_out_fails_the_read(
    clock: list[float],
) -> None:
    reader = EndsReader(clock=clock, seconds_per_call=8.0)  # 10 calls a read: 80 s, past the 30 s bound
    with pytest.raises(MirrorError):
        stable_ends(cast(Consumer, reader), PARTITIONS)
    # Each call of a read is given what is left of the same 30 s, never 30 s of its own.
    first_read = reader.timeouts[:4]
    assert first_read == [30.0, 22.0, 14.0, 6.0], reader.timeouts
