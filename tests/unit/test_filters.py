"""Topic and group filters: MM2's defaults, full-match lists, exclude wins."""

from __future__ import annotations

import pytest

from mirror.policy import DefaultReplicationPolicy, GroupFilter, TopicFilter, should_replicate_topic


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
