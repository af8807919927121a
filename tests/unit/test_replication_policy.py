"""ReplicationPolicy semantics of MM2 4.0 (MM2.md section 4)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mirror.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, make_policy

aliases = st.from_regex(r"[A-Za-z0-9_\-]{1,12}", fullmatch=True)
# Kafka's legal topic names; "." and ".." are forbidden by the broker.
topics = st.from_regex(r"[A-Za-z0-9_\-.]{1,40}", fullmatch=True).filter(lambda t: t not in {".", ".."})


def test_default_policy_prefixes_the_source_alias() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("A.orders") == "orders"


def test_multi_hop_names_stack_and_unwind_to_the_original() -> None:
    policy = DefaultReplicationPolicy()
    two_hops = policy.remote_topic("B", policy.remote_topic("A", "orders"))
    assert two_hops == "B.A.orders"
    assert policy.upstream_topic(two_hops) == "A.orders"
    assert policy.original_topic(two_hops) == "orders"


def test_local_topics_have_no_source() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") is None
    assert policy.original_topic("orders") == "orders"
    # Java's split drops trailing empty strings: "A." is a local topic.
    assert policy.topic_source("A.") is None


def test_custom_separator_names_remote_and_internal_topics() -> None:
    policy = DefaultReplicationPolicy("_")
    assert policy.remote_topic("A", "orders") == "A_orders"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert policy.checkpoints_topic("A") == "A_checkpoints_internal"


def test_kip_949_flag_off_keeps_dots_in_internal_topic_names() -> None:
    policy = DefaultReplicationPolicy("_", internal_topic_separator_enabled=False)
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.remote_topic("A", "orders") == "A_orders"


@pytest.mark.parametrize("internal_separator", [True, False])
def test_the_heartbeats_topic_keeps_its_plain_name_whatever_the_separator(internal_separator: bool) -> None:
    # ReplicationPolicyTest.heartbeatsTopic_shouldNotBeEffectedByInternalTopicSeparatorConfig: unlike
    # the offset-syncs and checkpoints topics, `heartbeats` never takes the separator.
    for policy in (
        make_policy(
            "default", source_alias="A", separator="__", internal_topic_separator_enabled=internal_separator
        ),
        make_policy(
            "identity", source_alias="A", separator="__", internal_topic_separator_enabled=internal_separator
        ),
    ):
        assert policy.heartbeats_topic() == "heartbeats"
        assert policy.is_heartbeats_topic("heartbeats")
        assert policy.remote_topic("A", "heartbeats") == "A__heartbeats"


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        ("__transaction_state", True),
        (".hidden", True),
        ("mm2-offset-syncs.B.internal", True),
        ("mm2-offsets.A.internal", True),
        ("A.checkpoints.internal", True),
        # Kafka 4.0 (KAFKA-17200): user topics ending in .internal are no longer internal ...
        ("orders.internal", False),
        ("orders-internal", False),
        ("orders", False),
    ],
)
def test_internal_topics_follow_kafka_4_rules(topic: str, internal: bool) -> None:
    assert DefaultReplicationPolicy().is_internal_topic(topic) is internal


@pytest.mark.parametrize("topic", ["heartbeats", "A.heartbeats", "B.A.heartbeats"])
def test_heartbeats_topics_are_recognised_at_every_hop(topic: str) -> None:
    assert DefaultReplicationPolicy().is_heartbeats_topic(topic)


def test_a_topic_is_not_heartbeats_just_for_containing_the_word() -> None:
    assert not DefaultReplicationPolicy().is_heartbeats_topic("A.myheartbeats")


@pytest.mark.parametrize(
    ("topic", "target", "cycle"),
    [
        ("orders", "B", False),
        ("A.orders", "B", False),
        ("B.orders", "B", True),  # came from B: never send it back
        ("A.B.orders", "B", True),  # B's data, via A
        ("C.A.orders", "B", False),
    ],
)
def test_cycle_detection_stops_data_returning_to_its_origin(topic: str, target: str, cycle: bool) -> None:
    assert DefaultReplicationPolicy().is_cycle(topic, target) is cycle


def test_identity_policy_keeps_names_but_prefixes_heartbeats() -> None:
    policy = IdentityReplicationPolicy("A")
    assert policy.remote_topic("A", "orders") == "orders"
    assert policy.remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.topic_source("orders") == "A"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    assert policy.topic_source("B.heartbeats") == "B"


def test_identity_policy_has_no_cycle_detection_like_mm2() -> None:
    assert not IdentityReplicationPolicy("A").is_cycle("orders", "B")


def test_make_policy_picks_the_configured_policy() -> None:
    assert isinstance(make_policy("identity", source_alias="A"), IdentityReplicationPolicy)
    assert make_policy("default", source_alias="A", separator="_").remote_topic("A", "t") == "A_t"


@given(aliases, topics)
def test_remote_topic_round_trips_through_source_and_upstream(alias: str, topic: str) -> None:
    policy = DefaultReplicationPolicy()
    assume("." not in alias)
    remote = policy.remote_topic(alias, topic)
    assert policy.topic_source(remote) == alias
    assert policy.upstream_topic(remote) == topic


@given(st.lists(aliases.filter(lambda a: "." not in a), min_size=1, max_size=4), topics)
def test_original_topic_survives_any_number_of_hops(hops: list[str], topic: str) -> None:
    policy = DefaultReplicationPolicy()
    assume("." not in topic)
    name = topic
    for alias in hops:
        name = policy.remote_topic(alias, name)
    assert policy.original_topic(name) == topic


@given(aliases.filter(lambda a: "." not in a), aliases.filter(lambda a: "." not in a), topics)
def test_a_topic_replicated_from_the_target_is_always_a_cycle(target: str, other: str, topic: str) -> None:
    policy = DefaultReplicationPolicy()
    assert policy.is_cycle(policy.remote_topic(target, topic), target)
    assert policy.is_cycle(policy.remote_topic(other, policy.remote_topic(target, topic)), target)


@given(aliases, topics.filter(lambda t: not t.endswith("heartbeats")))
def test_identity_policy_round_trips_to_the_same_name(alias: str, topic: str) -> None:
    policy = IdentityReplicationPolicy(alias)
    remote = policy.remote_topic(alias, topic)
    assert remote == topic
    assert policy.topic_source(remote) == alias
    assert policy.original_topic(remote) == topic
