"""Pure planning of the source component: batch ends, ranges and which records get OffsetSyncs."""

from __future__ import annotations

from mirror.kafka.acl import TopicAcl
from mirror.policy import DefaultReplicationPolicy, TopicFilter
from mirror.policy.filters import DEFAULT_CONFIG_PROPERTIES_EXCLUDE
from mirror.source.assignment import assign
from mirror.source.offset_syncs import PartitionState, syncs_for_range
from mirror.source.partition_copy import PartitionCopy
from mirror.topics.plan import (
    TopicPlan,
    TopicSelection,
    acls_to_sync,
    config_changes,
    partitions_to_copy,
    plan_topics,
    synced_configs,
)


def test_first_record_gaps_and_last_record_get_syncs() -> None:
    # Upstream 10..12 then a gap (a transaction marker at 13) to 14..15, downstream contiguous.
    pairs = [(10, 0), (11, 1), (12, 2), (14, 3), (15, 4)]
    assert syncs_for_range(pairs, offset_lag_max=100) == [(10, 0), (14, 3), (15, 4)]


def test_lag_max_forces_a_sync_every_so_many_downstream_records() -> None:
    pairs = [(u, u) for u in range(10)]
    assert syncs_for_range(pairs, offset_lag_max=3) == [(0, 0), (4, 4), (8, 8), (9, 9)]


def test_downstream_truncation_forces_a_sync() -> None:
    state = PartitionState(100)
    assert state.needs_sync(0, 50)
    assert not state.needs_sync(1, 51)
    assert state.needs_sync(2, 10)


def test_offset_lag_max_zero_syncs_every_record_once() -> None:
    # MirrorSourceTaskTest.testZeroOffsetSync: contiguous records, an upstream gap, an upstream
    # rewind, a downstream truncation and a repeated record all get a sync, and the last one is not
    # synced twice by the quiet-partition rule.
    pairs = [(0, 100), (1, 101), (2, 102), (5, 103), (6, 104), (3, 105), (4, 0), (5, 1), (5, 1), (6, 2)]
    assert syncs_for_range(pairs, offset_lag_max=0) == pairs


def _synced(state: PartitionState, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [pair for pair in pairs if state.needs_sync(*pair)]


def test_an_upstream_rewind_forces_a_sync_and_restarts_the_lag_count() -> None:
    # MirrorSourceTaskTest.testOffsetSync ("upstream reset"): upstream offsets going back (the same
    # record again, or further) get a sync even though downstream moves on by one.
    state = PartitionState(50)
    assert _synced(state, [(u, 100 + u) for u in range(10)]) == [(0, 100)]
    assert _synced(state, [(9, 110), (10, 111)]) == [(9, 110)]
    assert _synced(state, [(2, 112), (3, 113)]) == [(2, 112)]
    # The lag is counted from the rewind's sync: 50 records past the one after it.
    later = [(3 + n, 113 + n) for n in range(1, 51)]
    assert _synced(state, later) == [(53, 163)]


def test_records_re_copied_after_an_aborted_transaction_get_a_sync_at_the_first_one() -> None:
    # The source side of the rewind: an aborted transaction's records (and its syncs) never
    # happened, the task goes back to the committed position, and the re-copied records land after
    # the aborted ones and the abort marker. The trigger state survives the abort, so only the
    # upstream rewind makes the re-copied range get a sync of its own.
    part = PartitionCopy("A->B", "t", 0, "A.t", 100)
    part.upstream, part.downstream = list(range(10)), list(range(10))
    assert part.take_syncs() == [(0, 0)]
    part.committed_now()
    part.upstream, part.downstream = list(range(10, 20)), list(range(10, 20))
    assert part.take_syncs() == []
    part.discard()
    assert part.take_trailing_sync() is None  # the aborted range's last pair is gone with it
    part.upstream, part.downstream = list(range(10, 20)), list(range(21, 31))
    assert part.take_syncs() == [(10, 21)]
    part.committed_now()
    assert part.take_trailing_sync() == (19, 30)


def test_a_trailing_sync_whose_transaction_aborted_is_sent_again_but_one_that_committed_is_not() -> None:
    # A quiet partition's last pair goes out alone in a later transaction. If that one aborts,
    # the records it describes are still committed and will not be copied again: without the pair,
    # a group that read everything would translate to an older sync and re-read up to 100 records.
    part = PartitionCopy("A->B", "t", 0, "A.t", 100)
    part.upstream, part.downstream = list(range(10)), list(range(10))
    assert part.take_syncs() == [(0, 0)]
    part.committed_now()
    assert part.take_trailing_sync() == (9, 9)
    part.discard()
    assert part.take_trailing_sync() == (9, 9)
    part.syncs_committed()
    part.discard()  # a later abort: the pair was committed meanwhile
    assert part.take_trailing_sync() is None


def test_an_empty_range_has_no_syncs() -> None:
    assert syncs_for_range([], 100) == []


def test_config_sync_sets_source_values_and_deletes_overrides_the_source_does_not_have() -> None:
    changes = config_changes(
        {"retention.ms": "1000", "cleanup.policy": "compact", "min.insync.replicas": "2"},
        {"retention.ms": "5", "segment.ms": "99", "min.insync.replicas": "1"},
        DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    )
    assert changes.set == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert changes.delete == ["segment.ms"]  # min.insync.replicas is excluded: never touched


def test_a_custom_exclude_list_is_full_match_regexes_and_replaces_the_default_list() -> None:
    # MirrorSourceConnectorTest.testNewTopicConfigs: what a new remote topic is created with.
    source = {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "exclude_param.param1": "x",
        "delete.retention.ms": "10",
    }
    with_defaults = [*DEFAULT_CONFIG_PROPERTIES_EXCLUDE, r"exclude_param.*"]
    assert synced_configs(source, with_defaults) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
        "delete.retention.ms": "10",
    }
    # A list of its own drops the defaults (min.insync.replicas is copied), as MM2's does.
    assert synced_configs(source, [r"delete\.retention\..*"]) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "exclude_param.param1": "x",
    }
    # Full match: "retention" names no property, so it excludes none.
    assert synced_configs(source, ["retention", "cleanup"]) == source
    assert synced_configs(source, []) == source


def test_config_sync_changes_nothing_when_configs_match() -> None:
    assert len(config_changes({"retention.ms": "1"}, {"retention.ms": "1"}, [])) == 0


def test_topic_plan_creates_missing_and_grows_smaller_remote_topics_but_never_shrinks() -> None:
    plan = plan_topics(
        {"orders": 4, "payments": 6, "audit": 2, "__consumer_offsets": 50},
        {"A.orders": 4, "A.payments": 3, "A.audit": 5},
        "A",
        TopicSelection("B", DefaultReplicationPolicy(), TopicFilter()),
    )
    assert plan.create == []
    assert plan.grow == [("A.payments", 6)]
    new = plan_topics(
        {"fresh": 3},
        {},
        "A",
        TopicSelection("B", DefaultReplicationPolicy(), TopicFilter()),
    )
    assert new.create == [("fresh", "A.fresh", 3)]


def test_acl_sync_follows_mm2_rules_and_skips_what_the_target_has() -> None:
    source = [
        TopicAcl("orders", "User:alice", "*", "READ", "ALLOW"),
        TopicAcl("orders", "User:bob", "*", "ALL", "ALLOW"),  # downgraded to READ
        TopicAcl("orders", "User:carol", "*", "WRITE", "ALLOW"),  # only mirror writes remote topics
        TopicAcl("orders", "User:mallory", "*", "READ", "DENY"),  # DENY copied as is
        TopicAcl("not-replicated", "User:alice", "*", "READ", "ALLOW"),
    ]
    target = [TopicAcl("A.orders", "User:alice", "*", "READ", "ALLOW")]
    assert acls_to_sync(source, target, {"orders": "A.orders"}) == [
        TopicAcl("A.orders", "User:bob", "*", "READ", "ALLOW"),
        TopicAcl("A.orders", "User:mallory", "*", "READ", "DENY"),
    ]


def test_a_deny_all_acl_is_synced_to_the_remote_topic_as_deny_all() -> None:
    # Only ALLOW ALL is narrowed to READ; a DENY keeps its full reach on the remote topic.
    source = [
        TopicAcl("orders", "User:bob", "*", "ALL", "ALLOW"),
        TopicAcl("orders", "User:mallory", "*", "ALL", "DENY"),
    ]
    assert acls_to_sync(source, [], {"orders": "A.orders"}) == [
        TopicAcl("A.orders", "User:bob", "*", "READ", "ALLOW"),
        TopicAcl("A.orders", "User:mallory", "*", "ALL", "DENY"),
    ]


def test_a_deny_write_acl_fences_the_source_topic_only() -> None:
    # Δ MM2 (which copies it): a cutover fences producers on the source with DENY WRITE; on the
    # remote topic, which under the identity policy is where they move, it would lock them out too.
    source = [
        TopicAcl("orders", "User:app", "*", "WRITE", "DENY"),
        TopicAcl("orders", "User:app", "*", "READ", "ALLOW"),
    ]
    assert acls_to_sync(source, [], {"orders": "orders"}) == [
        TopicAcl("orders", "User:app", "*", "READ", "ALLOW")
    ]


def _plan_and_partitions(
    source: dict[str, int], target: dict[str, int]
) -> tuple[TopicPlan, list[tuple[str, int]]]:
    selection = TopicSelection("B", DefaultReplicationPolicy(), TopicFilter())
    return plan_topics(source, target, "A", selection), partitions_to_copy(source, target, "A", selection)


def test_copy_tasks_share_selected_source_partitions_whose_remote_partition_exists() -> None:
    plan, partitions = _plan_and_partitions(
        {"orders": 2, "payments": 4, "fresh": 1, "__consumer_offsets": 50, "B.loop": 1},
        {"A.orders": 2, "A.payments": 2, "B.loop": 1},
    )
    assert plan.create == [("fresh", "A.fresh", 1)] and plan.grow == [("A.payments", 4)]
    # A.fresh is not there yet and A.payments not grown yet: their missing partitions wait.
    assert partitions == [("orders", 0), ("orders", 1), ("payments", 0), ("payments", 1)]


def test_a_remote_topic_on_the_target_alone_changes_no_plan_or_assignment_until_the_source_has_it() -> None:
    # MirrorSourceConnectorTest.testRefreshTopicPartitionsTopicOnTargetFirst: SourceConnector.refresh
    # publishes a new assignment only when these partitions change.
    _, partitions = _plan_and_partitions({"payments": 2}, {"A.payments": 2})
    before = assign(partitions, 2)
    plan, partitions = _plan_and_partitions({"payments": 2}, {"A.payments": 2, "A.orders": 3})
    assert not plan
    assert assign(partitions, 2, before) == before
    plan, partitions = _plan_and_partitions({"payments": 2, "orders": 3}, {"A.payments": 2, "A.orders": 3})
    assert not plan  # the remote topic exists: nothing to create, only partitions to copy
    assert [p for p in partitions if p[0] == "orders"] == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert assign(partitions, 2, before) != before
