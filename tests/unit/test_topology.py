"""Topology from heartbeats topics (MirrorClient.upstreamClusters / replicationHops semantics)."""

from __future__ import annotations

from mirror.kafka.source_offsets import encode_checkpoint_key, encode_heartbeat_key
from mirror.policy import (
    make_policy,
    remote_heartbeat_topics,
    replication_hops,
    replication_path,
    upstream_clusters,
)

POLICY = make_policy("default", source_alias=None)
ON_B = ["orders", "heartbeats", "A.heartbeats", "A.C.heartbeats", "A.orders", "C.D.heartbeats.other"]


def test_only_remote_heartbeats_topics_describe_the_topology() -> None:
    assert remote_heartbeat_topics(ON_B, POLICY) == ["A.C.heartbeats", "A.heartbeats"]


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
