"""Where a copy task starts each partition, when the reads it decides from fail, come back partial
or cannot be decided yet: never a re-copy, never a skip (mirror.source.start).

The clients are fakes answering as confluent-kafka does; what they answer is what a 3-broker
target said while one broker was down (tests/reliability/test_replicated_faults.py runs it for real).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.config.flow_settings import FlowSettings
from mirror.errors import MirrorError
from mirror.kafka.offsets import truncation_point
from mirror.kafka.transactions import RetriableError
from mirror.source.losses import go_on_after_truncation, skip_lost_records
from mirror.source.partition_copy import PartitionCopy
from mirror.source.positions import (
    landed_offset,
    position_metadata,
    recorded_epoch,
    recorded_topic_id,
    unsynced_pair,
)
from mirror.source.start import read_positions
from mirror.source.stats import TaskStats
from tests.unit.flows import flow_a_to_b
from tests.unit.futures import done

TOPIC_ID = "AAAAAAAAAAEAAAAAAAAAAg"
NEW_TOPIC_ID = "AAAAAAAAAAMAAAAAAAAABA"
SOURCE_TOPIC_ID = "AAAAAAAAAAUAAAAAAAAABg"
SOURCE_EARLIEST = 7  # where a re-copy starts: no other decision lands there


def flow(**changes: Any) -> FlowSettings:
    return flow_a_to_b(["orders"], **changes)


def part(partition: int = 0) -> PartitionCopy:
    return PartitionCopy("A->B", "orders", partition, "A.orders", 100)


@dataclass
class FakePositions:
    """The positions group's committed offsets: (offset, metadata), or a KafkaError per partition."""

    committed_offsets: Mapping[int, tuple[int, str] | KafkaError]

    def committed(self, request: list[TopicPartition], timeout: float) -> list[SimpleNamespace]:
        # What librdkafka hands back: every partition, each with its offset or its error.
        answer = []
        for tp in request:
            found = self.committed_offsets.get(tp.partition)
            error = found if isinstance(found, KafkaError) else None
            offset, metadata = found if isinstance(found, tuple) else (OFFSET_INVALID, None)
            answer.append(
                SimpleNamespace(
                    topic=tp.topic, partition=tp.partition, offset=offset, metadata=metadata, error=error
                )
            )
        return answer


@dataclass
class FakeAdmin:
    """Topic IDs, and ends per partition: the log's end (read_uncommitted) and the read_committed
    end, which a transaction whose markers are pending holds back."""

    ids: Mapping[str, str]
    end: Mapping[int, int] = field(default_factory=dict)
    stable: Mapping[int, int] = field(default_factory=dict)
    earliest: int = 0
    asked_ends: int = 0
    metadata_refreshes: int = 0

    def list_topics(self, **_: object) -> None:
        self.metadata_refreshes += 1

    def describe_topics(self, topics: Any, **_: object) -> dict[str, Future[Any]]:
        return {
            name: done(SimpleNamespace(topic_id=self.ids[name]))
            if name in self.ids
            else done(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            for name in topics.topic_names
        }

    def list_offsets(self, request: Mapping[TopicPartition, Any], **kwargs: Any) -> dict[TopicPartition, Any]:
        self.asked_ends += 1
        committed = "READ_COMMITTED" in str(kwargs.get("isolation_level"))
        answers = {}
        for tp, spec in request.items():
            if type(spec).__name__ == "EarliestSpec":
                offset = self.earliest
            else:
                offset = (self.stable if committed else self.end).get(tp.partition, 0)
            answers[tp] = done(SimpleNamespace(offset=offset))
        return answers


class NoRemoteReads:
    """A remote reader a decision must not need."""

    def get_watermark_offsets(self, *_: object, **__: object) -> tuple[int, int]:
        raise AssertionError("the remote partition was read")


def start(
    parts: list[PartitionCopy],
    positions: FakePositions,
    target: FakeAdmin,
    *,
    settings: FlowSettings | None = None,
    remote: object | None = None,
    source_ids: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    reports: list[tuple[str, str]] = []
    read_positions(
        settings or flow(),
        parts,
        positions=cast(Consumer, positions),
        source_admin=cast(AdminClient, FakeAdmin(source_ids or {}, earliest=SOURCE_EARLIEST)),
        remote=cast(Consumer, remote or NoRemoteReads()),
        target_admin=cast(AdminClient, target),
        report=lambda kind, message: reports.append((kind, message)),
    )
    return reports


def test_a_position_carries_where_its_last_record_landed_and_the_remote_topics_id() -> None:
    metadata = position_metadata(41, TOPIC_ID)
    assert landed_offset(metadata) == 41
    assert recorded_topic_id(metadata) == TOPIC_ID
    # Written before topic IDs, by MM2 or `mirror offsets`: no ID, and maybe no landing either.
    assert (landed_offset("d=41"), recorded_topic_id("d=41")) == (41, None)
    assert (landed_offset(""), recorded_topic_id("")) == (-1, None)


def test_a_position_carries_the_source_leader_epoch_of_the_source_topic_it_was_read_from() -> None:
    metadata = position_metadata(41, TOPIC_ID, 7, SOURCE_TOPIC_ID)
    assert (landed_offset(metadata), recorded_topic_id(metadata)) == (41, TOPIC_ID)
    assert recorded_epoch(metadata, SOURCE_TOPIC_ID) == 7
    # The source topic deleted and made again: its epochs start over and say nothing of this log.
    assert recorded_epoch(metadata, NEW_TOPIC_ID) == -1
    assert recorded_epoch(position_metadata(41, TOPIC_ID), SOURCE_TOPIC_ID) == -1  # unknown: no check
    assert recorded_epoch("d=41;t=" + TOPIC_ID, SOURCE_TOPIC_ID) == -1  # written before epochs were


def test_the_committed_epoch_checks_the_source_log_only_while_the_source_topic_is_the_same() -> None:
    target = FakeAdmin({"A.orders": TOPIC_ID})
    committed = FakePositions({0: (500, position_metadata(41, TOPIC_ID, 7, SOURCE_TOPIC_ID))})
    same, recreated = part(), part()
    start([same], committed, target, source_ids={"orders": SOURCE_TOPIC_ID})
    start([recreated], committed, target, source_ids={"orders": NEW_TOPIC_ID})
    assert (same.position, same.epoch, same.source_topic_id) == (500, 7, SOURCE_TOPIC_ID)
    # A new source topic: no epoch, so its shorter log is taken for what it is (on_source_truncation).
    assert (recreated.position, recreated.epoch, recreated.source_topic_id) == (500, -1, NEW_TOPIC_ID)
    # The position is still of the old topic: a shorter log is a new topic's, not a truncation.
    assert recreated.position_topic_id == SOURCE_TOPIC_ID != recreated.source_topic_id


def test_a_position_committed_while_its_last_records_sync_was_due_says_so() -> None:
    assert unsynced_pair(position_metadata(41, TOPIC_ID, 7, SOURCE_TOPIC_ID, unsynced=40)) == (40, 41)
    # A sync covered the last record, or the position was written by MM2, `mirror offsets` or an
    # older build: nothing is due.
    assert unsynced_pair(position_metadata(41, TOPIC_ID, 7, SOURCE_TOPIC_ID)) is None
    assert unsynced_pair("d=41") is None
    assert unsynced_pair("") is None


def test_the_task_that_opens_next_sends_the_trailing_sync_the_last_one_committed_without() -> None:
    # The last task committed records 0-40 and was killed (or fenced by a new generation) before
    # the quiet partition's trailing sync went out: nothing will be copied, so only this says it.
    opened = part()
    committed = FakePositions({0: (41, position_metadata(41, TOPIC_ID, unsynced=40))})
    start([opened], committed, FakeAdmin({"A.orders": TOPIC_ID}))
    assert opened.take_trailing_sync() == (40, 41)
    synced = part()
    start(
        [synced], FakePositions({0: (41, position_metadata(41, TOPIC_ID))}), FakeAdmin({"A.orders": TOPIC_ID})
    )
    assert synced.take_trailing_sync() is None


def test_a_commit_that_landed_though_the_task_saw_it_fail_still_gets_its_trailing_sync() -> None:
    # Records 0-4 copied; MM2's triggers sync the first, the last is due once the partition is quiet.
    copying = part()
    copying.upstream, copying.downstream = list(range(5)), list(range(5))
    assert copying.take_syncs() == [(0, 0)]
    # What the commit writes with the position (mirror.source.transaction).
    metadata = position_metadata(copying.downstream_end(), TOPIC_ID, unsynced=copying.unsynced_upstream())
    # The commit timed out here but landed: the task drops what it read and rewinds to the target's word.
    copying.discard()
    assert copying.take_trailing_sync() is None
    start([copying], FakePositions({0: (5, metadata)}), FakeAdmin({"A.orders": TOPIC_ID}))
    assert copying.position == 5
    assert copying.take_trailing_sync() == (4, 4)


def test_with_syncs_on_the_source_the_last_records_pair_outlives_a_task_killed_before_they_went_out() -> None:
    # Syncs on the source go out after the target's commit: the sync MM2's triggers gave record 4
    # (a partition's first copied record), is lost if the task dies right after the commit. The
    # position still names record 4.
    copying = part()
    copying.upstream, copying.downstream = [4], [4]
    assert copying.take_syncs() == [(4, 4)]
    assert copying.unsynced_upstream() == -1  # on the target, in the commit itself: nothing due
    metadata = position_metadata(
        copying.downstream_end(), TOPIC_ID, unsynced=copying.unsynced_upstream(syncs_after_commit=True)
    )
    copying.committed_now()
    # Positions written again with nothing copied since (swept past a marker) still name it.
    assert copying.unsynced_upstream(syncs_after_commit=True) == 4
    opened = part()
    start([opened], FakePositions({0: (5, metadata)}), FakeAdmin({"A.orders": TOPIC_ID}))
    assert opened.take_trailing_sync() == (4, 4)
    assert opened.unsynced_upstream(syncs_after_commit=True) == 4  # and the next task's position too


# What librdkafka 2.16 said when an unclean leader election left the source log at 50 under a
# position of 100 (auto.offset.reset=error), seen against a 3-broker cluster here.
TRUNCATED = (
    "Partition log truncation detected at offset 100 (leader epoch 0): broker end offset is 50 "
    "(offset leader epoch 0). Reset to INVALID.: Local: Partition log truncation detected (broker 2)"
)


def test_a_truncated_source_log_is_told_from_records_deleted_by_retention() -> None:
    assert truncation_point(KafkaError(KafkaError._AUTO_OFFSET_RESET, TRUNCATED)) == 50
    retention = "fetch failed due to requested offset not available on the broker: Offset out of range"
    assert truncation_point(KafkaError(KafkaError._AUTO_OFFSET_RESET, retention)) is None
    # An epoch above the leader's latest (a re-created topic's log): no end found, no truncation.
    no_epoch = "No epoch found less or equal to offset 100 (leader epoch 9): broker end offset is -1"
    assert truncation_point(KafkaError(KafkaError._AUTO_OFFSET_RESET, no_epoch)) is None


def test_records_copied_then_lost_by_the_source_are_reported_and_the_copy_goes_on_where_it_ends() -> None:
    copied, stats, reports = part(), TaskStats("A->B", 0), []
    copied.position = 100
    at = go_on_after_truncation(flow(), copied, 50, stats, lambda kind, line: reports.append((kind, line)))
    assert at == 50  # the source's next record lands at 50: copied, not skipped
    assert stats.copied_then_lost == {"orders:0": 50}
    assert [kind for kind, _ in reports] == ["truncated"]
    assert "offsets already copied (50..99)" in reports[0][1] and "unclean leader election" in reports[0][1]


def test_a_truncation_under_the_open_transaction_aborts_it_and_one_past_the_copied_loses_nothing() -> None:
    copied, stats = part(), TaskStats("A->B", 0)
    copied.position, copied.upstream = 100, [100, 101, 102]
    with pytest.raises(RetriableError, match="under records of the open transaction"):
        go_on_after_truncation(flow(), copied, 101, stats, lambda *_: None)
    # Only records not read yet were lost: go on after the last one copied, nothing reported.
    assert go_on_after_truncation(flow(), copied, 103, stats, lambda *_: None) == 103
    assert stats.copied_then_lost == {}


def test_a_transaction_whose_markers_wait_for_a_new_leader_is_no_proof_of_a_recreated_topic() -> None:
    # The broker-loss bug: the last copied record landed at 41 in a committed transaction whose
    # marker waits for the partition's new leader, so the read_committed end is held at 30.
    parts = [part()]
    target = FakeAdmin({"A.orders": TOPIC_ID}, end={0: 43}, stable={0: 30})
    reports = start(parts, FakePositions({0: (500, position_metadata(41, TOPIC_ID))}), target)
    assert reports == []
    assert parts[0].position == 500
    assert parts[0].remote_topic_id == TOPIC_ID


def test_a_position_without_a_topic_id_is_judged_by_the_logs_end_not_the_read_committed_end() -> None:
    parts = [part()]
    target = FakeAdmin({"A.orders": TOPIC_ID}, end={0: 43}, stable={0: 30})
    assert start(parts, FakePositions({0: (500, "d=41")}), target) == []
    assert parts[0].position == 500


def test_a_remote_topic_with_another_id_was_re_created_and_is_copied_again() -> None:
    parts = [part()]
    target = FakeAdmin({"A.orders": NEW_TOPIC_ID}, end={0: 0}, stable={0: 0})
    reports = start(parts, FakePositions({0: (500, position_metadata(41, TOPIC_ID))}), target)
    assert parts[0].position == SOURCE_EARLIEST
    assert [kind for kind, _ in reports] == ["recopied"]
    assert target.asked_ends == 0  # the topic ID is the proof: the remote end needs no read


def test_a_re_created_remote_topic_stops_the_flow_when_so_configured_naming_the_proof() -> None:
    settings = flow(on_remote_topic_deleted="fail")
    target = FakeAdmin({"A.orders": NEW_TOPIC_ID})
    with pytest.raises(MirrorError, match=f"is a new topic.*{NEW_TOPIC_ID}.*{TOPIC_ID}"):
        start([part()], FakePositions({0: (500, position_metadata(41, TOPIC_ID))}), target, settings=settings)


@pytest.mark.parametrize(
    "code",
    [KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR],
)
def test_a_position_that_could_not_be_read_is_no_missing_position(
    code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mirror.kafka.clients.time.sleep", lambda _: None)
    monkeypatch.setattr("mirror.kafka.clients.time.monotonic", iter(range(0, 10_000, 10)).__next__)
    parts = [part(0), part(1)]
    positions = FakePositions({0: (500, position_metadata(41, TOPIC_ID)), 1: KafkaError(code)})
    with pytest.raises(MirrorError, match=r"A\.orders-1"):
        start(parts, positions, FakeAdmin({"A.orders": TOPIC_ID}))
    assert [p.position for p in parts] == [0, 0]  # nothing decided, nothing re-copied


def test_a_cluster_without_topic_ids_is_judged_by_the_logs_end_not_by_its_zero_id() -> None:
    # Topics get IDs once a cluster runs Kafka 2.8 or later; before, every topic has the zero ID.
    parts = [part()]
    target = FakeAdmin({"A.orders": "AAAAAAAAAAAAAAAAAAAAAA"}, end={0: 43}, stable={0: 43})
    assert start(parts, FakePositions({0: (500, position_metadata(41, TOPIC_ID))}), target) == []
    assert (parts[0].position, parts[0].remote_topic_id) == (500, None)


def test_a_remote_topic_missing_from_the_cluster_is_waited_for() -> None:
    with pytest.raises(RetriableError, match=r"A\.orders does not exist on B"):
        start([part()], FakePositions({0: (500, position_metadata(41, TOPIC_ID))}), FakeAdmin({}))


def test_a_leader_that_gave_no_offset_is_asked_again_not_read_as_offset_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka answers a failed ListOffsets request to one broker with offset -1001, no error.
    monkeypatch.setattr("mirror.kafka.clients.time.sleep", lambda _: None)
    monkeypatch.setattr("mirror.kafka.clients.time.monotonic", iter(range(0, 10_000, 10)).__next__)
    target = FakeAdmin({"A.orders": TOPIC_ID}, end={0: OFFSET_INVALID}, stable={0: OFFSET_INVALID})
    parts = [part()]
    with pytest.raises(MirrorError, match="leader gave no offset"):
        start(parts, FakePositions({0: (500, "d=41")}), target)
    assert parts[0].position == 0  # not even the committed 500: nothing was decided
    assert target.metadata_refreshes > 0  # the dead leader's successor is looked up


@dataclass
class FakeRemote:
    """A read_committed reader of the remote partition: (low, read_committed end)."""

    low: int
    stable: int
    assigned: list[TopicPartition] = field(default_factory=list)

    def get_watermark_offsets(self, tp: TopicPartition, **_: object) -> tuple[int, int]:
        return self.low, self.stable

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions

    def unassign(self) -> None:
        self.assigned = []

    def consume(self, **_: object) -> list[Any]:
        raise AssertionError("an undecided partition was read as if decided")


def test_a_lost_position_over_an_undecided_remote_partition_is_waited_for_not_recopied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The position is gone and the offsets topic has one, but the remote partition's records are
    # in a transaction not decided yet: it only looks empty read_committed.
    monkeypatch.setattr("mirror.source.start._stored_positions", lambda _: {("orders", 0): 500})
    settings = flow()
    parts = [part()]
    parts[0].committed = 500  # the task had a position a moment ago
    target = FakeAdmin({"A.orders": TOPIC_ID}, end={0: 43}, stable={0: 0})
    with pytest.raises(RetriableError, match="not decided yet"):
        start(parts, FakePositions({}), target, settings=settings, remote=FakeRemote(low=0, stable=0))


def test_a_source_end_held_back_by_an_undecided_transaction_is_no_truncation() -> None:
    # The copy's position is 120; the source's read_committed end reads 100 while a transaction's
    # markers wait, its log ends at 130: nothing was lost, nothing is skipped, nothing re-copied.
    copy = part()
    copy.position = 120
    reports: list[tuple[str, str]] = []
    position = skip_lost_records(
        flow(),
        copy,
        cast(Consumer, FakeRemote(low=0, stable=100)),
        cast(AdminClient, FakeAdmin({}, end={0: 130})),
        stats=TaskStats("A->B", 0),
        report=lambda kind, message: reports.append((kind, message)),
    )
    assert (position, reports, copy.truncated) == (120, [], 0)


@pytest.mark.parametrize("source_now", [SOURCE_TOPIC_ID, NEW_TOPIC_ID], ids=["same topic", "re-created"])
def test_a_log_ending_below_the_position_is_a_truncation_while_the_topic_id_is_the_same(
    source_now: str,
) -> None:
    # No epoch to check (a position written before epochs were): the source log ends at 80, below
    # the 120 copied. Under the same topic ID it was truncated; under a new one the topic is new.
    copy, stats = part(), TaskStats("A->B", 0)
    copy.position, copy.position_topic_id = 120, SOURCE_TOPIC_ID
    reports: list[tuple[str, str]] = []
    position = skip_lost_records(
        flow(),
        copy,
        cast(Consumer, FakeRemote(low=0, stable=80)),
        cast(AdminClient, FakeAdmin({"orders": source_now}, end={0: 80})),
        stats=stats,
        report=lambda kind, message: reports.append((kind, message)),
    )
    if source_now == SOURCE_TOPIC_ID:
        assert (position, stats.copied_then_lost) == (80, {"orders:0": 40})
        assert "unclean leader election" in reports[0][1]
    else:
        assert (position, stats.copied_then_lost) == (0, {})  # on_source_truncation: continue
        assert "the topic was deleted and re-created" in reports[0][1]


def test_no_trailing_sync_of_a_source_topic_since_deleted_and_made_again() -> None:
    committed = FakePositions({0: (41, position_metadata(41, TOPIC_ID, 7, SOURCE_TOPIC_ID, unsynced=40))})
    same, recreated = part(), part()
    start([same], committed, FakeAdmin({"A.orders": TOPIC_ID}), source_ids={"orders": SOURCE_TOPIC_ID})
    start([recreated], committed, FakeAdmin({"A.orders": TOPIC_ID}), source_ids={"orders": NEW_TOPIC_ID})
    assert same.take_trailing_sync() == (40, 41)
    assert recreated.take_trailing_sync() is None  # offset 40 of the old topic says nothing of the new one
    # The source's topic ID unknown as the task opens (the source away): the pair is kept.
    unknown = part()
    start([unknown], committed, FakeAdmin({"A.orders": TOPIC_ID}), source_ids={})
    assert unknown.take_trailing_sync() == (40, 41)
