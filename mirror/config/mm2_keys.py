"""What each MM2 property becomes in mm2.yaml: flow keys and their converters, client property
names librdkafka shares, and the reasons for what is deliberately not carried over."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

Converter = Callable[[str], Any]

POLICY_CLASSES = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "default",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
}


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in {"true", "false"}:
        raise ValueError(f"{value!r} is not true or false")
    return lowered == "true"


def comma_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _policy(value: str) -> str:
    name = POLICY_CLASSES.get(value.strip())
    if name is None:
        raise ValueError(
            f"custom replication policy {value!r} has no equivalent; mirror has 'default' and 'identity'"
        )
    return name


def _replication_factor(value: str) -> int | None:
    factor = int(value)
    return None if factor == -1 else factor  # -1: the broker default, which is mirror's default


# MM2 connector property -> (mm2.yaml flow key, converter)
FLOW_PROPERTIES: Mapping[str, tuple[str, Converter]] = {
    "enabled": ("enabled", _bool),
    "topics": ("topics", comma_list),
    "topics.exclude": ("topics_exclude", comma_list),
    "groups": ("groups", comma_list),
    "groups.exclude": ("groups_exclude", comma_list),
    "replication.policy.class": ("replication_policy", _policy),
    "replication.policy.separator": ("replication_policy_separator", str),
    "replication.policy.internal.topic.separator.enabled": (
        "replication_policy_internal_topic_separator_enabled", _bool,
    ),
    "offset-syncs.topic.location": ("offset_syncs_topic_location", str.strip),
    "emit.offset-syncs.enabled": ("emit_offset_syncs", _bool),
    "offset.lag.max": ("offset_lag_max", int),
    "refresh.topics.enabled": ("refresh_topics", _bool),
    "refresh.topics.interval.seconds": ("refresh_topics_interval_seconds", float),
    "refresh.groups.enabled": ("refresh_groups", _bool),
    "refresh.groups.interval.seconds": ("refresh_groups_interval_seconds", float),
    "sync.topic.configs.enabled": ("sync_topic_configs", _bool),
    "sync.topic.configs.interval.seconds": ("sync_topic_configs_interval_seconds", float),
    "sync.topic.acls.enabled": ("sync_topic_acls", _bool),
    "sync.topic.acls.interval.seconds": ("sync_topic_acls_interval_seconds", float),
    "emit.checkpoints.enabled": ("emit_checkpoints", _bool),
    "emit.checkpoints.interval.seconds": ("emit_checkpoints_interval_seconds", float),
    "sync.group.offsets.enabled": ("sync_group_offsets", _bool),
    "sync.group.offsets.interval.seconds": ("sync_group_offsets_interval_seconds", float),
    "emit.heartbeats.enabled": ("emit_heartbeats", _bool),
    "emit.heartbeats.interval.seconds": ("emit_heartbeats_interval_seconds", float),
    "heartbeats.replication.enabled": ("heartbeats_replication", _bool),
    "replication.factor": ("replication_factor", _replication_factor),
    "offset-syncs.topic.replication.factor": ("internal_topics_replication_factor", _replication_factor),
    "checkpoints.topic.replication.factor": ("internal_topics_replication_factor", _replication_factor),
    "heartbeats.topic.replication.factor": ("internal_topics_replication_factor", _replication_factor),
    "config.properties.exclude": ("config_properties_exclude", comma_list),
    "offsets.storage.topic": ("offsets_storage_topic", str.strip),
    "tasks.max": ("tasks_max", int),
    "use.defaults.from": ("use_defaults_from", str.strip),
}  # fmt: skip

# Where MM2's default differs from mirror's, the note a user needs to keep MM2's behaviour.
DEFAULT_DIFFERENCES: Mapping[str, str] = {
    "replication_factor": "MM2 creates remote topics with replication.factor 2; mirror uses the broker "
    "default (set replication_factor: 2 to keep MM2's)",
    "internal_topics_replication_factor": "MM2 creates its internal topics with replication factor 3; "
    "mirror uses the broker default (set internal_topics_replication_factor: 3 to keep MM2's)",
    "sync_group_offsets": "MM2 does not sync group offsets by default; mirror does "
    "(set sync_group_offsets: false)",
    "emit_checkpoints_interval_seconds": "MM2 emits checkpoints every 60 s; mirror every 5 s",
    "refresh_topics_interval_seconds": "MM2 rescans topics every 600 s; mirror every 10 s",
}

# Settings of MM2's Connect runtime that Spark replaces: known, deliberately not carried over.
RUNTIME_ONLY: Mapping[str, str] = {
    "dedicated.mode.enable.internal.rest": "mirror has no Connect REST layer",
    "listeners": "mirror has no Connect REST layer",
    "offset.flush.interval.ms": "mirror commits positions in every transaction",
    "transaction.boundary": "mirror commits one transaction per copied range",
    "key.converter": "mirror copies bytes as they are",
    "value.converter": "mirror copies bytes as they are",
    "header.converter": "mirror copies bytes as they are",
    "source.cluster.alias": "implied by the flow name",
    "target.cluster.alias": "implied by the flow name",
    "name": "implied by the flow name",
    "connector.class": "implied by the flow name",
}

# Plug-in classes and Java reporters: mirror has its own fixed equivalent, or none.
PLUGIN_SETTINGS: Mapping[str, str] = {
    "topic.filter.class": "mirror's topic filter is the topics and topics_exclude lists (DefaultTopicFilter)",
    "group.filter.class": "mirror's group filter is the groups and groups_exclude lists (DefaultGroupFilter)",
    "config.property.filter.class": "mirror's config filter is config_properties_exclude "
    "(DefaultConfigPropertyFilter)",
    "forwarding.admin.class": "mirror manages topics and ACLs with its own admin client; a ForwardingAdmin "
    "has no equivalent",
    "metric.reporters": "mirror serves Prometheus metrics (the metrics section); Java reporters do not apply",
}

# Connect worker storage (config, status and offsets topics of each herder).
WORKER_STORAGE_PREFIXES = ("config.storage.", "status.storage.", "offset.storage.")

# A value such as ${file:/etc/mm2/secrets.properties:password}, which MM2 resolves through a ConfigProvider.
PROVIDER_REFERENCE = re.compile(r"\$\{[^}]*?:[^}]*?\}")

# Java client property names that librdkafka understands unchanged.
SAME_CLIENT_PROPERTIES = frozenset(
    {
        "security.protocol", "sasl.mechanism", "ssl.endpoint.identification.algorithm",
        "ssl.keystore.location",
        "ssl.keystore.password", "ssl.key.password", "ssl.cipher.suites", "client.id", "client.rack",
        "auto.offset.reset", "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes",
        "fetch.max.wait.ms", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
        "batch.size", "linger.ms", "compression.type", "acks", "request.timeout.ms", "retries",
        "retry.backoff.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "metadata.max.age.ms", "enable.idempotence", "transaction.timeout.ms", "receive.buffer.bytes",
        "send.buffer.bytes", "connections.max.idle.ms", "sasl.kerberos.service.name",
    }
)  # fmt: skip
RENAMED_CLIENT_PROPERTIES: Mapping[str, str] = {
    "max.request.size": "message.max.bytes",
    "sasl.oauthbearer.token.endpoint.url": "sasl.oauthbearer.token.endpoint.url",
}


def _kilobytes(value: str) -> str:
    try:
        size = int(value)
    except ValueError:
        raise ValueError(f"{value.strip()!r} is not a number of bytes") from None
    return str(max(1, math.ceil(size / 1024)))


# Java client properties librdkafka has in another unit: Java name -> (librdkafka name, converter).
CONVERTED_CLIENT_PROPERTIES: Mapping[str, tuple[str, Converter]] = {
    # Both bound the memory a producer holds for records not yet sent (a container's memory limit).
    "buffer.memory": ("queue.buffering.max.kbytes", _kilobytes),
}
DROPPED_CLIENT_PROPERTIES: Mapping[str, str] = {
    "isolation.level": "mirror always reads the source read_committed",
    "enable.auto.commit": "mirror never auto-commits",
    "ssl.truststore.location": "librdkafka reads PEM CA files: export the truststore and set ssl.ca.location",
    "ssl.truststore.password": "librdkafka reads PEM CA files: export the truststore and set ssl.ca.location",
    "ssl.truststore.type": "librdkafka reads PEM CA files",
    "ssl.keystore.type": "librdkafka takes the format from the property holding the key: "
    "ssl.keystore.location (PKCS#12), ssl.certificate.location and ssl.key.location (PEM files) "
    "or ssl.certificate.pem and ssl.key.pem",
    "key.serializer": "mirror copies bytes",
    "value.serializer": "mirror copies bytes",
    "key.deserializer": "mirror copies bytes",
    "value.deserializer": "mirror copies bytes",
}
