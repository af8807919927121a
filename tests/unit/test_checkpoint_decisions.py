"""What the checkpoint task decides without a broker: names, which offsets it translates, what it
restores, and what it writes into target groups (MM2's MirrorCheckpointTaskTest, CheckpointStoreTest).

The task's state is fed through fake tails of the two internal topics, and the group listings
through a fake admin, so the decisions run exactly as in a round, minus the clusters.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka.admin import AdminClient

from mirror.checkpoint import task
from mirror.checkpoint.checkpoints import CheckpointStore, plan_group_sync
from mirror.checkpoint.task import CheckpointRow, _FlowState, _translate
from mirror.config.flow_settings import FlowSettings
from mirror.errors import KafkaClientError, MirrorError, NotAuthorizedError
from mirror.flow.tail import PartitionTail, TailRecord
from mirror.kafka.group_admin import CommittedOffset, group_offsets
from mirror.kafka.wire import Checkpoint, OffsetSync
from tests.unit.flows import flow_a_to_b

# librdkafka's answer for a partition the group has no offset for (RD_KAFKA_OFFSET_INVALID).
OFFSET_INVALID = -1001


def flow(replication_policy: str = "default", separator: str = ".") -> FlowSettings:
    """Flow A->B whose filter names `orders`, `payments` and `B.orders` (a cycle: never copied)."""
    return flow_a_to_b(
        ["orders", "payments", "B.orders"], replication_policy=replication_policy, separator=separator
    )


class FakeTail:
    """Stands in for a PartitionTail: catch_up() hands out what was appended since the last call."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.partition = 0
        self._records: list[TailRecord] = []
        self._read = 0

    def append(self, key: bytes | None, value: bytes | None) -> None:
        self._records.append(TailRecord(key, value, timestamp_ms=0, offset=len(self._records)))

    def catch_up(self, *, timeout_seconds: float = 60.0) -> list[TailRecord]:
        new = self._records[self._read :]
        self._read = len(self._records)
        return new

    def close(self) -> None:
        pass


def flow_state(
    settings: FlowSettings,
    *,
    syncs: Iterable[OffsetSync] = (),
    checkpoints: Iterable[Checkpoint] = (),
) -> tuple[_FlowState, FakeTail, FakeTail]:
    """A flow's state whose internal topics hold `syncs` and `checkpoints`; not caught up yet."""
    sync_tail, checkpoint_tail = (
        FakeTail(settings.offset_syncs_topic()),
        FakeTail(settings.checkpoints_topic()),
    )
    for sync in syncs:
        sync_tail.append(sync.key(), sync.value())
    for checkpoint in checkpoints:
        checkpoint_tail.append(checkpoint.key(), checkpoint.value())
    state = _FlowState(
        settings,
        sync_tail=cast(PartitionTail, sync_tail),
        checkpoint_tail=cast(PartitionTail, checkpoint_tail),
    )
    return state, sync_tail, checkpoint_tail


def committed(
    group: str, *offsets: tuple[str, int, int]
) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
    """One group's source offsets as group_offsets() answers them: (topic, partition, offset)."""
    return {group: {(topic, partition): CommittedOffset(offset, "") for topic, partition, offset in offsets}}


@dataclass(frozen=True)
class ListedOffset:
    """A partition of a ListConsumerGroupOffsets answer, as confluent-kafka hands it over."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    error: object | None = None


@dataclass(frozen=True)
class ListedGroup:
    topic_partitions: list[ListedOffset] = field(default_factory=list)


class FakeGroupAdmin:
    """Answers list_consumer_group_offsets from fixed listings, as the admin client's futures do."""

    def __init__(self, listings: dict[str, list[ListedOffset]]) -> None:
        self._listings = listings

    def list_consumer_group_offsets(
        self, requests: list[ConsumerGroupTopicPartitions], **_: object
    ) -> dict[str, Future[ListedGroup]]:
        (request,) = requests
        group: str = request.group_id
        future: Future[ListedGroup] = Future()
        future.set_result(ListedGroup(self._listings.get(group, [])))
        return {group: future}


def listed(listings: dict[str, list[ListedOffset]]) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
    return group_offsets(cast(AdminClient, FakeGroupAdmin(listings)), sorted(listings), what="cluster X")


# Naming: which remote partition a checkpoint names (MM2's renameTopicPartition).


def test_a_checkpoint_of_a_local_topic_names_its_remote_copy_on_the_target() -> None:
    settings = flow()
    assert settings.checkpoint_topic_name("orders") == "A.orders"
    # A topic A got from a third cluster C is one hop further from its origin on B.
    assert settings.checkpoint_topic_name("C.orders") == "A.C.orders"


def test_a_checkpoint_of_a_topic_that_came_from_the_target_names_the_original_topic() -> None:
    # B.orders on A is B's own `orders`: a group that read the copy resumes on the original.
    assert flow().checkpoint_topic_name("B.orders") == "orders"


def test_checkpoint_topic_names_use_the_flows_separator() -> None:
    settings = flow(separator="_")
    assert settings.checkpoint_topic_name("orders") == "A_orders"
    assert settings.checkpoint_topic_name("B_orders") == "orders"
    assert settings.checkpoint_topic_name("B.orders") == "A_B.orders"


def test_under_the_identity_policy_a_checkpoint_names_the_topic_unchanged() -> None:
    # Every topic counts as coming from the source, so not even `B.orders` is renamed.
    settings = flow(replication_policy="identity")
    assert settings.checkpoint_topic_name("orders") == "orders"
    assert settings.checkpoint_topic_name("B.orders") == "B.orders"


# Translation: which committed source offsets become checkpoints.


def test_a_group_offset_becomes_a_checkpoint_of_the_remote_partition_with_its_metadata() -> None:
    state, _, _ = flow_state(flow(), syncs=[OffsetSync("orders", 2, 3, 4), OffsetSync("payments", 6, 7, 8)])
    state.catch_up()
    offsets = {
        "g9": {("orders", 2): CommittedOffset(10, "from g9")},
        "g13": {("payments", 6): CommittedOffset(7, "")},
    }
    assert _translate(state, offsets) == [
        Checkpoint("g13", "A.payments", 6, 7, 8, ""),  # exactly at a sync: its downstream offset
        Checkpoint("g9", "A.orders", 2, 10, 5, "from g9"),  # past it: one record past the sync
    ]


def test_a_partition_without_offset_syncs_gets_no_checkpoint_while_a_synced_one_does() -> None:
    state, _, _ = flow_state(flow(), syncs=[OffsetSync("orders", 0, 3, 4)])
    state.catch_up()
    checkpoints = _translate(
        state, committed("g9", ("orders", 0, 10), ("orders", 1, 10), ("payments", 0, 10))
    )
    assert [(c.topic, c.partition) for c in checkpoints] == [("A.orders", 0)]


def test_a_group_older_than_every_kept_sync_gets_no_checkpoint() -> None:
    state, _, _ = flow_state(flow(), syncs=[OffsetSync("orders", 0, 100, 40)])
    state.catch_up()
    assert _translate(state, committed("g", ("orders", 0, 99))) == []
    assert len(_translate(state, committed("g", ("orders", 0, 100)))) == 1


def test_a_negative_upstream_offset_gets_no_checkpoint() -> None:
    state, _, _ = flow_state(flow(), syncs=[OffsetSync("orders", 0, 0, 0)])
    state.catch_up()
    assert _translate(state, committed("g", ("orders", 0, -1), ("orders", 0, OFFSET_INVALID))) == []


def test_missing_negative_and_deleted_topics_committed_offsets_are_left_out_of_a_groups_listing() -> None:
    offsets = listed(
        {
            "g": [
                ListedOffset("orders", 0, 10, metadata=None),
                ListedOffset("orders", 1, -1),  # reset to -1 by a non-Java client
                ListedOffset("orders", 2, OFFSET_INVALID),  # no offset committed
                ListedOffset("orders", 3, 10, error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)),
                ListedOffset("payments", 0, 0, metadata="m"),
            ],
            "empty": [],
        }
    )
    assert offsets == {
        "g": {("orders", 0): CommittedOffset(10, ""), ("payments", 0): CommittedOffset(0, "m")},
        "empty": {},
    }


def test_a_committed_offset_that_could_not_be_read_fails_the_listing_instead_of_being_left_out() -> None:
    # Left out, the partition would look uncommitted: a target group synced without it, a
    # migration moving the group without it.
    unread = ListedOffset(
        "orders", 1, OFFSET_INVALID, error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    )
    with pytest.raises(MirrorError, match="orders"):
        listed({"g": [ListedOffset("orders", 0, 10), unread]})


def test_topics_the_flow_does_not_copy_get_no_checkpoint() -> None:
    # `B.orders` matches the filter but came from B: copying it to B would be a cycle, so it has
    # no syncs and the task does not even ask for them.
    syncs = [OffsetSync(topic, 0, 0, 0) for topic in ("orders", "invoices", "B.orders")]
    state, _, _ = flow_state(flow(), syncs=syncs)
    state.catch_up()
    checkpoints = _translate(state, committed("g", ("orders", 0, 0), ("invoices", 0, 0), ("B.orders", 0, 0)))
    assert [c.topic for c in checkpoints] == ["A.orders"]


def test_nothing_is_translated_before_the_syncs_topic_has_been_read_to_its_end() -> None:
    state, _, _ = flow_state(flow(), syncs=[OffsetSync("orders", 0, 0, 0)])
    state.syncs.add(OffsetSync("orders", 0, 0, 0))  # a sync already known, the store not yet loaded
    assert not state.syncs.loaded
    assert _translate(state, committed("g", ("orders", 0, 0))) == []
    state.catch_up()
    assert state.syncs.loaded
    assert _translate(state, committed("g", ("orders", 0, 0))) == [Checkpoint("g", "A.orders", 0, 0, 0)]


# Restoring the emitted checkpoints from the checkpoints topic.


def test_on_reload_the_latest_checkpoint_of_each_partition_wins_and_malformed_records_are_skipped() -> None:
    state, _, checkpoint_tail = flow_state(
        flow(),
        checkpoints=[
            Checkpoint("g1", "A.orders", 0, 0, 0),
            Checkpoint("g2", "A.orders", 0, 5, 5),
        ],
    )
    checkpoint_tail.append(b"", b"")  # written by hand: not a checkpoint
    checkpoint_tail.append(None, None)
    later = Checkpoint("g1", "A.orders", 0, 1, 1)
    checkpoint_tail.append(later.key(), later.value())
    state.catch_up()
    assert state.checkpoints.groups() == ["g1", "g2"]
    assert state.checkpoints.for_group("g1") == {("A.orders", 0): later}
    assert state.checkpoints.last("g2", "A.orders", 0) == Checkpoint("g2", "A.orders", 0, 5, 5)


def test_a_checkpoints_topic_that_cannot_be_read_fails_the_round_before_anything_is_translated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # MM2's store reports the failure and translates in a safe mode; mirror emits nothing this
    # round and drops the flow's state, so the next round reads both topics from the start again.
    settings = flow()
    state, _, checkpoint_tail = flow_state(settings, syncs=[OffsetSync("orders", 0, 0, 0)])

    def unreadable(**_: object) -> list[TailRecord]:
        raise NotAuthorizedError("reading A.checkpoints.internal: Topic authorization failed")

    monkeypatch.setattr(checkpoint_tail, "catch_up", unreadable)
    monkeypatch.setitem(task._STATES, settings.name, state)
    monkeypatch.setattr(task, "_writer", lambda _: None)  # the round opens its writer first
    monkeypatch.setattr(task, "group_offsets", lambda *_, **__: pytest.fail("no group may be translated"))

    with pytest.raises(NotAuthorizedError, match=r"reading A\.checkpoints\.internal"):
        task.run_checkpoint_round(settings)

    assert not state.syncs.loaded and state.checkpoints.groups() == []
    assert settings.name not in task._STATES


def test_a_restored_checkpoint_replaces_the_previous_one_even_when_it_is_lower() -> None:
    # The topic's order is the truth: a lower one later on records an upstream reset of the group.
    store = CheckpointStore()
    store.restore(Checkpoint("g", "A.orders", 0, 50, 50))
    store.restore(Checkpoint("g", "A.orders", 0, 10, 10))
    assert store.last("g", "A.orders", 0) == Checkpoint("g", "A.orders", 0, 10, 10)
    assert store.is_news(Checkpoint("g", "A.orders", 0, 30, 30))


def test_a_checkpoint_is_judged_against_its_own_group_and_partition_only() -> None:
    store = CheckpointStore()
    store.restore(Checkpoint("g", "A.orders", 0, 50, 50))
    assert not store.is_news(Checkpoint("g", "A.orders", 0, 50, 50))  # a repeat
    assert store.is_news(Checkpoint("g", "A.orders", 1, 10, 10))
    assert store.is_news(Checkpoint("g", "A.payments", 0, 10, 10))
    assert store.is_news(Checkpoint("other", "A.orders", 0, 10, 10))


def test_a_lower_translation_of_the_same_group_offset_is_no_news_but_a_group_rewind_is() -> None:
    # The sync history aged (or was rebuilt after a restart) and now translates the same offset lower.
    store = CheckpointStore()
    store.restore(Checkpoint("g", "A.orders", 0, 13, 6))
    assert not store.is_news(Checkpoint("g", "A.orders", 0, 13, 5))
    assert not store.is_news(Checkpoint("g", "A.orders", 0, 14, 5))
    assert store.is_news(Checkpoint("g", "A.orders", 0, 12, 5))


# A whole round, with the clusters faked: the admin calls answer fixed listings, the writer records.


class FakeWriter:
    """Stands in for the checkpoint producer: keeps every produce() call, commits without a broker."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, dict[str, Any]]] = []

    def produce(self, topic: str, **record: Any) -> None:
        self.produced.append((topic, record))

    def begin_transaction(self) -> None:
        pass

    def commit_transaction(self, timeout: float) -> None:
        pass


def run_round(
    monkeypatch: pytest.MonkeyPatch,
    state: _FlowState,
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]],
    clock: Iterable[float] = (1_700_000_000.5, 1_700_000_003.0),
) -> tuple[FakeWriter, list[CheckpointRow]]:
    """One `_round` over `state` whose source groups hold `offsets`; `clock` answers time.time()."""
    writer, ticks = FakeWriter(), iter(clock)
    monkeypatch.setattr(task, "_writer", lambda _: writer)
    monkeypatch.setattr(task, "_admin", lambda *_: None)
    monkeypatch.setattr(task, "_selected_groups", lambda _: sorted(offsets))
    monkeypatch.setattr(task, "group_offsets", lambda *_, **__: offsets)
    monkeypatch.setattr(task, "_remote_ends", lambda *_: {})
    monkeypatch.setattr(task, "time", SimpleNamespace(time=lambda: next(ticks), monotonic=time.monotonic))
    return writer, task._round(state)


def no_group_sync() -> FlowSettings:
    return replace(flow(), sync_group_offsets=False)


def test_a_checkpoint_record_carries_the_time_its_group_offsets_were_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = no_group_sync()
    state, _, _ = flow_state(settings, syncs=[OffsetSync("orders", 0, 3, 4)])
    # Offsets listed at 1_700_000_000.5; the round ends 2.5 s later, which the record must not take.
    writer, rows = run_round(monkeypatch, state, committed("g", ("orders", 0, 10)))
    (checkpoint_record,) = [r for topic, r in writer.produced if topic == settings.checkpoints_topic()]
    assert checkpoint_record["timestamp"] == 1_700_000_000_500
    assert Checkpoint.decode(checkpoint_record["key"], checkpoint_record["value"]) == Checkpoint(
        "g", "A.orders", 0, 10, 5
    )
    assert [(row.listed_at, row.emitted) for row in rows] == [(1_700_000_000.5, True)]


def test_after_a_restart_the_checkpoints_topic_is_read_before_translating_so_a_lower_one_is_not_emitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before the restart offset 50 was checkpointed at 50; the syncs now translate it to 21 only.
    syncs = [OffsetSync("orders", 0, 20, 20)]
    offsets = committed("g", ("orders", 0, 50))
    state, _, _ = flow_state(
        no_group_sync(), syncs=syncs, checkpoints=[Checkpoint("g", "A.orders", 0, 50, 50)]
    )
    writer, rows = run_round(monkeypatch, state, offsets)
    assert [(row.downstream, row.emitted) for row in rows] == [(21, False)]
    assert writer.produced == []
    assert state.checkpoints.last("g", "A.orders", 0) == Checkpoint("g", "A.orders", 0, 50, 50)
    # With nothing in the checkpoints topic the same round emits the lower checkpoint.
    fresh, _, _ = flow_state(no_group_sync(), syncs=syncs)
    writer, rows = run_round(monkeypatch, fresh, offsets)
    assert [(row.downstream, row.emitted) for row in rows] == [(21, True)]


# Target group sync.

CHECKPOINTS = {("A.orders", 0): Checkpoint("g", "A.orders", 0, 200, 101, "metadata")}
ENDS = {("A.orders", 0): 150}


def test_a_target_group_whose_offset_was_reset_to_minus_one_is_synced() -> None:
    # Sarama and others can commit -1; the listing leaves it out, and the plan writes the checkpoint.
    target_offsets = listed({"g": [ListedOffset("A.orders", 0, -1)]})["g"]
    plan = plan_group_sync(
        "g",
        CHECKPOINTS,
        active=False,
        target_offsets={tp: offset.offset for tp, offset in target_offsets.items()},
        remote_ends=ENDS,
    )
    assert plan.write == {("A.orders", 0): 101}
    # Had the -1 reached the plan, it still would not count as being ahead of the checkpoint.
    plan = plan_group_sync(
        "g", CHECKPOINTS, active=False, target_offsets={("A.orders", 0): -1}, remote_ends=ENDS
    )
    assert plan.write == {("A.orders", 0): 101}


def test_a_group_the_target_does_not_know_gets_every_checkpoint_written() -> None:
    checkpoints = {
        ("A.orders", 0): Checkpoint("g", "A.orders", 0, 200, 101),
        ("A.payments", 3): Checkpoint("g", "A.payments", 3, 100, 51),
    }
    plan = plan_group_sync(
        "g",
        checkpoints,
        active=False,
        target_offsets={},
        remote_ends={("A.orders", 0): 101, ("A.payments", 3): 51},
    )
    assert plan.write == {("A.orders", 0): 101, ("A.payments", 3): 51}
    assert plan.ahead == []
    assert plan.beyond_end == []


def test_a_target_group_one_record_behind_is_written_but_one_at_the_checkpoint_is_not() -> None:
    behind = plan_group_sync(
        "g", CHECKPOINTS, active=False, target_offsets={("A.orders", 0): 100}, remote_ends=ENDS
    )
    assert behind.write == {("A.orders", 0): 101}
    at = plan_group_sync(
        "g", CHECKPOINTS, active=False, target_offsets={("A.orders", 0): 101}, remote_ends=ENDS
    )
    assert at.write == {}
    assert at.ahead == [("A.orders", 0)]


def test_a_checkpoint_at_the_remote_end_is_written_but_one_past_it_or_with_no_known_end_is_not() -> None:
    checkpoints = {
        ("A.orders", 0): Checkpoint("g", "A.orders", 0, 200, 101),
        ("A.orders", 1): Checkpoint("g", "A.orders", 1, 200, 101),
        ("A.orders", 2): Checkpoint("g", "A.orders", 2, 200, 101),
    }
    plan = plan_group_sync(
        "g",
        checkpoints,
        active=False,
        target_offsets={},
        remote_ends={("A.orders", 0): 101, ("A.orders", 1): 100},
    )
    assert plan.write == {("A.orders", 0): 101}
    assert plan.beyond_end == [("A.orders", 1), ("A.orders", 2)]


def test_a_target_group_with_members_is_not_written_even_where_it_has_no_offset() -> None:
    plan = plan_group_sync("g", CHECKPOINTS, active=True, target_offsets={}, remote_ends=ENDS)
    assert plan.active
    assert plan.write == {}


# Listing the source's groups while one of its brokers is down.


def test_groups_listed_before_stand_while_a_broker_cannot_list_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each broker lists the groups it coordinates: one that does not answer would leave its groups
    # out, and they would get no checkpoints until the next listing.
    state, _, _ = flow_state(flow())
    state.groups, state.groups_listed_at = ["g", "h"], -1e9  # listed before, due again now
    monkeypatch.setattr(task, "_admin", lambda *_: None)

    def one_broker_silent(*_: object, **__: object) -> list[str]:
        raise KafkaClientError(
            "listing consumer groups of source cluster A: Broker: Coordinator not available"
        )

    monkeypatch.setattr(task, "list_group_ids", one_broker_silent)
    assert task._selected_groups(state) == ["g", "h"]


def test_a_first_group_listing_that_fails_is_an_error_not_an_empty_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, _, _ = flow_state(flow())
    monkeypatch.setattr(task, "_admin", lambda *_: None)

    def one_broker_silent(*_: object, **__: object) -> list[str]:
        raise KafkaClientError(
            "listing consumer groups of source cluster A: Broker: Coordinator not available"
        )

    monkeypatch.setattr(task, "list_group_ids", one_broker_silent)
    with pytest.raises(KafkaClientError):
        task._selected_groups(state)
