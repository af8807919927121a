"""Apply a flow's topic plan and create its internal topics. Driver only."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mirror.kafka.admin import add_partitions, create_topic, list_topics, non_default_configs
from mirror.kafka.clients import admin_client
from mirror.replication.settings import FlowSettings
from mirror.topics.plan import plan_topics, synced_configs

log = logging.getLogger(__name__)

# Connect's default for offset.storage.partitions; keys are hashed over them like Connect does.
OFFSETS_TOPIC_PARTITIONS = 25


@dataclass(frozen=True)
class SyncResult:
    created: int
    grown: int


class TopicSync:
    """Keeps the target's remote topics in step with the source's selected topics."""

    def __init__(self, settings: FlowSettings) -> None:
        self._settings = settings
        self._source_admin = admin_client(settings.source_admin)
        self._target_admin = admin_client(settings.target_admin)
        self._offset_syncs_admin = (
            self._target_admin if settings.offset_syncs_location == "target" else self._source_admin
        )

    def ensure_internal_topics(self) -> None:
        s = self._settings
        compact = {"cleanup.policy": "compact"}
        if create_topic(
            self._target_admin,
            s.offsets_topic,
            partitions=OFFSETS_TOPIC_PARTITIONS,
            replication_factor=s.internal_replication_factor,
            config=compact,
        ):
            log.info("flow %s: created offsets topic %s on %s", s.name, s.offsets_topic, s.target)
        if s.emit_offset_syncs and create_topic(
            self._offset_syncs_admin,
            s.offset_syncs_topic(),
            partitions=1,
            replication_factor=s.internal_replication_factor,
            config=compact,
        ):
            log.info("flow %s: created offset-syncs topic %s", s.name, s.offset_syncs_topic())

    def sync(self) -> SyncResult:
        s = self._settings
        source = list_topics(self._source_admin, what=f"source cluster {s.source}")
        target = list_topics(self._target_admin, what=f"target cluster {s.target}")
        plan = plan_topics(
            {name: t.partitions for name, t in source.items()},
            {name: t.partitions for name, t in target.items()},
            source_alias=s.source,
            target_alias=s.target,
            policy=s.policy(),
            topic_filter=s.topic_filter(),
            heartbeats_replication=s.heartbeats_replication,
        )
        created = 0
        for topic, remote, partitions in plan.create:
            config = synced_configs(
                non_default_configs(self._source_admin, topic), s.config_properties_exclude
            )
            if create_topic(
                self._target_admin,
                remote,
                partitions=partitions,
                replication_factor=s.replication_factor,
                config=config,
            ):
                created += 1
                log.info("flow %s: created %s on %s with %d partitions", s.name, remote, s.target, partitions)
        for remote, partitions in plan.grow:
            add_partitions(self._target_admin, remote, partitions)
            log.info("flow %s: %s on %s now has %d partitions", s.name, remote, s.target, partitions)
        return SyncResult(created, len(plan.grow))
