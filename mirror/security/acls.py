"""The ACLs `mirror`'s principal needs on each cluster, derived from the configuration.

One source of truth for `mirror acls` (kafka-acls.sh commands), docs/security.md and the tests
that replicate between secured clusters with exactly these ACLs and nothing more. Topic and group
filters are regular expressions and ACLs are not: a filter that is a plain name becomes a literal
ACL, `prefix.*` a prefixed one, anything else the wildcard `*`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from mirror.config.flow_settings import FlowSettings, flow_settings
from mirror.config.models import MirrorConfig
from mirror.kafka.certificates import certificate_principal

Resource = Literal["topic", "group", "transactional-id", "cluster"]
Pattern = Literal["literal", "prefixed"]

_OWN_TOPIC = ("Create", "Write", "Read", "Describe")
_TRANSACTIONS = ("Write", "Describe")
CLUSTER = "kafka-cluster"
_REGEX_SYNTAX = re.compile(r"[*+?()\[\]{}|^$\\]")


@dataclass(frozen=True)
class RequiredAcl:
    cluster: str  # alias
    resource: Resource
    name: str
    pattern: Pattern
    operations: tuple[str, ...]  # Kafka's operation names, as kafka-acls.sh takes them
    why: str


def required_acls(config: MirrorConfig) -> list[RequiredAcl]:
    """Every ACL the enabled flows need, per cluster, in a stable order."""
    acls: list[RequiredAcl] = []
    for source, target, flow in config.flow_endpoints():
        if not flow.enabled:
            continue
        settings = flow_settings(config, source, target, flow)
        acls += _source_acls(settings, sync_acls=flow.sync_topic_acls)
        acls += _target_acls(settings, sync_acls=flow.sync_topic_acls)
    return list(dict.fromkeys(acls))


def _source_acls(s: FlowSettings, *, sync_acls: bool) -> list[RequiredAcl]:
    def acl(
        resource: Resource, name: str, ops: tuple[str, ...], why: str, pattern: Pattern = "literal"
    ) -> RequiredAcl:
        return RequiredAcl(s.source, resource, name, pattern, ops, f"flow {s.name}: {why}")

    read = ("Read", "Describe", "DescribeConfigs")
    acls = [
        acl("topic", n, read, "read the topics it copies, and their configs", p)
        for n, p in _patterns(s.topics)
    ]
    if s.emit_checkpoints:
        why = "read the committed offsets of the groups it checkpoints"
        acls += [acl("group", n, ("Describe",), why, p) for n, p in _patterns(s.groups)]
    if s.emit_checkpoints or sync_acls:
        acls.append(acl("cluster", CLUSTER, ("Describe",), "list consumer groups and read topic ACLs"))
    if s.emit_offset_syncs and s.offset_syncs_location == "source":
        why = "offset syncs (offset_syncs_topic_location: source)"
        acls.append(acl("topic", s.offset_syncs_topic(), _OWN_TOPIC, why))
    if s.reverse_heartbeats:
        pair = f"heartbeats {s.target}->{s.source}"
        heartbeats = (*_OWN_TOPIC, "DescribeConfigs")  # also a source topic the flow copies back
        acls += [
            acl("topic", s.policy().heartbeats_topic(), heartbeats, f"{pair}, which the flow copies back"),
            acl("topic", s.heartbeat_offsets_topic(s.target), _OWN_TOPIC, f"{pair}: their offsets topic"),
        ]
        if s.exactly_once:
            transactional_id = s.heartbeat_transactional_id(s.target, s.source)
            acls.append(acl("transactional-id", transactional_id, _TRANSACTIONS, f"{pair} in transactions"))
    return acls


def _target_acls(s: FlowSettings, *, sync_acls: bool) -> list[RequiredAcl]:
    def acl(
        resource: Resource, name: str, ops: tuple[str, ...], why: str, pattern: Pattern = "literal"
    ) -> RequiredAcl:
        return RequiredAcl(s.target, resource, name, pattern, ops, f"flow {s.name}: {why}")

    policy = s.policy()
    if policy.remote_topic(s.source, "x") == "x":  # identity policy: remote topics keep their names
        remote_topics = _patterns(s.topics)
        if s.heartbeats_replication:
            # ...but heartbeats topics: they are prefixed, as MM2's IdentityReplicationPolicy does.
            remote_topics.append((policy.remote_topic(s.source, policy.heartbeats_topic()), "literal"))
    else:
        remote_topics = [(policy.remote_topic(s.source, ""), "prefixed")]
    remote = ("Create", "Write", "Read", "Describe", "Alter", "AlterConfigs", "DescribeConfigs")
    why = "create, grow, configure and write the remote topics"
    acls = [acl("topic", n, remote, why, p) for n, p in remote_topics]
    own = [s.offsets_topic]
    if s.emit_offset_syncs and s.offset_syncs_location == "target":
        own.append(s.offset_syncs_topic())
    if s.emit_checkpoints:
        own += [s.checkpoints_topic(), s.checkpoint_offsets_topic()]
    if s.emit_heartbeats:
        own += [policy.heartbeats_topic(), s.heartbeat_offsets_topic(s.source)]
    acls += [
        acl("topic", name, _OWN_TOPIC, f"its internal topic {name}")
        for name in own
        if not _covered(name, remote_topics)
    ]
    mine = ("Read", "Describe")
    acls += [
        acl("group", group, mine, "its positions and instance lease")
        for group in (s.positions_group(), s.lease_group())
    ]
    if s.emit_checkpoints and s.sync_group_offsets:
        why = "sync the translated offsets of the groups it checkpoints"
        acls += [acl("group", n, mine, why, p) for n, p in _patterns(s.groups)]
    if s.exactly_once:
        why = "its transactions (one id per source partition)"
        acls.append(acl("transactional-id", f"mirror-{s.source}-{s.target}-", _TRANSACTIONS, why, "prefixed"))
    if sync_acls:
        acls.append(
            acl("cluster", CLUSTER, ("Describe", "Alter"), "list groups, create the synced topic ACLs")
        )
    else:
        acls.append(acl("cluster", CLUSTER, ("Describe",), "list groups"))
    return acls


def _patterns(regexes: Iterable[str]) -> list[tuple[str, Pattern]]:
    """Each filter as an ACL resource pattern: a name, `prefix` (for `prefix.*`), or `*`."""
    patterns: list[tuple[str, Pattern]] = []
    for regex in regexes:
        plain = regex.replace(r"\.", ".")
        if not _REGEX_SYNTAX.search(plain):
            patterns.append((plain, "literal"))
        elif plain.endswith(".*") and plain[:-2] and not _REGEX_SYNTAX.search(plain[:-2]):
            patterns.append((plain[:-2], "prefixed"))
        else:
            return [("*", "literal")]
    return list(dict.fromkeys(patterns))


def _covered(name: str, patterns: list[tuple[str, Pattern]]) -> bool:
    return any(
        (pattern == "prefixed" and name.startswith(p)) or (pattern == "literal" and p in ("*", name))
        for p, pattern in patterns
    )


_FLAGS: dict[Resource, str] = {
    "topic": "--topic",
    "group": "--group",
    "transactional-id": "--transactional-id",
    "cluster": "--cluster",
}


def principals(config: MirrorConfig) -> dict[str, str]:
    """Per cluster, the principal mirror's admin client is known by: the SASL user; under mutual TLS
    the client certificate's subject; else a placeholder the user replaces."""
    named = {}
    for alias, cluster in config.clusters.items():
        properties = cluster.client_properties("admin")
        username = properties.get("sasl.username")
        by_certificate = certificate_principal(properties)
        named[alias] = f"User:{username}" if username else by_certificate or "User:MIRROR_PRINCIPAL"
    return named


def kafka_acls_commands(
    acls: Iterable[RequiredAcl], bootstrap: dict[str, str], principal: dict[str, str]
) -> list[str]:
    """kafka-acls.sh command lines (with a `# why` comment) that grant `acls`."""
    lines = []
    for acl in acls:
        command = ["kafka-acls.sh", "--bootstrap-server", bootstrap[acl.cluster], "--add"]
        command += ["--allow-principal", principal[acl.cluster]]
        for operation in acl.operations:
            command += ["--operation", operation]
        command.append(_FLAGS[acl.resource])
        if acl.resource != "cluster":
            command.append(acl.name)
        if acl.pattern == "prefixed":
            command += ["--resource-pattern-type", "prefixed"]
        lines.append(f"{shlex.join(command)}  # {acl.why}")
    return lines
