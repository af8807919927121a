"""Pure planning of the source component: batch ends, ranges and which records get OffsetSyncs."""

from __future__ import annotations

from mirror.kafka.acl import TopicAcl
from mirror.policy import DefaultReplicationPolicy, TopicFilter
from mirror.policy.filters import DEFAULT_CONFIG_PROPERTIES_EXCLUDE
from mirror.source.offset_syncs import PartitionState, syncs_for_range
from mirror.topics.plan import acls_to_sync, config_changes, plan_topics


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
