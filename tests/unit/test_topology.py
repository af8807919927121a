"""Topology from heartbeats topics (MirrorClient.upstreamClusters / replicationHops semantics)."""

from __future__ import annotations

from mirror.flow.source_offsets import encode_checkpoint_key, encode_heartbeat_key
from mirror.policy import (
    checkpoint_topics,
    heartbeat_topics,
    hops_for_topic,
    make_policy,
    remote_heartbeat_topics,
    remote_topics,
    replication_hops,
    replication_path,
    upstream_clusters,
)

POLICY = make_policy("default", source_alias=None)
ON_B = ["orders", "heartbeats", "A.heartbeats", "A.C.heartbeats", "A.orders", "C.D.heartbeats.other"]


def test_only_remote_heartbeats_topics_describe_the_topology() -> None:
    assert remote_heartbeat_topics(ON_B, POLICY) == ["A.C.heartbeats", "A.heartbeats"]


def test_the_heartbeats_listing_holds_the_local_topic_and_every_copy_and_nothing_else() -> None:
    # MirrorClientTest.heartbeatTopicsTest: what `mirror heartbeats` (MirrorClient.heartbeats) reads.
    topics = [*ON_B, "heartbeats!", "!heartbeats", "Aheartbeats", "A-heartbeats", "A.myheartbeats"]
    assert heartbeat_topics(topics, POLICY) == ["A.C.heartbeats", "A.heartbeats", "heartbeats"]
    assert heartbeat_topics(["orders", "A.orders"], POLICY) == []


def test_the_heartbeats_listing_under_identity_holds_the_local_topic_and_the_prefixed_copies() -> None:
    identity = make_policy("identity", source_alias="A")
    topics = ["orders", "heartbeats", "A.heartbeats", "C.A.heartbeats", "A.myheartbeats"]
    assert heartbeat_topics(topics, identity) == ["A.heartbeats", "C.A.heartbeats", "heartbeats"]


def test_upstream_clusters_include_clusters_behind_a_direct_upstream() -> None:
    assert upstream_clusters(ON_B, POLICY) == ["A", "C"]


def test_replication_hops_count_the_shortest_path() -> None:
    assert replication_hops(ON_B, POLICY, "A") == 1
    assert replication_hops(ON_B, POLICY, "C") == 2
    assert replication_hops([*ON_B, "C.heartbeats"], POLICY, "C") == 1
    assert replication_hops(ON_B, POLICY, "Z") == -1


def test_a_path_reads_from_the_origin_to_the_cluster() -> None:
    assert replication_path(POLICY.source_chain("A.C.heartbeats"), "B") == "C->A->B"


def test_a_cycle_in_names_stops_the_chain() -> None:
    assert POLICY.source_chain("A.B.A.heartbeats") == ["A", "B"]


def test_connect_keys_of_the_checkpoint_and_heartbeat_connectors_match_mm2s_bytes() -> None:
    # Java HashMap iteration order for these keys, as Connect's JsonConverter writes them.
    assert encode_checkpoint_key("g1", "A.orders", 3) == (
        b'["MirrorCheckpointConnector",{"partition":3,"topic":"A.orders","group":"g1"}]'
    )
    assert encode_heartbeat_key("A", "B") == (
        b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    )


def test_remote_topics_are_those_named_after_a_source_and_internal_ones_are_not() -> None:
    # MirrorClientTest.remoteTopicsTest and remoteTopics(source), in our words.
    topics = ["t1", "A.t2", "A.C.t3", "D.E.F.t4", "A.checkpoints.internal", "mm2-offsets.A.internal", "__x"]
    assert remote_topics(topics, POLICY) == ["A.C.t3", "A.t2", "D.E.F.t4"]
    assert remote_topics(topics, POLICY, "A") == ["A.C.t3", "A.t2"]
    assert remote_topics(topics, POLICY, "C") == []


def test_remote_topics_follow_a_custom_separator() -> None:
    underscores = make_policy("default", source_alias=None, separator="__")
    topics = ["t1", "A__t2", "A__C__t3", "A.t4"]
    assert remote_topics(topics, underscores) == ["A__C__t3", "A__t2"]


def test_under_the_identity_policy_every_topic_but_the_local_heartbeats_is_remote() -> None:
    identity = make_policy("identity", source_alias="A")
    assert remote_topics(["t1", "t2", "heartbeats", "B.heartbeats"], identity) == ["B.heartbeats", "t1", "t2"]
    # Upstream clusters still come from the prefixed heartbeats topics.
    on_b = ["t1", "heartbeats", "C.heartbeats", "C.D.heartbeats", "E.F.G.heartbeats"]
    assert upstream_clusters(on_b, identity) == ["C", "D", "E", "F", "G"]


def test_checkpoint_topics_carry_an_alias_in_front_of_checkpoints_internal() -> None:
    topics = [
        "A.checkpoints.internal",
        "checkpoints.internal",
        "A.checkpoints.internal2",
        "A.checkpoints",
        "B.x",
    ]
    assert checkpoint_topics(topics, POLICY) == ["A.checkpoints.internal"]


def test_hops_for_a_topic_count_its_aliases_up_to_the_upstream() -> None:
    # MirrorClientTest.countHopsForTopicTest: -1 for a local topic, an alias not in the name, an
    # alias that is only the topic's own name, or a prefix without its separator.
    assert hops_for_topic("A.t", POLICY, "A") == 1
    assert hops_for_topic("A.B.C.t", POLICY, "C") == 3
    assert hops_for_topic("A.B.C.t", POLICY, "Z") == -1
    assert hops_for_topic("t", POLICY, "t") == -1
    assert hops_for_topic("At.x", POLICY, "A") == -1
    assert hops_for_topic("A.B.A.t", POLICY, "C") == -1  # a repeated alias ends the walk
