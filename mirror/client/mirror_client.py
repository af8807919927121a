"""MirrorClient: topology, heartbeats and translated offsets of one cluster, from its topics alone.

Everything here reads what the checkpoint and heartbeat components (ours or MM2's) wrote on the
cluster, so it works during an outage of the other cluster, which is when runbooks need it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from mirror.checkpoint.checkpoints import GroupSyncPlan, plan_group_sync
from mirror.config import load_config
from mirror.config.models import MirrorConfig
from mirror.errors import ConfigError, KafkaClientError, WireFormatError
from mirror.flow.tail import PartitionTail
from mirror.kafka.admin import list_topics
from mirror.kafka.clients import admin_client, check_properties
from mirror.kafka.group_admin import alter_group_offsets, group_offsets, groups_with_members
from mirror.kafka.offsets import last_stable_offsets
from mirror.kafka.wire import Checkpoint, Heartbeat
from mirror.policy import (
    ReplicationPolicy,
    checkpoint_topics,
    heartbeat_topics,
    make_policy,
    remote_topics,
    replication_hops,
    replication_path,
    upstream_clusters,
)

Partition = tuple[str, int]


@dataclass(frozen=True)
class HeartbeatPath:
    """The newest heartbeat on one heartbeats topic of the cluster."""

    topic: str
    path: str  # "A->B": where the heartbeats came from, through which clusters
    hops: int  # 0 for the cluster's own `heartbeats` topic
    source: str  # the pair the heartbeat names
    target: str
    age_seconds: float  # now minus the newest heartbeat's timestamp
    # Arrival time minus emission time of a heartbeat seen arriving while watching; None if none came.
    delay_seconds: float | None


class MirrorClient:
    def __init__(
        self, alias: str, properties: Mapping[str, str], policy: ReplicationPolicy | None = None
    ) -> None:
        self.alias = alias
        self._properties = dict(properties)
        self._policy = policy or make_policy("default", source_alias=None)
        # A bad property (e.g. security.protocol: abc) is a one-line ConfigError, not a KafkaException.
        check_properties({"admin": self._properties}, what=f"cluster {alias}")
        self._admin = admin_client(self._properties)

    @classmethod
    def from_config(cls, config: MirrorConfig | str | Path, alias: str) -> MirrorClient:
        """A client for cluster `alias` of an mm2.yaml, with the flows' replication policy."""
        loaded = config if isinstance(config, MirrorConfig) else load_config(Path(config))
        cluster = loaded.clusters.get(alias)
        if cluster is None:
            known = ", ".join(sorted(loaded.clusters)) or "none"
            raise ConfigError([f"cluster {alias!r} is not defined in the configuration (defined: {known})"])
        flows = [flow for _, target, flow in loaded.flow_endpoints() if target == alias]
        policy = None
        if flows:
            flow = flows[0]
            source = next(s for s, t, _ in loaded.flow_endpoints() if t == alias)
            policy = make_policy(
                flow.replication_policy,
                source_alias=source,
                separator=flow.replication_policy_separator,
                internal_topic_separator_enabled=flow.replication_policy_internal_topic_separator_enabled,
            )
        return cls(alias, cluster.client_properties("consumer"), policy)

    def _topics(self) -> list[str]:
        return sorted(list_topics(self._admin, what=f"cluster {self.alias}"))

    def upstream_clusters(self) -> list[str]:
        return upstream_clusters(self._topics(), self._policy)

    def replication_hops(self, upstream: str) -> int:
        return replication_hops(self._topics(), self._policy, upstream)

    def remote_topics(self, source: str | None = None) -> list[str]:
        """Topics replicated into this cluster, or only those replicated directly from `source`."""
        return remote_topics(self._topics(), self._policy, source)

    def checkpoint_topics(self) -> list[str]:
        return checkpoint_topics(self._topics(), self._policy)

    def heartbeats(self, *, watch_seconds: float = 3.0) -> list[HeartbeatPath]:
        """The newest heartbeat per heartbeats topic; watches `watch_seconds` to time arrivals."""
        watch = HeartbeatWatch(self)
        try:
            watch.poll()
            deadline = time.monotonic() + watch_seconds
            while time.monotonic() < deadline and watch.topics:
                time.sleep(0.2)
                watch.poll(timeout_seconds=10)
            return watch.paths()
        finally:
            watch.close()

    def _heartbeat_topics(self) -> list[str]:
        return heartbeat_topics(self._topics(), self._policy)

    def _path_of(self, topic: str, heartbeat: Heartbeat) -> tuple[str, int]:
        """(replication path, hops) of a heartbeat read from `topic` of this cluster."""
        chain = self._policy.source_chain(topic)
        path = replication_path(chain, self.alias) if chain else f"{heartbeat.source_alias}->{self.alias}"
        return path, len(chain)

    def translate_offsets(self, source: str, group: str) -> dict[Partition, int]:
        """Group `group`'s offsets from cluster `source`, translated to this cluster's remote topics.

        RemoteClusterUtils.translateOffsets: the newest checkpoint per partition of the group
        in `<source>.checkpoints.internal`.
        """
        return {tp: c.downstream_offset for tp, c in self._checkpoints(source, group).items()}

    def apply_translated_offsets(self, source: str, group: str) -> GroupSyncPlan:
        """Write `group`'s translated offsets into the group on this cluster, from its checkpoints
        alone (the source may be down: a failover). The checkpoint component's rules: never while
        the group has members here, never backwards, never past a remote partition's end."""
        checkpoints = self._checkpoints(source, group)
        where = f"cluster {self.alias}"
        active = group in groups_with_members(self._admin, [group], what=where)
        current = group_offsets(self._admin, [group], what=where).get(group, {})
        plan = plan_group_sync(
            group,
            checkpoints,
            active=active,
            target_offsets={tp: c.offset for tp, c in current.items()},
            remote_ends=last_stable_offsets(self._admin, list(checkpoints)),
        )
        if plan.write:
            alter_group_offsets(self._admin, group, plan.write, what=where)
        return plan

    def _checkpoints(self, source: str, group: str) -> dict[Partition, Checkpoint]:
        """The newest checkpoint per remote partition of `group` from `source`."""
        topic = self._policy.checkpoints_topic(source)
        if topic not in self._topics():
            raise KafkaClientError(
                f"cluster {self.alias} has no {topic}; is a flow {source}->{self.alias} running with "
                "emit_checkpoints: true?"
            )
        tail = PartitionTail(self._properties, topic)
        newest: dict[Partition, Checkpoint] = {}
        try:
            for record in tail.catch_up():
                try:
                    checkpoint = Checkpoint.decode(record.key, record.value)
                except WireFormatError:
                    continue  # RemoteClusterUtils skips what it cannot parse, too
                if checkpoint.group == group:
                    newest[(checkpoint.topic, checkpoint.partition)] = checkpoint
        finally:
            tail.close()
        return dict(sorted(newest.items()))


class HeartbeatWatch:
    """Follows the heartbeats topics of one cluster (all of them, or `only` those): the newest
    heartbeat of each, and how long the last one that arrived while watching took to get there.
    Topics are listed again every `refresh_seconds`: a new flow's appear, deleted ones are dropped.
    A topic that cannot be read is skipped until it can (`errors` says why), so one bad topic never
    hides the others. Records that do not decode are counted per topic, never used."""

    def __init__(
        self, client: MirrorClient, *, refresh_seconds: float = 30.0, only: Collection[str] | None = None
    ) -> None:
        self._client = client
        self._refresh_seconds = refresh_seconds
        self._only = None if only is None else set(only)
        self._listed_at = -math.inf
        self._tails: dict[str, PartitionTail] = {}
        self._newest: dict[str, Heartbeat] = {}
        self._delays: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self.errors: dict[str, str] = {}  # topic -> why its last read failed
        # paths() and skipped() may be called from another thread (a metrics scrape) while poll() reads.
        self._lock = threading.Lock()

    @property
    def topics(self) -> list[str]:
        return sorted(self._tails)

    def poll(self, *, timeout_seconds: float = 60.0) -> None:
        """Read what arrived since the last poll; KafkaClientError only if the cluster cannot list its
        topics. The first read of a topic finds what was there already: its newest heartbeat
        counts, but not as an arrival to time."""
        if time.monotonic() - self._listed_at >= self._refresh_seconds:
            self._relist()
        for topic, tail in list(self._tails.items()):
            try:
                records = tail.catch_up(timeout_seconds=timeout_seconds)
            except KafkaClientError as exc:
                self.errors[topic] = str(exc)
                continue
            self.errors.pop(topic, None)
            with self._lock:
                first = topic not in self._newest
                for record in records:
                    try:
                        heartbeat = Heartbeat.decode(record.key, record.value)
                    except WireFormatError:
                        self._skipped[topic] = self._skipped.get(topic, 0) + 1
                        continue
                    self._newest[topic] = _newer(self._newest.get(topic), heartbeat)
                    if not first:
                        self._delays[topic] = max(0.0, time.time() - heartbeat.timestamp_ms / 1000)

    def _relist(self) -> None:
        listed = set(self._client._heartbeat_topics())
        if self._only is not None:
            listed &= self._only
        for topic in set(self._tails) - listed:
            self._tails.pop(topic).close()
            self.errors.pop(topic, None)
            with self._lock:
                self._newest.pop(topic, None)
                self._delays.pop(topic, None)
        for topic in listed - set(self._tails):
            self._tails[topic] = PartitionTail(self._client._properties, topic)
        self._listed_at = time.monotonic()

    def paths(self) -> list[HeartbeatPath]:
        now = time.time()
        with self._lock:
            newest, delays = sorted(self._newest.items()), dict(self._delays)
        paths = []
        for topic, heartbeat in newest:
            path, hops = self._client._path_of(topic, heartbeat)
            age = max(0.0, now - heartbeat.timestamp_ms / 1000)
            source, target = heartbeat.source_alias, heartbeat.target_alias
            paths.append(HeartbeatPath(topic, path, hops, source, target, age, delays.get(topic)))
        return paths

    def skipped(self) -> dict[str, int]:
        """Per topic, how many of its records did not decode."""
        with self._lock:
            return dict(self._skipped)

    def close(self) -> None:
        for tail in self._tails.values():
            tail.close()
        self._tails.clear()


def translate_offsets(
    config: MirrorConfig | str | Path, cluster: str, source: str, group: str
) -> dict[Partition, int]:
    """`group`'s offsets from cluster `source` translated for cluster `cluster` of an mm2.yaml."""
    return MirrorClient.from_config(config, cluster).translate_offsets(source, group)


def _newer(current: Heartbeat | None, candidate: Heartbeat) -> Heartbeat:
    return candidate if current is None or candidate.timestamp_ms >= current.timestamp_ms else current
