"""Which clusters replicate into a cluster, read from its heartbeats topics (MM2's MirrorClient).

Every flow copies its source's `heartbeats` topic, so a cluster holding `A.heartbeats` and
`A.C.heartbeats` receives data from A (one hop) and from C through A (two hops).
"""

from __future__ import annotations

from collections.abc import Iterable

from mirror.policy.replication_policy import ReplicationPolicy


def remote_heartbeat_topics(topics: Iterable[str], policy: ReplicationPolicy) -> list[str]:
    """The heartbeats topics that came from another cluster (`A.heartbeats`, not `heartbeats`)."""
    return sorted(t for t in topics if policy.is_heartbeats_topic(t) and policy.topic_source(t) is not None)


def heartbeat_topics(topics: Iterable[str], policy: ReplicationPolicy) -> list[str]:
    """The cluster's own `heartbeats` and every copy of another's (MirrorClient.heartbeatTopics)."""
    return sorted(t for t in topics if policy.is_heartbeats_topic(t))


def upstream_clusters(topics: Iterable[str], policy: ReplicationPolicy) -> list[str]:
    """Every cluster replicating into this one, directly or not (MirrorClient.upstreamClusters)."""
    found: set[str] = set()
    for topic in remote_heartbeat_topics(topics, policy):
        found.update(policy.source_chain(topic))
    return sorted(found)


def replication_hops(topics: Iterable[str], policy: ReplicationPolicy, upstream: str) -> int:
    """Fewest hops from `upstream` to this cluster, -1 if none (MirrorClient.replicationHops)."""
    hops = [
        chain.index(upstream) + 1
        for chain in (policy.source_chain(t) for t in remote_heartbeat_topics(topics, policy))
        if upstream in chain
    ]
    return min(hops, default=-1)


def remote_topics(topics: Iterable[str], policy: ReplicationPolicy, source: str | None = None) -> list[str]:
    """Topics replicated into this cluster (from `source` directly, if given), internal ones aside.

    MirrorClient.remoteTopics: under the identity policy every topic but `heartbeats` is remote.
    """
    return sorted(
        t
        for t in topics
        if not policy.is_internal_topic(t)
        and (found := policy.topic_source(t)) is not None
        and (source is None or found == source)
    )


def checkpoint_topics(topics: Iterable[str], policy: ReplicationPolicy) -> list[str]:
    """The checkpoints topics on this cluster, one per cluster whose groups are translated into it."""
    return sorted(t for t in topics if policy.is_checkpoints_topic(t))


def hops_for_topic(topic: str, policy: ReplicationPolicy, upstream: str) -> int:
    """How many hops `topic` took from `upstream` to here, by its name; -1 if it did not come from it.

    A repeated alias ends the walk (-1): the identity policy names no hop, so it could loop.
    """
    seen: set[str] = set()
    current: str | None = topic
    while current is not None:
        source = policy.topic_source(current)
        if source is None or source in seen:
            return -1
        seen.add(source)
        if source == upstream:
            return len(seen)
        current = policy.upstream_topic(current)
    return -1


def replication_path(chain: list[str], cluster: str) -> str:
    """`A->B` for `A.heartbeats` on B, `C->A->B` for `A.C.heartbeats` on B."""
    return "->".join([*reversed(chain), cluster])
