"""Topic and group filters: MM2's defaults, full-match lists, exclude wins."""

from __future__ import annotations

import pytest

from mirror.policy import (
    DefaultReplicationPolicy,
    GroupFilter,
    IdentityReplicationPolicy,
    TopicFilter,
    should_replicate_topic,
)


@pytest.mark.parametrize(
    ("topic", "selected"),
    [
        ("orders", True),
        ("orders.internal", False),
        ("orders-internal", False),
        ("orders.replica", False),
        ("__consumer_offsets", False),
    ],
)
def test_default_topic_filter_matches_mm2(topic: str, selected: bool) -> None:
    assert TopicFilter().matches(topic) is selected


@pytest.mark.parametrize(
    ("group", "selected"),
    [("billing", True), ("console-consumer-123", False), ("connect-mm2", False), ("__internal", False)],
)
def test_default_group_filter_matches_mm2(group: str, selected: bool) -> None:
    assert GroupFilter().matches(group) is selected


def test_patterns_must_match_the_whole_name() -> None:
    topic_filter = TopicFilter(["orders"], [])
    assert topic_filter.matches("orders")
    assert not topic_filter.matches("orders-eu")
    assert not topic_filter.matches("old-orders")


def test_a_list_is_an_alternation_and_exclude_wins() -> None:
    topic_filter = TopicFilter(["orders.*", "payments"], ["orders-test"])
    assert topic_filter.matches("orders-eu")
    assert topic_filter.matches("payments")
    assert not topic_filter.matches("orders-test")


def test_an_empty_include_list_matches_nothing() -> None:
    assert not TopicFilter([], []).matches("orders")


def _replicates(topic: str, topic_filter: TopicFilter | None = None, heartbeats: bool = True) -> bool:
    return should_replicate_topic(
        topic,
        topic_filter=topic_filter or TopicFilter(),
        policy=DefaultReplicationPolicy(),
        target_alias="B",
        heartbeats_replication_enabled=heartbeats,
    )


def test_heartbeats_are_replicated_even_when_the_filter_excludes_them() -> None:
    only_orders = TopicFilter(["orders"], [])
    assert _replicates("heartbeats", only_orders)
    assert _replicates("C.heartbeats", only_orders)
    assert not _replicates("heartbeats", only_orders, heartbeats=False)


def test_internal_and_cycling_topics_are_never_replicated() -> None:
    everything = TopicFilter([".*"], [])
    assert not _replicates("mm2-offset-syncs.B.internal", everything)
    assert not _replicates("__consumer_offsets", everything)
    assert not _replicates("B.orders", everything)
    assert _replicates("orders", everything)


@pytest.mark.parametrize("source_alias", ["A", None])
@pytest.mark.parametrize(
    ("topic", "selected"),
    [
        # Names that look remote are plain topics under identity: no cycle to detect.
        ("orders", True),
        ("B.orders", True),
        ("B.A.orders", True),
        ("A.B.orders", True),
        ("C.orders", True),
        # Heartbeats keep their prefixes, so the ones that came from the target are refused.
        ("heartbeats", True),
        ("C.heartbeats", True),
        ("B.heartbeats", False),
        ("A.B.heartbeats", False),
        ("B.A.heartbeats", False),
    ],
)
def test_identity_policy_replicates_topics_named_like_remote_ones_but_not_heartbeats_from_the_target(
    source_alias: str | None, topic: str, selected: bool
) -> None:
    # MirrorSourceConnectorTest.testIdentityReplication, for a flow A->B; a policy that does not
    # know its source alias (MM2's unconfigured IdentityReplicationPolicy) decides the same.
    replicated = should_replicate_topic(
        topic,
        topic_filter=TopicFilter([".*"], []),
        policy=IdentityReplicationPolicy(source_alias),
        target_alias="B",
    )
    assert replicated is selected


def test_heartbeats_the_filter_matches_are_replicated_with_heartbeats_replication_disabled() -> None:
    # MirrorSourceConnectorTest.testReplicatesHeartbeatsWhenDisabledButFilterAllows: switching the
    # heartbeats rule off only stops forcing them in; the filter still selects them like any topic.
    assert _replicates("heartbeats", TopicFilter(), heartbeats=False)
    assert _replicates("C.heartbeats", TopicFilter(), heartbeats=False)
    assert not _replicates("heartbeats", TopicFilter([".*"], ["heartbeats"]), heartbeats=False)


def test_with_separator_underscore_only_underscore_prefixed_heartbeats_are_forced_in() -> None:
    # MirrorSourceConnectorTest.testReplicatesHeartbeatsDespiteFilter (custom separator half).
    def replicates(topic: str) -> bool:
        return should_replicate_topic(
            topic,
            topic_filter=TopicFilter([], []),
            policy=DefaultReplicationPolicy("_"),
            target_alias="B",
        )

    assert replicates("heartbeats")
    assert replicates("us-west_heartbeats")
    assert not replicates("us-west.heartbeats")  # one local topic under "_", not a heartbeats topic
