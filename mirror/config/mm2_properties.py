"""Convert an MM2 dedicated-mode `mm2.properties` into an equivalent `mm2.yaml`.

Resolution follows MirrorMakerConfig: top-level keys apply to every flow (connector settings)
or every cluster (security settings, below a cluster's own); `<A>.` keys configure cluster A and
`<A>.consumer.` (producer, admin) one client role of it; `<A>-><B>.` keys override for one flow.
Java client properties become librdkafka ones where an equivalent exists; the rest is listed as
not carried over, never dropped silently. Only what MM2 itself applies is carried: it hands its
replication clients security.protocol, ssl.* and sasl.* from the top and cluster levels and
everything else only from the role level, so the imported file replicates as MM2 did.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jproperties import Properties
from pydantic import ValidationError

from mirror.config.flow_settings import heartbeat_pairs
from mirror.config.loader import validation_problems
from mirror.config.mm2_keys import (
    CONVERTED_CLIENT_PROPERTIES,
    DEFAULT_DIFFERENCES,
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
from mirror.config.models import MirrorConfig
from mirror.errors import PropertiesImportError

_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_FLOW_KEY = re.compile(r"^([^.\s>-]+(?:-[^.\s>-]+)*)->([^.\s]+?)\.(.+)$")
_ROLES = ("consumer", "producer", "admin")
_END_OF_LINE_COMMENT = re.compile(r"\s(#.*)$")
_WORKER_STORAGE = (
    "a Connect worker storage setting; mirror has no config or status topics and creates its offsets "
    "topic with internal_topics_replication_factor"
)


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
    problems = [problem for key, value in raw.items() if (problem := _comment_in_value(path, key, value))]
    aliases = comma_list(_END_OF_LINE_COMMENT.sub("", raw.get("clusters", "")))
    if not aliases:
        problems.append(f"{path}: no 'clusters' property; MM2 files list their aliases as clusters = A, B")
    problems += [
        _missing_bootstrap(path, alias, raw) for alias in aliases if f"{alias}.bootstrap.servers" not in raw
    ]
    if problems:
        raise PropertiesImportError(problems)
    bootstraps = {alias: raw[f"{alias}.bootstrap.servers"].strip() for alias in aliases}
    draft = _Draft(
        clusters={alias: {"bootstrap_servers": bootstrap} for alias, bootstrap in bootstraps.items()},
        truststore_types={
            key.removesuffix("ssl.truststore.type"): value.strip().upper()
            for key, value in raw.items()
            if key.endswith("ssl.truststore.type")
        },
    )
    for key, value in raw.items():
        if key != "clusters":
            _place(key, value, aliases, draft)
    document = _document(draft)
    config = _validated(path, document)
    if _match_mm2_heartbeats(config, document, draft, aliases):
        config = _validated(path, document)
    text = (
        "# Converted by `mirror config import` from "
        + path.name
        + "\n"
        + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    )
    return ImportResult(text, draft.dropped, draft.notes)


def _comment_in_value(path: Path, key: str, value: str) -> str | None:
    """A problem if `value` ends in a "# ..." comment and the importer parses it (a name, list or number)."""
    flow_match = _FLOW_KEY.match(key)
    name = flow_match.group(3) if flow_match else key
    match = _END_OF_LINE_COMMENT.search(value)
    if match is None or not (
        name in FLOW_PROPERTIES or key == "clusters" or key.endswith(".bootstrap.servers")
    ):
        return None
    return (
        f"{path}: {key}: {match.group(1)!r} is part of the value, as .properties files have no "
        "end-of-line comments (MM2 reads it so too); move the comment to a line of its own"
    )


def _missing_bootstrap(path: Path, alias: str, raw: dict[str, str]) -> str:
    wanted = f"{alias}.bootstrap.servers"
    other = next((key for key in raw if key.lower() == wanted.lower()), None)
    hint = f" ({other} is another alias: aliases are case-sensitive, in MM2 too)" if other else ""
    return f"{path}: cluster {alias}: no {wanted} in the properties file; add it{hint}"


def _validated(path: Path, document: dict[str, Any]) -> MirrorConfig:
    try:
        return MirrorConfig(**document)
    except ValidationError as exc:
        problems = validation_problems(exc)
        raise PropertiesImportError(
            [f"{path}: the converted configuration is not valid: {problem}" for problem in problems]
        ) from None


def _place(key: str, value: str, aliases: list[str], draft: _Draft) -> None:
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
    flow_match = _FLOW_KEY.match(key)
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


def _top_level_setting(key: str, value: str, aliases: list[str], draft: _Draft) -> None:
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
    key: str, name: str, value: str, target: dict[str, Any], draft: _Draft, *, pair: tuple[str, str] | None
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


def _cluster_setting(key: str, alias: str, rest: str, value: str, draft: _Draft) -> None:
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


def _client_property(key: str, name: str, value: str, target: dict[str, Any], draft: _Draft) -> None:
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


def _truststore_type(prefix: str, draft: _Draft) -> str:
    """The ssl.truststore.type for a location set at `prefix` ("A.consumer."): its own, else the
    cluster's, else the top level's, as MM2 hands security settings down."""
    levels = prefix.split(".")[:-1]
    for depth in range(len(levels), -1, -1):
        found = draft.truststore_types.get("".join(f"{level}." for level in levels[:depth]))
        if found is not None:
            return found
    return "JKS"  # Kafka's default


def _cluster_document(alias: str, cluster: dict[str, Any], draft: _Draft) -> dict[str, Any]:
    bootstrap = cluster.pop("bootstrap_servers")
    # Top-level security settings apply where the cluster does not set the same Java property itself.
    properties = cluster.setdefault("properties", {})
    for java_name, entries in draft.shared_client.items():
        if java_name not in draft.cluster_client_keys.get(alias, set()):
            for name, value in entries.items():
                properties.setdefault(name, value)
    return {"bootstrap_servers": bootstrap, **{k: v for k, v in cluster.items() if v}}


def _document(draft: _Draft) -> dict[str, Any]:
    clusters = {alias: _cluster_document(alias, cluster, draft) for alias, cluster in draft.clusters.items()}
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
        # Where MM2's workers kept the positions, so mirror resumes from them: the connector's own
        # offsets.storage.topic, else the workers' (the top level's wins over the target cluster's).
        _, cluster_topic = draft.cluster_offsets_topics.get(target, ("", None))
        worker_topic = draft.worker_offsets_topic or cluster_topic
        if worker_topic is not None:
            flow.setdefault("offsets_storage_topic", worker_topic)
        if "exactly_once" not in flow:
            draft.notes.append(
                f"{name}: MM2 ran this flow at-least-once; mirror runs it exactly-once by default "
                "(set exactly_once: false to keep at-least-once)"
            )
        if flow.get("emit_offset_syncs") is False:
            _without_offset_syncs(name, flow, draft)
        for yaml_key, note in DEFAULT_DIFFERENCES.items():
            if yaml_key not in flow:
                draft.notes.append(f"{name}: {note}")
        flows[name] = flow
    if not flows:
        draft.notes.append(
            "no <A>-><B>.* settings found, so no flow was written; MM2 would replicate nothing either"
        )
    _unused_offsets_topics(flows, draft)
    return {"clusters": clusters, "flows": flows}


def _unused_offsets_topics(flows: dict[str, Any], draft: _Draft) -> None:
    targets = {name.split("->")[1] for name, flow in flows.items() if flow["enabled"]}
    for alias, (key, _) in draft.cluster_offsets_topics.items():
        if draft.worker_offsets_topic is not None:
            draft.dropped.append(f"{key}: MM2's workers take the top-level offset.storage.topic instead")
        elif alias not in targets:
            draft.dropped.append(
                f"{key}: the offsets topic of MM2's workers that write into {alias}; no enabled flow "
                f"replicates into {alias}, so no flow takes it"
            )


def _without_offset_syncs(name: str, flow: dict[str, Any], draft: _Draft) -> None:
    """Write down what MM2 runs for a flow with offset syncs off, where the file leaves it implicit."""
    if "sync_group_offsets" not in flow:
        # MM2's default, made explicit: mirror's (on) needs offset syncs and would be refused.
        flow["sync_group_offsets"] = False
    if "emit_checkpoints" not in flow:
        # MM2's checkpoints default on, so its checkpoint connector fails validation and the flow runs
        # without it (Dedicated.testClusterWithEmitOffsetDisabled). Set explicitly, both stay and the
        # file is refused: the user asked for checkpoints that cannot be made.
        flow["emit_checkpoints"] = False
        draft.notes.append(
            f"{name}: emit.offset-syncs.enabled is false, so MM2 ran this flow without its checkpoint "
            "connector (it fails validation); written emit_checkpoints: false"
        )


def _match_mm2_heartbeats(
    config: MirrorConfig, document: dict[str, Any], draft: _Draft, aliases: list[str]
) -> bool:
    """Line mirror's heartbeats up with MM2's; True if a flow was added to `document`.

    MM2 emits heartbeats X->Y into Y for every pair whose emit.heartbeats.enabled is on (the pair's,
    else the top-level one, else true), with or without a flow X->Y. mirror emits them beside an
    enabled flow: X->Y's own, or flow Y->X's `reverse_heartbeats`.
    """
    default = draft.flow_defaults.get("emit_heartbeats", True)
    mm2_pairs = {
        (source, target)
        for source in aliases
        for target in aliases
        if source != target and draft.flows.get(f"{source}->{target}", {}).get("emit_heartbeats", default)
    }
    emitted = heartbeat_pairs(config)
    added = False
    for source, target in sorted(emitted - mm2_pairs):
        # Only a reverse emission can be extra, and only when flow source->target is not written:
        # written disabled with heartbeats off, it tells the flow target->source to emit none.
        name = f"{source}->{target}"
        if name not in document["flows"]:
            document["flows"][name] = {**draft.flow_defaults, "enabled": False, "emit_heartbeats": False}
            draft.notes.append(
                f"{name}: written disabled with emit_heartbeats: false, as MM2 emits no heartbeats "
                f"{name} here; without it the flow {target}->{source} would"
            )
            added = True
    missing = sorted(mm2_pairs - emitted)  # what was added above removed only pairs MM2 does not emit
    if missing:
        pairs = ", ".join(f"{source}->{target}" for source, target in missing)
        draft.notes.append(
            f"heartbeats {pairs}: MM2 emits them (its heartbeats-only herders, one per cluster pair with "
            "heartbeats on); mirror emits heartbeats only beside an enabled flow between the two clusters, "
            "so these are not emitted"
        )
    return added
