"""Remote topic naming: MM2's DefaultReplicationPolicy and IdentityReplicationPolicy.

Semantics follow Kafka 4.0 (`connect/mirror-client`), including KAFKA-17200's narrower notion of
an internal topic. Pure Python: no Kafka client, no Spark.
"""

from __future__ import annotations

from typing import Literal

HEARTBEATS_TOPIC = "heartbeats"
_INTERNAL_SUFFIX = "internal"


class ReplicationPolicy:
    """MM2's DefaultReplicationPolicy: a remote topic is `<source alias><sep><topic>`."""

    def __init__(self, separator: str = ".", *, internal_topic_separator_enabled: bool = True) -> None:
        if not separator:
            raise ValueError("the replication policy separator must not be empty")
        self.separator = separator
        # KIP-949: with the flag off, internal topic names always use "." whatever the separator.
        self._internal_separator = separator if internal_topic_separator_enabled else "."

    def remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster `topic` was replicated from, or None for a local topic."""
        parts = topic.split(self.separator)
        # Java's String.split drops trailing empty strings; "A." is therefore a local topic.
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < 2:
            return None
        return parts[0]

    def upstream_topic(self, topic: str) -> str | None:
        """The name `topic` had on the cluster it was replicated from, or None for a local topic."""
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        """The name at the first hop: `B.A.orders` -> `orders`."""
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def source_chain(self, topic: str) -> list[str]:
        """The clusters `topic` came through, nearest first: `A.C.heartbeats` -> [A, C].

        Stops at a repeated alias, as MirrorClient does for policies that cannot prevent cycles.
        """
        chain: list[str] = []
        current: str | None = topic
        source = self.topic_source(topic)
        while current is not None and source is not None and source not in chain:
            chain.append(source)
            current = self.upstream_topic(current)
            source = self.topic_source(current) if current is not None else None
        return chain

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}{_INTERNAL_SUFFIX}"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator
        return f"{cluster_alias}{sep}checkpoints{sep}{_INTERNAL_SUFFIX}"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self._internal_separator
        return topic.endswith(f"{sep}checkpoints{sep}{_INTERNAL_SUFFIX}")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        sep = self._internal_separator
        return (
            topic.startswith("mm2") and topic.endswith(f"{sep}{_INTERNAL_SUFFIX}")
        ) or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """Never replicated, whatever the filter says (Kafka 4.0 rules)."""
        return self.is_mm2_internal_topic(topic) or topic.startswith(("__", "."))

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """True if replicating `topic` to `target_alias` would send it back where it came from."""
        source = self.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        return self.is_cycle(upstream, target_alias)


class DefaultReplicationPolicy(ReplicationPolicy):
    """Alias kept for readers who know MM2's class name."""


class IdentityReplicationPolicy(ReplicationPolicy):
    """MM2's IdentityReplicationPolicy: remote topics keep their name (migrations, one-way DR).

    Only heartbeats topics are prefixed, so the topology stays visible. As in MM2 there is no
    cycle detection: active/active with this policy loops.
    """

    def __init__(
        self,
        source_alias: str | None,
        separator: str = ".",
        *,
        internal_topic_separator_enabled: bool = True,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled=internal_topic_separator_enabled)
        self.source_alias = source_alias

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic.endswith(HEARTBEATS_TOPIC)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return super().remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().topic_source(topic)
        return self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().upstream_topic(topic)
        return topic


PolicyName = Literal["default", "identity"]


def make_policy(
    name: PolicyName,
    *,
    source_alias: str | None,
    separator: str = ".",
    internal_topic_separator_enabled: bool = True,
) -> ReplicationPolicy:
    """The policy a flow's config names; `source_alias` matters only to the identity policy."""
    if name == "identity":
        return IdentityReplicationPolicy(
            source_alias, separator, internal_topic_separator_enabled=internal_topic_separator_enabled
        )
    return DefaultReplicationPolicy(
        separator, internal_topic_separator_enabled=internal_topic_separator_enabled
    )
