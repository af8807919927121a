"""When a copy task reads partitions again through new consumers: records waiting on the source,
none read for two looks, and no fetch answer for them since (the end their consumer last heard of
still below the source's)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror.source.fetch_watch import CHECKS_PER_EPOCH, FetchWatch, check_against_leaders
from mirror.source.partition_copy import PartitionCopy
from mirror.source.split_reader import SplitReader
from tests.unit.clock import Clock
from tests.unit.futures import done


@dataclass
class SourceAdmin:
    """The source's read_committed ends, per partition. A partition in `leaderless` is answered as
    librdkafka answers for a dead leader: an error, no offset (-1001, when the whole request to
    that broker failed), or not yet (a request waiting out its timeout)."""

    ends: dict[int, int] = field(default_factory=dict)
    leaderless: dict[int, str] = field(default_factory=dict)
    asked: list[list[int]] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)  # each leader's epoch, as answers say it

    def list_offsets(self, request: Mapping[TopicPartition, Any], **_: Any) -> dict[TopicPartition, Any]:
        self.asked.append(sorted(tp.partition for tp in request))
        return {tp: self._answer(tp.partition) for tp in request}

    def _answer(self, partition: int) -> Future[Any]:
        how = self.leaderless.get(partition)
        if how == "error":
            return done(KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)))
        if how == "no offset":
            return done(SimpleNamespace(offset=-1001))
        if how == "pending":
            return Future()
        epoch = self.epochs.get(partition, 0)
        return done(SimpleNamespace(offset=self.ends.get(partition, 0), leader_epoch=epoch))


@dataclass
class Watched:
    watch: FetchWatch
    clock: Clock
    parts: list[PartitionCopy]
    admins: list[SourceAdmin]

    def look(
        self, *, drained: bool = True, paused: frozenset[tuple[str, int]] = frozenset()
    ) -> list[tuple[str, int, int]]:
        """One look WATCH seconds after the last, a read having come back empty meanwhile unless
        `drained` is false, the task not fetching `paused` (mirror.source.idle_pause): what it
        found stuck, as (topic, partition, end)."""
        self.watch.read(5)
        if drained:
            self.watch.read(0)
        self.clock.now += 10
        return [(part.topic, part.partition, end) for part, end in self.watch.stuck(self.parts, paused)]


def _watched(
    ends: dict[int, int],
    *,
    leaderless: dict[int, str] | None = None,
    fetched: dict[int, int] | None = None,
    epochs: dict[int, int] | None = None,
) -> Watched:
    """Partitions t-0..2, each read to 10; the source's ends `ends`; the ends the consumer's last
    fetch answers told, `fetched` (10 unless said: none told since the partition was read to 10)."""
    clock = Clock()
    admins: list[SourceAdmin] = []
    epochs = {} if epochs is None else epochs  # shared by every admin made: the source's, changed by a test

    def new_admin() -> Any:
        admins.append(SourceAdmin(dict(ends), dict(leaderless or {}), epochs=epochs))
        return admins[-1]

    def fetched_end(topic: str, partition: int) -> int:
        assert topic == "t"
        return (fetched or {}).get(partition, 10)

    parts = [PartitionCopy("A->B", "t", p, "A.t", 100, position=10) for p in range(3)]
    watch = FetchWatch(new_admin, fetched_end, every=10, rebuild_every=60, clock=clock)
    return Watched(watch, clock, parts, admins)


def test_a_partition_with_records_waiting_and_none_fetched_for_two_looks_is_read_again() -> None:
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


def test_a_partition_fetched_but_starved_in_a_catch_up_is_not_stuck() -> None:
    # Capped fetch answers held other partitions' records only, but each told t-1's end: it is fetched.
    watched = _watched({0: 10, 1: 25, 2: 10}, fetched={1: 25})
    for _ in range(5):
        assert watched.look() == []


def test_nothing_is_stuck_while_the_task_is_behind_on_what_it_fetched() -> None:
    # A throttled task, a slow target: librdkafka's queue stays full and it fetches nothing at all,
    # so every cached end goes stale; no read came back empty, and nothing is judged.
    watched = _watched({0: 10, 1: 25, 2: 10})
    for _ in range(5):
        assert watched.look(drained=False) == []
    assert watched.look() == [("t", 1, 25)]  # it took everything fetched: now it is judged


def test_a_partition_at_its_end_is_not_stuck() -> None:
    watched = _watched({0: 10, 1: 10, 2: 10})
    for _ in range(5):
        assert watched.look() == []


@pytest.mark.parametrize("how", ["error", "no offset", "pending"])
def test_a_partition_whose_leader_gives_no_end_is_not_stuck_and_the_next_look_asks_through_a_new_client(
    how: str,
) -> None:
    # A dead leader, no new one yet: its end is unknown, never taken as "records waiting".
    watched = _watched({0: 10, 1: 25, 2: 10}, leaderless={1: how})
    for _ in range(3):
        assert watched.look() == []
    # The client may keep asking the dead leader (its cached metadata), or with a stale epoch:
    # each look after a failed answer asks through a client made anew.
    assert [admin.asked for admin in watched.admins] == [[[0, 1, 2]], [[0, 1, 2]]]
    watched.look()
    assert len(watched.admins) == 3


def test_partitions_are_read_again_at_most_once_a_rebuild_interval() -> None:
    watched = _watched({0: 10, 1: 25, 2: 10})
    watched.look()
    watched.look()
    assert watched.look() == [("t", 1, 25)]
    # Still not fetched (the same fault on the new consumers): found again, but acted on no sooner
    # than 60 s after the last rebuild.
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


def _named_for_a_check(watched: Watched) -> list[tuple[int, int]]:
    return [(part.partition, epoch) for part, epoch in watched.watch.to_check()]


def test_an_idle_partition_is_named_for_a_check_each_time_its_source_leader_epoch_rises() -> None:
    # An unclean election: a replica that lacked the tail leads, at a new epoch, and the log ends
    # where the consumer waits again once it takes new records: only the epoch tells.
    epochs = {0: 0, 1: 0, 2: 0}
    watched = _watched({0: 10, 1: 10, 2: 10}, epochs=epochs)
    for part in watched.parts:
        part.epoch = 0  # copied at the leader's epoch
    watched.look()
    watched.look()
    watched.look()
    assert _named_for_a_check(watched) == [(0, 0), (1, 0), (2, 0)]  # first seen: the task compares
    watched.look()
    assert _named_for_a_check(watched) == []  # the same epochs, copied at them: named once
    epochs[1] = 2
    watched.look()  # reads the answers asked before the election, asks again
    assert _named_for_a_check(watched) == []
    watched.look()
    assert _named_for_a_check(watched) == [(1, 2)]


def test_a_partition_paused_while_idle_is_never_stuck_though_its_epoch_is_still_checked() -> None:
    # Its consumer fetches it no more, on purpose: the end that consumer knows stays behind.
    epochs = {0: 0, 1: 0, 2: 0}
    watched = _watched({0: 10, 1: 25, 2: 25}, epochs=epochs)
    for part in watched.parts:
        part.epoch = 0
    paused = frozenset({("t", 1)})
    assert [watched.look(paused=paused) for _ in range(3)] == [[], [], [("t", 2, 25)]]
    watched.watch.to_check()
    epochs[1] = 2
    watched.look(paused=paused)
    watched.look(paused=paused)
    assert _named_for_a_check(watched) == [(1, 2)]


def _checked_at_their_epoch() -> tuple[Watched, dict[int, int]]:
    """Partitions t-0..2, copied at their leaders' epoch 0 and idle long enough to have had their
    first check; and the leaders' epochs, for a test to change."""
    epochs = {0: 0, 1: 0, 2: 0}
    watched = _watched({0: 10, 1: 10, 2: 10}, epochs=epochs)
    for part in watched.parts:
        part.epoch = 0
    for _ in range(4):
        watched.look()
    watched.watch.to_check()
    return watched, epochs


def _named_at_looks(
    watched: Watched, epochs: dict[int, int], leader_epochs: list[int]
) -> list[list[tuple[int, int]]]:
    """What each look names, partition 1's leader at the epochs given, one a look; each look
    judges the answers to what the look before asked."""
    named = []
    for epoch in leader_epochs:
        epochs[1] = epoch
        watched.look()
        named.append(_named_for_a_check(watched))
    return named


def test_a_partition_copied_at_an_older_epoch_is_named_again_at_the_next_looks_a_few_times() -> None:
    # One check can come to nothing (librdkafka skips a seek's check while an older one is in
    # flight): a CI run left 2 of 4 partitions at the old end after one check each.
    watched, epochs = _checked_at_their_epoch()
    named = _named_at_looks(watched, epochs, [2] * (CHECKS_PER_EPOCH + 3))
    assert named == [[]] + [[(1, 2)]] * CHECKS_PER_EPOCH + [[], []]
    # Another election: checked again as many times.
    assert _named_at_looks(watched, epochs, [3, 3]) == [[], [(1, 3)]]


def test_an_answer_from_before_the_election_does_not_count_as_a_check() -> None:
    # A leader that had not yet heard of the election answers with the older epoch: only answers
    # at the new one count, so the partition is still checked as many times at it.
    watched, epochs = _checked_at_their_epoch()
    named = _named_at_looks(watched, epochs, [2, 2, 1, 1, 2, 2, 2])
    assert named == [[], [(1, 2)], [(1, 2)], [], [], [(1, 2)], []]  # three in all at epoch 2


def test_a_partition_read_or_holding_open_records_is_not_named_for_a_check() -> None:
    # Moving, it is no idle consumer at an old end: what it reads carries the new epoch.
    epochs = {0: 3, 1: 3, 2: 3}
    watched = _watched({0: 10, 1: 10, 2: 10}, epochs=epochs)
    watched.look()
    watched.look()
    watched.parts[0].position = 12
    watched.parts[1].upstream = [10, 11]
    watched.look()
    assert _named_for_a_check(watched) == [(2, 3)]


def test_new_consumers_have_every_idle_partition_checked_again() -> None:
    # assign() checks no position against the leader's epochs: a rewind's consumers are checked
    # by the watch, as the first ones were.
    watched = _watched({0: 10, 1: 10, 2: 10}, epochs={0: 1, 1: 1, 2: 1})
    for _ in range(3):
        watched.look()
    assert len(_named_for_a_check(watched)) == 3
    watched.watch.restart()
    for _ in range(3):
        watched.look()
    assert len(_named_for_a_check(watched)) == 3


class Reader:
    """A SplitReader's two calls a check makes: the consumer's positions (with the epoch it read
    at), and the consumer to seek; seeks recorded as (partition, offset, leader epoch)."""

    def __init__(self, read_epochs: dict[int, int]) -> None:
        self.read_epochs = read_epochs
        self.seeks: list[tuple[int, int, int]] = []

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, 10, leader_epoch=self.read_epochs.get(tp.partition, -1))
            for tp in partitions
        ]

    def reader_of(self, topic: str, partition: int) -> Any:
        return self

    def seek(self, target: TopicPartition) -> None:
        self.seeks.append((target.partition, target.offset, target.leader_epoch))


def test_a_check_seeks_with_the_epoch_of_what_was_copied_where_the_source_leader_is_past_it() -> None:
    parts = [PartitionCopy("A->B", "t", p, "A.t", 100, position=10) for p in range(3)]
    parts[0].epoch = 0  # copied at epoch 0; the consumer already names the new leader's epoch
    parts[1].epoch = -1  # nothing committed with an epoch: the consumer's
    parts[2].epoch = 4  # copied at the source's epoch: nothing to check
    reader = Reader({0: 2, 1: 1, 2: 4})
    sought = check_against_leaders(cast(SplitReader, reader), [(parts[0], 2), (parts[1], 2), (parts[2], 4)])
    assert [(part.partition, epoch, leader) for part, epoch, leader in sought] == [(0, 0, 2), (1, 1, 2)]
    assert reader.seeks == [(0, 10, 0), (1, 10, 1)]
    assert parts[0].sought and parts[1].sought and not parts[2].sought
