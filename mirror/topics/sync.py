"""Apply a flow's topic plan and create its internal topics. Driver only."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from mirror.config.flow_settings import FlowSettings
from mirror.errors import NotAuthorizedError
from mirror.kafka.admin import (
    add_partitions,
    alter_topic_configs,
    create_topic,
    create_topic_acls,
    create_topics,
    describe_topic_acls,
    list_topics,
    non_default_configs_of,
)
from mirror.kafka.clients import admin_client
from mirror.topics.plan import (
    TopicSelection,
    acls_to_sync,
    config_changes,
    partitions_to_copy,
    plan_topics,
    synced_configs,
)

log = logging.getLogger(__name__)
# After a create, how long metadata may take to list the new partitions before the assignment is
# built from what it lists: a base, and more per partition. A broker applies creations in order
# and makes each partition's log files as it goes; one broker on this 2-core machine took 30-40 s
# to list the last of 10,000 new partitions. A partial first assignment made a second generation
# a refresh later, every copy task giving its partitions up and taking them again.
VISIBLE_SECONDS = 10.0
VISIBLE_SECONDS_PER_PARTITION = 0.01

# Connect's default for offset.storage.partitions; keys are hashed over them like Connect does.
OFFSETS_TOPIC_PARTITIONS = 25


@dataclass(frozen=True)
class SyncResult:
    created_topics: frozenset[str]  # remote names of the topics this sync made
    grown: int

    @property
    def created(self) -> int:
        return len(self.created_topics)


class TopicSync:
    """Keeps the target's remote topics in step with the source's selected topics."""

    def __init__(self, settings: FlowSettings) -> None:
        self._settings = settings
        self._source_admin = admin_client(settings.source_admin)
        self._target_admin = admin_client(settings.target_admin)
        self._acl_sync_skipped = False

    def ensure_internal_topics(self) -> None:
        """Create the flow's internal topics that do not exist yet (compacted, as MM2's are).

        Existing ones are left alone, so a principal without Create can run against topics an
        administrator created beforehand.
        """
        s = self._settings
        source, target = (self._source_admin, s.source), (self._target_admin, s.target)
        offset_syncs = target if s.offset_syncs_location == "target" else source
        wanted: list[tuple[tuple[AdminClient, str], str, int]] = [
            (target, s.offsets_topic, OFFSETS_TOPIC_PARTITIONS)
        ]
        if s.emit_offset_syncs:
            wanted.append((offset_syncs, s.offset_syncs_topic(), 1))
        if s.emit_checkpoints:
            wanted += [
                (target, s.checkpoints_topic(), 1),
                (target, s.checkpoint_offsets_topic(), OFFSETS_TOPIC_PARTITIONS),
            ]
        heartbeats = s.policy().heartbeats_topic()
        if s.emit_heartbeats:
            wanted += [(target, heartbeats, 1), (target, s.heartbeat_offsets_topic(s.source), 1)]
        if s.reverse_heartbeats:
            wanted += [(source, heartbeats, 1), (source, s.heartbeat_offsets_topic(s.target), 1)]
        existing = {
            alias: set(list_topics(admin, what=f"cluster {alias}")) for admin, alias in (source, target)
        }
        for (admin, alias), topic, partitions in wanted:
            if topic in existing[alias]:
                continue
            try:
                created = create_topic(
                    admin,
                    topic,
                    partitions=partitions,
                    replication_factor=s.internal_replication_factor,
                    config={"cleanup.policy": "compact"},
                )
            except NotAuthorizedError as exc:
                # MM2 assumes such a topic exists and fails later, less clearly; an existing topic
                # was listed above, so this one is missing, and the remedy is one of two.
                raise NotAuthorizedError(
                    f"{exc}, or have an administrator create {topic} on {alias} beforehand "
                    f"({partitions} partitions, cleanup.policy=compact)"
                ) from exc
            if created:
                log.info("flow %s: created %s on %s", s.name, topic, alias)

    def sync(self) -> SyncResult:
        s = self._settings
        plan = plan_topics(*self._partition_counts(), s.source, self._selection())
        configs = non_default_configs_of(
            self._source_admin,
            [topic for topic, _, _ in plan.create],
            what=f"source cluster {s.source}",
            with_defaults=s.use_defaults_from == "source",
        )
        created = create_topics(
            self._target_admin,
            [
                (remote, partitions, synced_configs(configs[topic], s.config_properties_exclude))
                for topic, remote, partitions in plan.create
            ],
            replication_factor=s.replication_factor,
        )
        sizes = {remote: partitions for _, remote, partitions in plan.create}
        for remote in created:
            log.info("flow %s: created %s on %s with %d partitions", s.name, remote, s.target, sizes[remote])
        for remote, partitions in plan.grow:
            add_partitions(self._target_admin, remote, partitions)
            log.info("flow %s: %s on %s now has %d partitions", s.name, remote, s.target, partitions)
        if plan.create or plan.grow:
            self._wait_until_visible({remote: n for _, remote, n in plan.create} | dict(plan.grow))
        return SyncResult(frozenset(created), len(plan.grow))

    def _wait_until_visible(self, wanted: dict[str, int]) -> None:
        """Right after a create, metadata may not list the topic yet; the copy tasks' assignment is
        built from metadata, and a partition missing from it waits a whole refresh interval."""
        started = time.monotonic()
        deadline = started + VISIBLE_SECONDS + VISIBLE_SECONDS_PER_PARTITION * sum(wanted.values())
        while True:
            target = list_topics(self._target_admin, what=f"target cluster {self._settings.target}")
            missing = [n for n, count in wanted.items() if n not in target or target[n].partitions < count]
            if not missing:
                return
            if time.monotonic() >= deadline:
                log.warning(
                    "flow %s: %d of %d new remote topics not listed by %s after %.0f s (%s first); "
                    "copying the others now, and these after the next topic refresh",
                    self._settings.name,
                    len(missing),
                    len(wanted),
                    self._settings.target,
                    time.monotonic() - started,
                    missing[0],
                )
                return
            # Listing 10,000 partitions ten times a second would load the broker making them.
            time.sleep(0.1 if len(wanted) < 100 else 0.5)

    def sync_configs(self, skip: Collection[str] = ()) -> int:
        """Make every remote topic's configs match its source topic's, but for the remote topics
        `skip` names; returns how many entries changed."""
        s = self._settings
        changed = 0
        replicated = sorted((t, remote) for t, remote in self._replicated().items() if remote not in skip)
        source_configs = non_default_configs_of(
            self._source_admin,
            [topic for topic, _ in replicated],
            what=f"source cluster {s.source}",
            with_defaults=s.use_defaults_from == "source",
        )
        target_configs = non_default_configs_of(
            self._target_admin, [remote for _, remote in replicated], what=f"target cluster {s.target}"
        )
        for topic, remote in replicated:
            changes = config_changes(
                source_configs[topic], target_configs[remote], s.config_properties_exclude
            )
            if changes:
                alter_topic_configs(self._target_admin, remote, changes.set, changes.delete)
                changed += len(changes)
        if changed:
            log.info("flow %s: synced %d topic config entries to %s", s.name, changed, s.target)
        return changed

    def replicated_partitions(self) -> list[tuple[str, int]]:
        """Every source partition this flow copies that exists on the target."""
        return partitions_to_copy(*self._partition_counts(), self._settings.source, self._selection())

    def selected_topics(self) -> list[str]:
        """Source topics this flow copies (whether or not their remote topic exists yet)."""
        source = list_topics(self._source_admin, what=f"source cluster {self._settings.source}")
        return self._selection().of(source)

    def selected_partitions(self) -> list[tuple[str, int]]:
        """Every source partition this flow copies, whether or not it exists on the target yet."""
        source = list_topics(self._source_admin, what=f"source cluster {self._settings.source}")
        return [(t, p) for t in self._selection().of(source) for p in range(source[t].partitions)]

    def _selection(self) -> TopicSelection:
        s = self._settings
        return TopicSelection(s.target, s.policy(), s.topic_filter(), s.heartbeats_replication)

    def _partition_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Partitions per topic on the source and on the target."""
        s = self._settings
        source = list_topics(self._source_admin, what=f"source cluster {s.source}")
        target = list_topics(self._target_admin, what=f"target cluster {s.target}")
        return {name: t.partitions for name, t in source.items()}, {
            name: t.partitions for name, t in target.items()
        }

    def _replicated(self) -> dict[str, str]:
        """Source topics of this flow that exist on the target, with their remote names."""
        s = self._settings
        target = list_topics(self._target_admin, what=f"target cluster {s.target}")
        remote = {topic: s.remote_topic(topic) for topic in self.selected_topics()}
        return {topic: name for topic, name in remote.items() if name in target}

    def sync_acls(self) -> int:
        """Copy topic ACLs with MM2's rules; returns how many bindings were created on the target."""
        s = self._settings
        source_acls = describe_topic_acls(self._source_admin)
        target_acls = describe_topic_acls(self._target_admin)
        if source_acls is None or target_acls is None:
            if not self._acl_sync_skipped:
                log.info(
                    "flow %s: ACL sync skipped: %s or %s has no authorizer; "
                    "set sync_topic_acls: false on the flow to stop trying",
                    s.name,
                    s.source,
                    s.target,
                )
                self._acl_sync_skipped = True
            return 0
        new = acls_to_sync(source_acls, target_acls, self._replicated())
        create_topic_acls(self._target_admin, new)
        if new:
            log.info("flow %s: created %d topic ACLs on %s", s.name, len(new), s.target)
        return len(new)
