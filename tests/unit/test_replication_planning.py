"""Pure planning of the source component: batch ends, ranges and which records get OffsetSyncs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirror.policy import DefaultReplicationPolicy, TopicFilter
from mirror.policy.filters import DEFAULT_CONFIG_PROPERTIES_EXCLUDE
from mirror.replication.offset_syncs import PartitionState, syncs_for_range
from mirror.replication.plan import (
    SourcePartitionRange,
    parse_position_key,
    plan_end,
    position_key,
    ranges_between,
)
from mirror.topics.plan import TopicAcl, acls_to_sync, config_changes, plan_topics


def test_position_keys_round_trip_topic_names_with_dots_and_dashes() -> None:
    assert parse_position_key(position_key("a.b-c_d", 12)) == ("a.b-c_d", 12)


def test_plan_end_keeps_keys_sorted_so_spark_sees_no_phantom_change() -> None:
    end = plan_end({"b:0": 0, "a:0": 0}, {"a:0": 5, "b:0": 7}, None)
    assert list(end) == ["a:0", "b:0"]
    assert end == {"a:0": 5, "b:0": 7}


def test_plan_end_shares_the_record_limit_among_partitions_with_data() -> None:
    end = plan_end({"t:0": 0, "t:1": 0, "t:2": 50}, {"t:0": 10_000, "t:1": 10_000, "t:2": 50}, 4000)
    assert end == {"t:0": 2000, "t:1": 2000, "t:2": 50}


def test_plan_end_never_moves_a_position_backwards() -> None:
    assert plan_end({"t:0": 100}, {"t:0": 40}, None) == {"t:0": 100}


def test_a_new_partition_enters_at_its_start_without_advancing() -> None:
    end = plan_end({"t:0": 5}, {"t:0": 9, "t:1": 30}, None, new_partitions={"t:1": 10})
    assert end == {"t:0": 9, "t:1": 10}
    # The next batch starts from that end, and now t:1 advances.
    assert plan_end(end, {"t:0": 9, "t:1": 30}, None) == {"t:0": 9, "t:1": 30}


def test_ranges_cover_exactly_the_advanced_partitions() -> None:
    ranges = ranges_between({"t:0": 5, "t:1": 3, "u:0": 0}, {"t:0": 9, "t:1": 3, "u:0": 2})
    assert ranges == [SourcePartitionRange("t", 0, 5, 9), SourcePartitionRange("u", 0, 0, 2)]


@given(
    st.dictionaries(st.sampled_from([f"t:{i}" for i in range(6)]), st.integers(0, 10**6), min_size=1),
    st.integers(0, 10**5),
    st.integers(1, 10**6),
)
def test_consecutive_batches_cover_every_offset_once(start: dict[str, int], extra: int, limit: int) -> None:
    available = {key: position + extra for key, position in start.items()}
    covered = {key: 0 for key in start}
    position = dict(start)
    for _ in range(10_000):
        end = plan_end(position, available, limit)
        if end == position:
            break
        for r in ranges_between(position, end):
            key = position_key(r.topic, r.partition)
            assert r.start == start[key] + covered[key]  # contiguous: no gap, no overlap
            covered[key] += r.end - r.start
        position = end
    assert covered == {key: extra for key in start}


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


def test_config_sync_changes_nothing_when_configs_match() -> None:
    assert len(config_changes({"retention.ms": "1"}, {"retention.ms": "1"}, [])) == 0


def test_topic_plan_creates_missing_and_grows_smaller_remote_topics_but_never_shrinks() -> None:
    plan = plan_topics(
        {"orders": 4, "payments": 6, "audit": 2, "__consumer_offsets": 50},
        {"A.orders": 4, "A.payments": 3, "A.audit": 5},
        source_alias="A",
        target_alias="B",
        policy=DefaultReplicationPolicy(),
        topic_filter=TopicFilter(),
    )
    assert plan.create == []
    assert plan.grow == [("A.payments", 6)]
    new = plan_topics(
        {"fresh": 3},
        {},
        source_alias="A",
        target_alias="B",
        policy=DefaultReplicationPolicy(),
        topic_filter=TopicFilter(),
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
