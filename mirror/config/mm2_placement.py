"""Where each MM2 property lands in the draft of an mm2.yaml: every flow's defaults or one flow's
settings, a cluster, one client role of a cluster, or the list of what is not carried over, with
the reason. Each key is read at its level (top, `<A>.`, `<A>.<role>.`, `<A>-><B>.`) as
MirrorMakerConfig reads it; Java client properties become librdkafka ones by the tables of mm2_keys.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from mirror.config.mm2_keys import (
    CONVERTED_CLIENT_PROPERTIES,
    DROPPED_CLIENT_PROPERTIES,
    FLOW_PROPERTIES,
    PLUGIN_SETTINGS,
    PROVIDER_REFERENCE,
    RENAMED_CLIENT_PROPERTIES,
    RUNTIME_ONLY,
    SAME_CLIENT_PROPERTIES,
    WORKER_STORAGE_PREFIXES,
    comma_list,
)

_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
FLOW_KEY = re.compile(r"^([^.\s>-]+(?:-[^.\s>-]+)*)->([^.\s]+?)\.(.+)$")
_ROLES = ("consumer", "producer", "admin")
_WORKER_STORAGE = (
    "a Connect worker storage setting; mirror has no config or status topics and creates its offsets "
    "topic with internal_topics_replication_factor"
)


@dataclass
class Draft:
    """The mm2.yaml taking shape as the properties are placed, and what was not carried over."""

    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    flow_defaults: dict[str, Any] = field(default_factory=dict)
    # Top-level security settings, converted: Java name -> the librdkafka entries it became.
    shared_client: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Java security settings each cluster sets itself; they win over the top-level ones.
    cluster_client_keys: dict[str, set[str]] = field(default_factory=dict)
    exactly_once_targets: set[str] = field(default_factory=set)
    # The Connect workers' offsets topic (offset.storage.topic): top level, and per target cluster
    # as (key, topic); MM2's workers of a flow keep its source positions there.
    worker_offsets_topic: str | None = None
    cluster_offsets_topics: dict[str, tuple[str, str]] = field(default_factory=dict)
    # ssl.truststore.type per key prefix ("", "A.", "A.consumer."), to read a PEM truststore as a CA file.
    truststore_types: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def place(key: str, value: str, aliases: list[str], draft: Draft) -> None:
    """Put one property where it lands in `draft`, or in `draft.dropped` with the reason."""
    if PROVIDER_REFERENCE.search(value):
        # The value is not shown: beside the reference it may hold a secret (a JAAS password).
        draft.dropped.append(
            f"{key}: the value holds a config-provider reference (${{provider:path:key}}), which mirror "
            "does not resolve; write the resolved value into mm2.yaml"
        )
        return
    if key == "config.providers" or key.startswith("config.providers."):
        draft.dropped.append(f"{key}: mirror has no config providers; write resolved values into mm2.yaml")
        return
    flow_match = FLOW_KEY.match(key)
    if flow_match and flow_match.group(1) in aliases and flow_match.group(2) in aliases:
        source, target = flow_match.group(1), flow_match.group(2)
        flow = draft.flows.setdefault(f"{source}->{target}", {})
        _flow_setting(key, flow_match.group(3), value, flow, draft, pair=(source, target))
        return
    alias, _, rest = key.partition(".")
    if "->" in alias:
        draft.dropped.append(
            f"{key}: names no flow between two of the clusters ({', '.join(aliases)}), so MM2 ignores it "
            "too; check the aliases' spelling"
        )
    elif alias in aliases and rest:
        _cluster_setting(key, alias, rest, value, draft)
    else:
        _top_level_setting(key, value, aliases, draft)


def _top_level_setting(key: str, value: str, aliases: list[str], draft: Draft) -> None:
    if key in FLOW_PROPERTIES:
        _flow_setting(key, key, value, draft.flow_defaults, draft, pair=None)
    elif key == "exactly.once.source.support":
        if value.strip() == "enabled":
            draft.exactly_once_targets.update(aliases)
    elif _unsupported(key):
        draft.dropped.append(f"{key}: {_unsupported(key)}")
    elif key == "offset.storage.topic":
        draft.worker_offsets_topic = value.strip()
    elif key.startswith(WORKER_STORAGE_PREFIXES):
        draft.dropped.append(f"{key}: {_WORKER_STORAGE}")
    elif _is_security_property(key):
        converted: dict[str, Any] = {}
        _client_property(key, key, value, converted, draft)
        draft.shared_client[key] = converted
    elif _is_client_property(key):
        draft.dropped.append(f"{key}: {_ignored_by_mm2('the top level', 'clusters.<alias>')}")
    elif key.partition(".")[0] in _ROLES and ".override." in key:
        draft.dropped.append(
            f"{key}: a Connect client override of the worker; mirror sets client properties per cluster "
            f"(clusters.<alias>.{key.partition('.')[0]})"
        )
    elif key.partition(".")[0] in _ROLES:
        draft.dropped.append(
            f"{key}: MM2 takes client role settings per cluster (<alias>.{key}) and ignores them at the top "
            f"level; mirror's equivalent is clusters.<alias>.{key.partition('.')[0]}"
        )
    else:
        draft.dropped.append(f"{key}: not an MM2 setting mirror knows; check it is needed")


def _unsupported(name: str) -> str | None:
    return RUNTIME_ONLY.get(name) or PLUGIN_SETTINGS.get(name)


def _ignored_by_mm2(level: str, cluster: str) -> str:
    return (
        f"MM2 hands its replication clients only security.protocol, ssl.* and sasl.* from {level}, so "
        f"this had no effect there; to apply it in mirror, set it under {cluster}.consumer, .producer "
        "or .admin"
    )


def _flow_setting(
    key: str, name: str, value: str, target: dict[str, Any], draft: Draft, *, pair: tuple[str, str] | None
) -> None:
    if _unsupported(name):
        draft.dropped.append(f"{key}: {_unsupported(name)}")
        return
    if name == "exactly.once.support":
        if value.strip() == "required":
            target["exactly_once"] = True
        return
    mapping = FLOW_PROPERTIES.get(name)
    if mapping is None:
        reason = _per_flow_client_setting(name, pair) if pair else None
        if reason is None:
            close = difflib.get_close_matches(name, FLOW_PROPERTIES, n=1, cutoff=0.75)
            reason = f"no mirror flow setting corresponds to {name!r}" + (
                f" (did you mean {close[0]!r}?)" if close else ""
            )
        draft.dropped.append(f"{key}: {reason}")
        return
    yaml_key, convert = mapping
    try:
        converted = convert(value)
    except ValueError as exc:
        draft.dropped.append(f"{key}: {exc}")
        return
    if yaml_key == "internal_topics_replication_factor" and target.get(yaml_key, converted) != converted:
        draft.dropped.append(
            f"{key}: mirror creates all its internal topics with one internal_topics_replication_factor, "
            f"already {target[yaml_key]} from another *.topic.replication.factor; kept that"
        )
        return
    target[yaml_key] = converted


def _per_flow_client_setting(name: str, pair: tuple[str, str]) -> str | None:
    """Why a connector-level client setting (`consumer.x`, `source.admin.x`, ...) is not carried."""
    source, target = pair
    scope, _, rest = name.partition(".")
    if scope in ("source", "target"):
        aliases = [source if scope == "source" else target]
        role, _, prop = rest.partition(".")
        section = "properties" if role == "cluster" else role
        if section not in (*_ROLES, "properties") or not prop:
            return None
    elif scope in _ROLES and rest:
        # MM2 gives connector-level consumer.* to the consumers of both clusters, and so on.
        aliases, section, prop = [source, target], scope, rest
    elif _is_client_property(name):
        return f"MM2 does not hand a flow-level {name} to its clients; set it per cluster in mirror"
    else:
        return None
    if prop == "bootstrap.servers":
        return f"set bootstrap_servers of clusters.{aliases[0]} instead"
    where = " and ".join(f"clusters.{alias}.{section}" for alias in aliases)
    return (
        f"mirror sets client properties per cluster, not per flow; put {prop} under {where} "
        "(it then applies to every flow of that cluster)"
    )


def _cluster_setting(key: str, alias: str, rest: str, value: str, draft: Draft) -> None:
    cluster = draft.clusters[alias]
    if rest == "bootstrap.servers":
        cluster["bootstrap_servers"] = value.strip()
        return
    role, _, role_key = rest.partition(".")
    if role in _ROLES and role_key:
        if role_key == "bootstrap.servers":
            if comma_list(value) != comma_list(cluster["bootstrap_servers"]):
                draft.dropped.append(
                    f"{key}: mirror's clients of {alias} all use its bootstrap_servers; if these servers are "
                    f"not brokers of the same cluster, set bootstrap_servers of clusters.{alias} to the ones "
                    "to replicate with"
                )
            return  # MM2 copies the cluster's bootstrap into each role; ours is the same one value
        _client_property(key, role_key, value, cluster.setdefault(role, {}), draft)
        return
    if rest == "exactly.once.source.support":
        if value.strip() == "enabled":
            draft.exactly_once_targets.add(alias)
        return
    if rest == "offset.storage.topic":
        draft.cluster_offsets_topics[alias] = (key, value.strip())
        return
    if _is_security_property(rest):
        draft.cluster_client_keys.setdefault(alias, set()).add(rest)
        _client_property(key, rest, value, cluster.setdefault("properties", {}), draft)
    elif rest in DROPPED_CLIENT_PROPERTIES:
        draft.dropped.append(f"{key}: {DROPPED_CLIENT_PROPERTIES[rest]}")
    elif _is_client_property(rest):
        draft.dropped.append(f"{key}: {_ignored_by_mm2('the cluster level', f'clusters.{alias}')}")
    elif rest.startswith(WORKER_STORAGE_PREFIXES):
        draft.dropped.append(f"{key}: {_WORKER_STORAGE}")
    else:
        reason = _unsupported(rest) or "a Connect worker setting with no mirror equivalent"
        draft.dropped.append(f"{key}: {reason}")


def _is_security_property(name: str) -> bool:
    """What MM2 hands its clients from the top and cluster levels (MirrorClientConfig's client settings)."""
    return name == "security.protocol" or name.startswith(("ssl.", "sasl."))


def _is_client_property(name: str) -> bool:
    return (
        name in SAME_CLIENT_PROPERTIES
        or name in RENAMED_CLIENT_PROPERTIES
        or name in CONVERTED_CLIENT_PROPERTIES
        or name in DROPPED_CLIENT_PROPERTIES
        or name.startswith(("ssl.", "sasl."))
    )


def _client_property(key: str, name: str, value: str, target: dict[str, Any], draft: Draft) -> None:
    if name == "sasl.jaas.config":
        credentials = dict(_JAAS.findall(value))
        if {"username", "password"} <= credentials.keys():
            target["sasl.username"] = credentials["username"]
            target["sasl.password"] = credentials["password"]
        else:
            draft.dropped.append(f"{key}: only PLAIN/SCRAM username and password JAAS configs convert")
        return
    prefix = key.removesuffix(name)
    if name == "ssl.truststore.location" and _truststore_type(prefix, draft) == "PEM":
        target["ssl.ca.location"] = value.strip()  # a PEM truststore is a file of CA certificates
        return
    if (name, value.strip().upper()) in {("ssl.truststore.type", "PEM"), ("ssl.keystore.type", "PKCS12")}:
        return  # the formats librdkafka reads: its ssl.ca.location and ssl.keystore.location carry them
    if name in DROPPED_CLIENT_PROPERTIES:
        draft.dropped.append(f"{key}: {DROPPED_CLIENT_PROPERTIES[name]}")
        return
    if name in CONVERTED_CLIENT_PROPERTIES:
        librdkafka_name, convert = CONVERTED_CLIENT_PROPERTIES[name]
        try:
            target[librdkafka_name] = convert(value)
        except ValueError as exc:
            draft.dropped.append(f"{key}: {exc}")
        return
    if name in SAME_CLIENT_PROPERTIES or name in RENAMED_CLIENT_PROPERTIES:
        target[RENAMED_CLIENT_PROPERTIES.get(name, name)] = value.strip()
        return
    draft.dropped.append(
        f"{key}: no librdkafka equivalent known; set it under properties by hand if it applies"
    )


def _truststore_type(prefix: str, draft: Draft) -> str:
    """The ssl.truststore.type for a location set at `prefix` ("A.consumer."): its own, else the
    cluster's, else the top level's, as MM2 hands security settings down."""
    levels = prefix.split(".")[:-1]
    for depth in range(len(levels), -1, -1):
        found = draft.truststore_types.get("".join(f"{level}." for level in levels[:depth]))
        if found is not None:
            return found
    return "JKS"  # Kafka's default
