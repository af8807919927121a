"""Convert an MM2 dedicated-mode `mm2.properties` into an equivalent `mm2.yaml`.

Resolution follows MirrorMakerConfig: top-level keys apply to every flow (connector settings)
or every cluster (client settings); `<A>.` keys configure cluster A; `<A>-><B>.` keys override
for one flow. Java client properties become librdkafka ones where an equivalent exists; the rest
is listed as not carried over, never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jproperties import Properties

from mirror.config.models import MirrorConfig
from mirror.errors import PropertiesImportError

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


def _list(value: str) -> list[str]:
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
    "topics": ("topics", _list),
    "topics.exclude": ("topics_exclude", _list),
    "groups": ("groups", _list),
    "groups.exclude": ("groups_exclude", _list),
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
    "offset-syncs.topic.replication.factor": ("internal_topics_replication_factor", int),
    "checkpoints.topic.replication.factor": ("internal_topics_replication_factor", int),
    "heartbeats.topic.replication.factor": ("internal_topics_replication_factor", int),
    "config.properties.exclude": ("config_properties_exclude", _list),
    "offsets.storage.topic": ("offsets_storage_topic", str.strip),
    "tasks.max": ("tasks_max", int),
    "use.defaults.from": ("use_defaults_from", str.strip),
}  # fmt: skip

# Where MM2's default differs from mirror's, the note a user needs to keep MM2's behaviour.
DEFAULT_DIFFERENCES: Mapping[str, str] = {
    "replication_factor": "MM2 creates remote topics with replication.factor 2; mirror uses the broker "
    "default (set replication_factor: 2 to keep MM2's)",
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
DROPPED_CLIENT_PROPERTIES: Mapping[str, str] = {
    "isolation.level": "mirror always reads the source read_committed",
    "enable.auto.commit": "mirror never auto-commits",
    "ssl.truststore.location": "librdkafka reads PEM CA files: export the truststore and set ssl.ca.location",
    "ssl.truststore.password": "librdkafka reads PEM CA files: export the truststore and set ssl.ca.location",
    "ssl.truststore.type": "librdkafka reads PEM CA files",
    "key.serializer": "mirror copies bytes",
    "value.serializer": "mirror copies bytes",
    "key.deserializer": "mirror copies bytes",
    "value.deserializer": "mirror copies bytes",
}

_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_FLOW_KEY = re.compile(r"^([^.\s>-]+(?:-[^.\s>-]+)*)->([^.\s]+?)\.(.+)$")
_ROLES = ("consumer", "producer", "admin")


@dataclass
class ImportResult:
    yaml: str
    not_carried_over: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Draft:
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    flow_defaults: dict[str, Any] = field(default_factory=dict)
    exactly_once_targets: set[str] = field(default_factory=set)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_properties(path: Path) -> dict[str, str]:
    properties = Properties()
    try:
        with path.open("rb") as handle:
            properties.load(handle, "utf-8")
    except FileNotFoundError:
        raise PropertiesImportError([f"{path}: no such file; check the path"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PropertiesImportError(
            [f"{path}: cannot be read ({exc}); make it a readable text file"]
        ) from None
    return {key: value for key, (value, _) in properties.items()}


def import_properties(path: Path) -> ImportResult:
    """The mm2.yaml equivalent of an MM2 properties file, validated before it is returned."""
    raw = read_properties(path)
    aliases = _list(raw.get("clusters", ""))
    if not aliases:
        raise PropertiesImportError(
            [f"{path}: no 'clusters' property; MM2 files list their aliases as clusters = A, B"]
        )
    draft = _Draft(clusters={alias: {} for alias in aliases})
    for key, value in raw.items():
        if key != "clusters":
            _place(key, value, aliases, draft)
    document = _document(draft)
    text = (
        "# Converted by `mirror config import` from "
        + path.name
        + "\n"
        + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    )
    try:
        MirrorConfig(**document)
    except ValueError as exc:
        raise PropertiesImportError([f"{path}: the converted configuration is not valid: {exc}"]) from None
    return ImportResult(text, draft.dropped, draft.notes)


def _place(key: str, value: str, aliases: list[str], draft: _Draft) -> None:
    flow_match = _FLOW_KEY.match(key)
    if flow_match and flow_match.group(1) in aliases and flow_match.group(2) in aliases:
        flow = f"{flow_match.group(1)}->{flow_match.group(2)}"
        _flow_setting(key, flow_match.group(3), value, draft.flows.setdefault(flow, {}), draft)
        return
    alias, _, rest = key.partition(".")
    if alias in aliases and rest:
        _cluster_setting(key, alias, rest, value, draft)
        return
    if key in FLOW_PROPERTIES:
        _flow_setting(key, key, value, draft.flow_defaults, draft)
    elif key == "exactly.once.source.support":
        if value.strip() == "enabled":
            draft.exactly_once_targets.update(aliases)
    elif key in RUNTIME_ONLY:
        draft.dropped.append(f"{key}: {RUNTIME_ONLY[key]}")
    elif _is_client_property(key):
        for cluster_alias in aliases:
            _client_property(key, key, value, draft.clusters[cluster_alias], draft)
    else:
        draft.dropped.append(f"{key}: not an MM2 setting mirror knows; check it is needed")


def _flow_setting(key: str, name: str, value: str, target: dict[str, Any], draft: _Draft) -> None:
    if name in RUNTIME_ONLY:
        draft.dropped.append(f"{key}: {RUNTIME_ONLY[name]}")
        return
    if name == "exactly.once.support":
        if value.strip() == "required":
            target["exactly_once"] = True
        return
    mapping = FLOW_PROPERTIES.get(name)
    if mapping is None:
        draft.dropped.append(f"{key}: no mirror flow setting corresponds to {name!r}")
        return
    yaml_key, convert = mapping
    try:
        target[yaml_key] = convert(value)
    except ValueError as exc:
        draft.dropped.append(f"{key}: {exc}")


def _cluster_setting(key: str, alias: str, rest: str, value: str, draft: _Draft) -> None:
    cluster = draft.clusters[alias]
    if rest == "bootstrap.servers":
        cluster["bootstrap_servers"] = value.strip()
        return
    role, _, role_key = rest.partition(".")
    if role in _ROLES and role_key:
        if role_key == "bootstrap.servers":
            return  # MM2 copies the cluster's bootstrap into each role; ours is the same one value
        _client_property(key, role_key, value, cluster.setdefault(role, {}), draft)
        return
    if rest == "exactly.once.source.support":
        if value.strip() == "enabled":
            draft.exactly_once_targets.add(alias)
        return
    if _is_client_property(rest):
        _client_property(key, rest, value, cluster.setdefault("properties", {}), draft)
        return
    reason = RUNTIME_ONLY.get(rest, "a Connect worker setting with no mirror equivalent")
    draft.dropped.append(f"{key}: {reason}")


def _is_client_property(name: str) -> bool:
    return (
        name in SAME_CLIENT_PROPERTIES
        or name in RENAMED_CLIENT_PROPERTIES
        or name in DROPPED_CLIENT_PROPERTIES
        or name.startswith(("ssl.", "sasl."))
    )


def _client_property(key: str, name: str, value: str, target: dict[str, Any], draft: _Draft) -> None:
    if name == "sasl.jaas.config":
        credentials = dict(_JAAS.findall(value))
        if {"username", "password"} <= credentials.keys():
            target["sasl.username"] = credentials["username"]
            target["sasl.password"] = credentials["password"]
        else:
            draft.dropped.append(f"{key}: only PLAIN/SCRAM username and password JAAS configs convert")
        return
    if name in DROPPED_CLIENT_PROPERTIES:
        draft.dropped.append(f"{key}: {DROPPED_CLIENT_PROPERTIES[name]}")
        return
    if name in SAME_CLIENT_PROPERTIES or name in RENAMED_CLIENT_PROPERTIES:
        target[RENAMED_CLIENT_PROPERTIES.get(name, name)] = value.strip()
        return
    draft.dropped.append(
        f"{key}: no librdkafka equivalent known; set it under properties by hand if it applies"
    )


def _document(draft: _Draft) -> dict[str, Any]:
    clusters: dict[str, Any] = {}
    for alias, cluster in draft.clusters.items():
        if "bootstrap_servers" not in cluster:
            raise PropertiesImportError(
                [f"cluster {alias}: no {alias}.bootstrap.servers in the properties file; add it"]
            )
        bootstrap = cluster.pop("bootstrap_servers")
        clusters[alias] = {"bootstrap_servers": bootstrap, **{k: v for k, v in cluster.items() if v}}
    flows: dict[str, Any] = {}
    for name, settings in draft.flows.items():
        # MM2 runs a flow only with <A>-><B>.enabled=true.
        flow = {"enabled": False, **draft.flow_defaults, **settings}
        target = name.split("->")[1]
        if target in draft.exactly_once_targets:
            flow.setdefault("exactly_once", True)
        if not flow["enabled"]:
            flows[name] = flow
            continue
        if "exactly_once" not in flow:
            draft.notes.append(
                f"{name}: MM2 ran this flow at-least-once; mirror runs it exactly-once by default "
                "(set exactly_once: false to keep at-least-once)"
            )
        if flow.get("emit_offset_syncs") is False and "sync_group_offsets" not in flow:
            # MM2's default, made explicit: mirror's (on) needs offset syncs and would be refused.
            flow["sync_group_offsets"] = False
        for yaml_key, note in DEFAULT_DIFFERENCES.items():
            if yaml_key not in flow:
                draft.notes.append(f"{name}: {note}")
        flows[name] = flow
    if not flows:
        draft.notes.append(
            "no <A>-><B>.* settings found, so no flow was written; MM2 would replicate nothing either"
        )
    return {"clusters": clusters, "flows": flows}
