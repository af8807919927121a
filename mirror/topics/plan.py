"""What the target lacks for a flow: remote topics to create and partitions to add. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mirror.kafka.acl import TopicAcl
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


@dataclass(frozen=True)
class TopicSelection:
    """Which source topics a flow replicates: its filter, policy and heartbeats rule (MM2's)."""

    target_alias: str
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    heartbeats_replication: bool = True

    def of(self, source_topics: Iterable[str]) -> list[str]:
        """The replicated ones among `source_topics`, sorted."""
        return sorted(
            topic
            for topic in source_topics
            if should_replicate_topic(
                topic,
                topic_filter=self.topic_filter,
                policy=self.policy,
                target_alias=self.target_alias,
                heartbeats_replication_enabled=self.heartbeats_replication,
            )
        )


def plan_topics(
    source_partitions: Mapping[str, int],
    target_partitions: Mapping[str, int],
    source_alias: str,
    selection: TopicSelection,
) -> TopicPlan:
    """Remote topics to create with the source's partition count, and remote topics to grow to it.

    Never shrinks or deletes (as MM2): a remote topic with more partitions is left alone.
    """
    plan = TopicPlan()
    for topic in selection.of(source_partitions):
        remote = selection.policy.remote_topic(source_alias, topic)
        partitions = source_partitions[topic]
        existing = target_partitions.get(remote)
        if existing is None:
            plan.create.append((topic, remote, partitions))
        elif existing < partitions:
            plan.grow.append((remote, partitions))
    return plan


def partitions_to_copy(
    source_partitions: Mapping[str, int],
    target_partitions: Mapping[str, int],
    source_alias: str,
    selection: TopicSelection,
) -> list[tuple[str, int]]:
    """Every selected source partition whose remote partition exists: what the copy tasks share.

    Only the source's topics count, so a remote topic that exists on the target alone (left by an
    earlier run, or made by hand) changes nothing; MM2's refreshTopicPartitions ignores it too.
    """
    return [
        (topic, partition)
        for topic in selection.of(source_partitions)
        if (remote := selection.policy.remote_topic(source_alias, topic)) in target_partitions
        for partition in range(min(source_partitions[topic], target_partitions[remote]))
    ]


def synced_configs(source_configs: Mapping[str, str], exclude: Sequence[str]) -> dict[str, str]:
    """The source topic configs a remote topic gets: all explicitly set ones but the excluded."""
    excluded = compile_patterns(exclude)
    return {
        name: value
        for name, value in source_configs.items()
        if excluded is None or not re.fullmatch(excluded, name)
    }


@dataclass(frozen=True)
class ConfigChanges:
    """Incremental changes that make a remote topic's configs match its source topic's."""

    set: dict[str, str] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.set) + len(self.delete)


def config_changes(
    source_configs: Mapping[str, str], target_configs: Mapping[str, str], exclude: Sequence[str]
) -> ConfigChanges:
    """MM2's syncTopicConfigs: SET what `source_configs` holds (the source's explicit settings,
    and with use.defaults.from=source its defaults too), DELETE target overrides it does not
    hold; never touch excluded properties."""
    wanted = synced_configs(source_configs, exclude)
    present = synced_configs(target_configs, exclude)
    return ConfigChanges(
        set={name: value for name, value in wanted.items() if present.get(name) != value},
        delete=sorted(name for name in present if name not in wanted),
    )


def acls_to_sync(
    source_acls: Sequence[TopicAcl], target_acls: Sequence[TopicAcl], remote_topics: Mapping[str, str]
) -> list[TopicAcl]:
    """MM2's syncTopicAcls: the source's ACLs of replicated topics, renamed to the remote topics,
    ALLOW WRITE dropped (only mirror writes remote topics), ALLOW ALL downgraded to READ, DENY as
    is; minus what the target has. Nothing is ever deleted on the target.

    Δ MM2: DENY WRITE is dropped too. On the source it fences producers (`mirror migrate cutover`
    fences them so); copied to the remote topic, which under the identity policy is the very topic
    those producers move to, it would lock them out of the target as well.

    `remote_topics` maps each replicated source topic to its remote name.
    """
    present = set(target_acls)
    wanted = []
    for acl in source_acls:
        remote = remote_topics.get(acl.topic)
        if remote is None:
            continue
        operation = acl.operation
        if operation == "WRITE":
            continue  # ALLOW: only mirror writes remote topics; DENY: a source-side fence
        if acl.permission == "ALLOW" and operation == "ALL":
            operation = "READ"
        synced = TopicAcl(remote, acl.principal, acl.host, operation, acl.permission)
        if synced not in present:
            present.add(synced)
            wanted.append(synced)
    return sorted(wanted)
