"""When a copy task reads partitions again through new consumers: records waiting on the source,
none read for two looks, and the task not behind on what its consumers fetched."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror.source.fetch_watch import FetchWatch
from mirror.source.partition_copy import PartitionCopy


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    if isinstance(value, Exception):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


@dataclass
class SourceAdmin:
    """The source's read_committed ends, per partition; a partition in `leaderless` is answered
    with the error a dead leader gives."""

    ends: dict[int, int] = field(default_factory=dict)
    leaderless: set[int] = field(default_factory=set)
    asked: list[list[int]] = field(default_factory=list)

    def list_offsets(self, request: Mapping[TopicPartition, Any], **_: Any) -> dict[TopicPartition, Any]:
        self.asked.append(sorted(tp.partition for tp in request))
        return {
            tp: _done(KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)))
            if tp.partition in self.leaderless
            else _done(SimpleNamespace(offset=self.ends.get(tp.partition, 0)))
            for tp in request
        }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Watched:
    watch: FetchWatch
    clock: Clock
    parts: list[PartitionCopy]
    admins: list[SourceAdmin]

    def look(self, *, ran_dry: bool = True) -> list[tuple[str, int, int]]:
        """One look WATCH seconds after the last: what it found stuck, as (topic, partition, end)."""
        if ran_dry:
            self.watch.took(5, 10_000)
        self.clock.now += 10
        return [(part.topic, part.partition, end) for part, end in self.watch.stuck(self.parts)]


def _watched(ends: dict[int, int], *, leaderless: set[int] | None = None) -> Watched:
    clock = Clock()
    admins: list[SourceAdmin] = []

    def new_admin() -> Any:
        admins.append(SourceAdmin(dict(ends), set(leaderless or ())))
        return admins[-1]

    parts = [PartitionCopy("A->B", "t", p, "A.t", 100, position=10) for p in range(3)]
    watch = FetchWatch(new_admin, every=10, rebuild_every=60, clock=clock)
    return Watched(watch, clock, parts, admins)


def test_a_partition_with_records_waiting_and_none_read_for_two_looks_is_read_again() -> None:
    watched = _watched({0: 10, 1: 25, 2: 10})  # records 10-24 of t-1 wait; t-0 and t-2 are read to the end
    assert watched.look() == []  # the first look: nothing seen before
    assert watched.look() == []  # idle since the last: its end asked
    assert watched.admins[0].asked == [[0, 1, 2]]
    assert watched.look() == [("t", 1, 25)]


def test_a_partition_read_meanwhile_is_not_stuck() -> None:
    watched = _watched({0: 10, 1: 25, 2: 10})
    watched.look()
    watched.look()
    watched.parts[1].position = 12  # two records read and committed
    assert watched.look() == []


def test_a_partition_whose_records_are_in_the_open_transaction_is_not_stuck() -> None:
    watched = _watched({0: 10, 1: 25, 2: 10})
    watched.look()
    watched.look()
    watched.parts[1].upstream = [10, 11]
    assert watched.look() == []


def test_no_partition_is_stuck_while_the_task_is_behind_on_what_its_consumers_fetched() -> None:
    # Catch-up: every consume came back full, so librdkafka may simply not have got to t-1 yet.
    watched = _watched({0: 10, 1: 25, 2: 10})
    for _ in range(5):
        watched.watch.took(10_000, 10_000)
        assert watched.look(ran_dry=False) == []
    assert watched.admins == []  # nor are the source's ends asked


def test_a_partition_whose_leader_gives_no_end_is_not_stuck_and_the_next_look_asks_through_a_new_client() -> (
    None
):
    # A dead leader, no new one yet: its end is unknown, never taken as "records waiting".
    watched = _watched({0: 10, 1: 25, 2: 10}, leaderless={1})
    for _ in range(4):
        assert watched.look() == []
    # A failed answer may come of the client's stale leaders or epochs: each look after one asks
    # through a client made anew.
    assert len(watched.admins) >= 2


def test_a_partition_at_its_end_is_not_stuck() -> None:
    watched = _watched({0: 10, 1: 10, 2: 10})
    for _ in range(5):
        assert watched.look() == []


def test_partitions_are_read_again_at_most_once_a_rebuild_interval() -> None:
    watched = _watched({0: 10, 1: 25, 2: 10})
    watched.look()
    watched.look()
    assert watched.look() == [("t", 1, 25)]
    # Still not read (the same fault on the new consumers): asked again, but no sooner than 60 s on.
    watched.watch.restart()
    found = [watched.look() for _ in range(6)]
    assert found[:5] == [[]] * 5
    assert found[5] == [("t", 1, 25)]


def test_new_consumers_start_the_watch_over() -> None:
    watched = _watched({0: 10, 1: 25, 2: 10})
    watched.look()
    watched.look()
    watched.watch.restart()  # the task rewound: what the old consumers did not read says nothing
    assert watched.look() == []
    assert watched.look() == []
    assert watched.look() == [("t", 1, 25)]
