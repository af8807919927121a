"""Everything a flow's Spark job needs, as one picklable, JSON-able value.

FlowSettings crosses process boundaries (driver -> data-source planner -> executors), so it holds
plain data only: revealed client properties, names, numbers. It is built once on the driver from
the validated MirrorConfig, and every name (transactional ids, groups, topics) comes from here.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from mirror.policy import GroupFilter, ReplicationPolicy, TopicFilter, make_policy

if TYPE_CHECKING:  # executors import this module; they need no pydantic-settings (~0.3 s a worker)
    from mirror.config.models import FlowConfig, MirrorConfig


@dataclass(frozen=True)
class FlowSettings:
    source: str
    target: str
    source_consumer: dict[str, str]
    source_admin: dict[str, str]
    source_producer: dict[str, str]
    target_producer: dict[str, str]
    target_consumer: dict[str, str]
    target_admin: dict[str, str]
    topics: list[str]
    topics_exclude: list[str]
    replication_policy: str = "default"
    separator: str = "."
    internal_separator_enabled: bool = True
    heartbeats_replication: bool = True
    exactly_once: bool = True
    offset_syncs_location: str = "target"
    emit_offset_syncs: bool = True
    offset_lag_max: int = 100
    offsets_topic: str = ""
    # Copy tasks: how many, how often each commits a transaction, how long one Spark epoch runs.
    tasks_max: int = 1
    producers_per_task: int = 1
    # Whose producer a copy task writes through: librdkafka's, or aiokafka's, which packs many
    # partitions into one produce request (mirror.kafka.packing_producer).
    copy_producer: str = "librdkafka"
    commit_interval_ms: int = 100
    epoch_seconds: float = 600.0
    throttle_bytes_per_second: float | None = None  # the whole flow's; its tasks share it
    pause_idle_partitions_after_seconds: float | None = 30.0  # None: never (mirror.source.idle_pause)
    replication_factor: int | None = None
    internal_replication_factor: int | None = None
    config_properties_exclude: list[str] = field(default_factory=list)
    use_defaults_from: str = "target"
    on_source_truncation: str = "continue"
    # Where a partition the flow never copied starts: the source consumer's auto.offset.reset.
    auto_offset_reset: str = "earliest"
    on_remote_topic_deleted: str = "recopy"
    # Which `mirror run` this is; the lease records its owner so fenced tasks of another run stop.
    instance_id: str = ""
    groups: list[str] = field(default_factory=list)
    groups_exclude: list[str] = field(default_factory=list)
    emit_checkpoints: bool = True
    refresh_groups_interval_seconds: float = 10.0
    sync_group_offsets: bool = True
    sync_group_offsets_interval_seconds: float = 5.0
    emit_heartbeats: bool = True
    # Also write heartbeats `target->source` into the source, which this flow then carries back
    # as `<source>.heartbeats` (MM2's reverse herder); off when a flow target->source does it.
    reverse_heartbeats: bool = True
    # Heartbeats reach the source's heartbeats topic (this flow's reverse heartbeats, or those of an
    # enabled flow target->source) and the flow copies that topic, so they show it alive.
    heartbeats_through: bool = True
    # How the executors log (mirror.logs): `mirror run --log-format` and mm2.yaml's `logging:`.
    log_format: str = "text"
    log_levels: dict[str, str] = field(default_factory=dict)
    log_debug: bool = False  # `mirror --debug run`: the workers log at DEBUG too

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def policy(self) -> ReplicationPolicy:
        return make_policy(
            "identity" if self.replication_policy == "identity" else "default",
            source_alias=self.source,
            separator=self.separator,
            internal_topic_separator_enabled=self.internal_separator_enabled,
        )

    def topic_filter(self) -> TopicFilter:
        return TopicFilter(self.topics, self.topics_exclude)

    def remote_topic(self, topic: str) -> str:
        return self.policy().remote_topic(self.source, topic)

    def offset_syncs_topic(self) -> str:
        # MM2 names the topic after "the other cluster" of where it lives (MM2.md section 0).
        other = self.target if self.offset_syncs_location == "source" else self.source
        return self.policy().offset_syncs_topic(other)

    def copy_task_transactional_id(self, index: int, producer: int = 0) -> str:
        """The id of copy task `index`'s producer number `producer`. Producer 0 has the task's own
        number; the others count on past every task's (task:{index + producer * tasks_max}), so
        all ids of a flow are 0..copy_task_ids()-1. ':' cannot occur in a topic name, so no
        legacy id collides."""
        return f"mirror-{self.source}-{self.target}-task:{index + producer * self.tasks_max}"

    def copy_task_ids(self) -> int:
        """How many copy-task transactional ids this flow's tasks may hold: the fence's range."""
        return self.tasks_max * (self.producers_per_task if self.exactly_once else 1)

    def task_producers(self, partitions: int) -> int:
        """How many transactional producers a task of `partitions` partitions writes through.

        librdkafka sends one partition per produce request, at most five in flight per
        connection (confluentinc/librdkafka#1700), and a commit waits for every partition's
        records: with hundreds of partitions per task, each carrying a few records per
        transaction, one producer spends the commit in sequential round trips. Several
        producers (one connection each per broker) send in parallel, each committing its own
        partitions' records and positions. The default stays one: on two cores, where the
        brokers share the CPU, more producers cost more than they saved (README, Sizing).
        At-least-once keeps one.
        """
        if not self.exactly_once:
            return 1
        return max(1, min(self.producers_per_task, partitions))

    def legacy_transactional_id(self, topic: str, partition: int) -> str:
        """The per-partition id mirror used before copy tasks; fenced once when taking over from it."""
        return f"mirror-{self.source}-{self.target}-{topic}-{partition}"

    def positions_group(self) -> str:
        """Target-side group holding the next source offset per remote partition (O(1) guard).

        The "__" prefix keeps it out of MM2's and mirror's default group filters.
        """
        return f"__mirror-positions.{self.source}-{self.target}"

    def lease_group(self) -> str:
        """Target group whose committed metadata names the instance that owns the flow."""
        return f"__mirror-instance.{self.source}-{self.target}"

    def offsets_tool_transactional_id(self) -> str:
        """Held by `mirror offsets` while it writes a stopped flow's new positions."""
        return f"mirror-{self.source}-{self.target}-offsets"

    def lease_transactional_id(self) -> str:
        """Held by the one `mirror run` instance that owns this flow."""
        return f"mirror-{self.source}-{self.target}-instance"

    def group_filter(self) -> GroupFilter:
        return GroupFilter(self.groups, self.groups_exclude)

    def checkpoints_topic(self) -> str:
        return self.policy().checkpoints_topic(self.source)

    def checkpoint_topic_name(self, topic: str) -> str:
        """The topic a checkpoint of `topic` names: its copy on the target (MM2's renameTopicPartition)."""
        policy = self.policy()
        if policy.topic_source(topic) == self.target:
            return policy.original_topic(topic)  # `B.x` on A, checkpointed back on B, is `x`
        return self.remote_topic(topic)

    def checkpoint_offsets_topic(self) -> str:
        """The checkpoint component's own offsets topic on the target (KIP-618 offsets.storage.topic)."""
        return f"mm2-checkpoint-offsets.{self.source}.internal"

    def checkpoint_transactional_id(self) -> str:
        return f"mirror-{self.source}-{self.target}-checkpoints"

    def heartbeat_offsets_topic(self, source: str) -> str:
        """The heartbeat component's offsets topic on the cluster the heartbeats `source->...` go to."""
        return f"mm2-heartbeat-offsets.{source}.internal"

    def heartbeat_transactional_id(self, source: str, target: str) -> str:
        # Named after the pair, not the flow: flow B->A's own heartbeats take over this id.
        return f"mirror-{source}-{target}-heartbeats"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FlowSettings:
        return cls(**json.loads(text))


def default_tasks_max() -> int:
    """One copy task per core: each is a Python loop that can keep one core busy."""
    return max(1, os.cpu_count() or 1)


def flow_settings(
    config: MirrorConfig,
    source: str,
    target: str,
    flow: FlowConfig,
    *,
    instance_id: str = "",
    log_format: str = "text",
    log_debug: bool = False,
) -> FlowSettings:
    reverse = next((f for s, t, f in config.flow_endpoints() if (s, t) == (target, source)), None)
    source_cluster, target_cluster = config.clusters[source], config.clusters[target]
    location = flow.offset_syncs_topic_location or ("target" if flow.exactly_once else "source")
    return FlowSettings(
        source=source,
        target=target,
        source_consumer=source_cluster.client_properties("consumer"),
        source_admin=source_cluster.client_properties("admin"),
        source_producer=source_cluster.client_properties("producer"),
        target_producer=target_cluster.client_properties("producer"),
        target_consumer=target_cluster.client_properties("consumer"),
        target_admin=target_cluster.client_properties("admin"),
        topics=list(flow.topics),
        topics_exclude=list(flow.topics_exclude),
        replication_policy=flow.replication_policy,
        separator=flow.replication_policy_separator,
        internal_separator_enabled=flow.replication_policy_internal_topic_separator_enabled,
        heartbeats_replication=flow.heartbeats_replication,
        exactly_once=flow.exactly_once,
        offset_syncs_location=location,
        emit_offset_syncs=flow.emit_offset_syncs,
        offset_lag_max=flow.offset_lag_max,
        offsets_topic=flow.offsets_storage_topic or f"mm2-offsets.{source}.internal",
        tasks_max=flow.tasks_max or default_tasks_max(),
        producers_per_task=flow.producers_per_task,
        copy_producer=flow.copy_producer or "librdkafka",  # `mirror run` chooses when unset
        commit_interval_ms=flow.commit_interval_ms,
        epoch_seconds=config.spark.epoch_seconds,
        throttle_bytes_per_second=flow.throttle_bytes_per_second,
        pause_idle_partitions_after_seconds=flow.pause_idle_partitions_after_seconds,
        replication_factor=flow.replication_factor,
        internal_replication_factor=flow.internal_topics_replication_factor,
        config_properties_exclude=list(flow.config_properties_exclude),
        use_defaults_from=flow.use_defaults_from,
        on_source_truncation=flow.on_source_truncation,
        auto_offset_reset=source_cluster.client_properties("consumer").get("auto.offset.reset", "earliest"),
        on_remote_topic_deleted=flow.on_remote_topic_deleted,
        instance_id=instance_id,
        log_format=log_format,
        log_levels=dict(config.logging),
        log_debug=log_debug,
        groups=list(flow.groups),
        groups_exclude=list(flow.groups_exclude),
        emit_checkpoints=flow.emit_checkpoints,
        refresh_groups_interval_seconds=(
            flow.refresh_groups_interval_seconds if flow.refresh_groups else float("inf")
        ),
        sync_group_offsets=flow.sync_group_offsets,
        sync_group_offsets_interval_seconds=flow.sync_group_offsets_interval_seconds,
        emit_heartbeats=flow.emit_heartbeats,
        # A flow target->source that is enabled emits these itself; one configured with
        # emit_heartbeats: false asks for none (MM2 reads that pair's setting the same way).
        reverse_heartbeats=flow.emit_heartbeats
        and (reverse is None or (not reverse.enabled and reverse.emit_heartbeats)),
        heartbeats_through=flow.emit_heartbeats
        and flow.heartbeats_replication
        and (reverse is None or reverse.emit_heartbeats),
    )


def heartbeat_pairs(config: MirrorConfig) -> set[tuple[str, str]]:
    """(source, target) of every heartbeat the enabled flows of `config` emit when run."""
    pairs = set()
    for source, target, flow in config.flow_endpoints():
        if flow.enabled:
            settings = flow_settings(config, source, target, flow)
            if settings.emit_heartbeats:
                pairs.add((source, target))
            if settings.reverse_heartbeats:
                pairs.add((target, source))
    return pairs
