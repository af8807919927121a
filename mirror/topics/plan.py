"""What the target lacks for a flow: remote topics to create and partitions to add. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mirror.policy import ReplicationPolicy, TopicFilter, should_replicate_topic
from mirror.policy.filters import compile_patterns


@dataclass(frozen=True)
class TopicPlan:
    create: list[tuple[str, str, int]] = field(
        default_factory=list
    )  # (source topic, remote topic, partitions)
    grow: list[tuple[str, int]] = field(default_factory=list)  # (remote topic, new partition count)

    def __bool__(self) -> bool:
        return bool(self.create or self.grow)


def plan_topics(
    source_partitions: Mapping[str, int],
    target_partitions: Mapping[str, int],
    *,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
    topic_filter: TopicFilter,
    heartbeats_replication: bool = True,
) -> TopicPlan:
    """Remote topics to create with the source's partition count, and remote topics to grow to it.

    Never shrinks or deletes (as MM2): a remote topic with more partitions is left alone.
    """
    plan = TopicPlan()
    for topic in sorted(source_partitions):
        if not should_replicate_topic(
            topic,
            topic_filter=topic_filter,
            policy=policy,
            target_alias=target_alias,
            heartbeats_replication_enabled=heartbeats_replication,
        ):
            continue
        remote = policy.remote_topic(source_alias, topic)
        partitions = source_partitions[topic]
        existing = target_partitions.get(remote)
        if existing is None:
            plan.create.append((topic, remote, partitions))
        elif existing < partitions:
            plan.grow.append((remote, partitions))
    return plan


def synced_configs(source_configs: Mapping[str, str], exclude: Sequence[str]) -> dict[str, str]:
    """The source topic configs a remote topic gets: all explicitly set ones but the excluded."""
    excluded = compile_patterns(exclude)
    return {
        name: value
        for name, value in source_configs.items()
        if excluded is None or not re.fullmatch(excluded, name)
    }
