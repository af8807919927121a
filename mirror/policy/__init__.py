"""Replication policies (remote topic naming) and topic/group filters, with MM2's semantics."""

from mirror.policy.filters import GroupFilter, TopicFilter, should_replicate_topic
from mirror.policy.replication_policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    make_policy,
)
from mirror.policy.topology import (
    checkpoint_topics,
    heartbeat_topics,
    hops_for_topic,
    remote_heartbeat_topics,
    remote_topics,
    replication_hops,
    replication_path,
    upstream_clusters,
)

__all__ = [
    "DefaultReplicationPolicy",
    "GroupFilter",
    "IdentityReplicationPolicy",
    "ReplicationPolicy",
    "TopicFilter",
    "checkpoint_topics",
    "heartbeat_topics",
    "hops_for_topic",
    "make_policy",
    "remote_heartbeat_topics",
    "remote_topics",
    "replication_hops",
    "replication_path",
    "should_replicate_topic",
    "upstream_clusters",
]
