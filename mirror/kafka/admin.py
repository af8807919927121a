"""Admin operations on topics, watermarks, consumer groups and ACLs, with errors translated."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from mirror.errors import KafkaClientError
from mirror.kafka.acl import TopicAcl
from mirror.kafka.clients import (
    COORDINATOR_CODES,
    STALE_LEADER_CODES,
    error_code,
    is_transient,
    partition_error,
    retrying,
    translate,
)

TIMEOUT_SECONDS = 30.0
# One describe's bound: a broker that does not answer costs a retry, not TIMEOUT_SECONDS.
DESCRIBE_SECONDS = 10.0
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid(0, 0) as confluent-kafka prints it


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: int


def list_topics(admin: AdminClient, *, what: str) -> dict[str, TopicDescription]:
    """Every topic of a cluster with its partition count.

    A topic the answer lists with an error (other than "no such topic") exists but cannot be
    described now: it is asked again, never left out, since callers take a missing topic for a
    deleted one.
    """

    def ask() -> dict[str, TopicDescription]:
        metadata = admin.list_topics(timeout=TIMEOUT_SECONDS)
        for topic in metadata.topics.values():
            if topic.error is not None and topic.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaException(topic.error)
        return {
            name: TopicDescription(name, len(topic.partitions))
            for name, topic in metadata.topics.items()
            if topic.error is None
        }

    return retrying(ask, doing=f"listing topics of {what}")


def topic_ids(admin: AdminClient, topics: Iterable[str], *, what: str) -> dict[str, str | None]:
    """Each topic's ID (KIP-516), which a topic deleted and created again under the same name does
    not keep (None from a cluster without IDs); a topic the cluster says does not exist is absent.
    Any other failure raises."""
    names = sorted(set(topics))
    if not names:
        return {}

    def ask() -> dict[str, str | None]:
        futures = admin.describe_topics(TopicCollection(names), request_timeout=DESCRIBE_SECONDS)
        ids: dict[str, str | None] = {}
        for name, future in futures.items():
            try:
                topic_id = str(future.result(timeout=DESCRIBE_SECONDS * 1.5).topic_id)
                # A cluster older than Kafka 2.8 gives every topic the zero ID: no ID at all.
                ids[name] = None if topic_id == ZERO_TOPIC_ID else topic_id
            except (TimeoutError, KafkaException) as exc:
                # Unanswered (a broker just restarted, or starved): retriable, asked again of
                # maybe another broker. A topic that does not exist is absent; the rest raises.
                code = KafkaError._TIMED_OUT if isinstance(exc, TimeoutError) else error_code(exc)
                if code == KafkaError._TIMED_OUT:
                    raise KafkaException(KafkaError(code, f"{name}: no answer", retriable=True)) from exc
                if code != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
        return ids

    return retrying(
        ask, doing=f"describing topics {', '.join(names[:3])} on {what}", timeout_seconds=TIMEOUT_SECONDS
    )


def non_default_configs_of(
    admin: AdminClient, topics: Iterable[str], *, what: str, with_defaults: bool = False
) -> dict[str, dict[str, str]]:
    """Configs set explicitly on each topic (what MM2 copies when it creates a remote topic), in one
    request: a hundred topics take one round trip. `what` names the cluster in errors.

    `with_defaults` adds the values the topics take from Kafka's defaults (MM2's
    use.defaults.from=source copies those too); broker-level settings are never included.
    """
    sources = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    if with_defaults:
        sources.add(ConfigSource.DEFAULT_CONFIG.value)
    resources = {topic: ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics}
    if not resources:
        return {}
    described: dict[str, dict[str, ConfigEntry]] = {}
    refused: dict[str, KafkaException] = {}
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            futures = admin.describe_configs(
                [resources[topic] for topic in resources if topic not in described]
            )
        except KafkaException as exc:
            raise translate(exc, f"describing configs of {len(resources)} topics on {what}") from exc
        refused = {}
        for topic, resource in resources.items():
            if topic in described:
                continue
            try:
                described[topic] = futures[resource].result(timeout=TIMEOUT_SECONDS)
            except KafkaException as exc:
                refused[topic] = exc
        # A topic just created is not known to every broker yet (UNKNOWN_TOPIC_OR_PART from the
        # one asked, on a cluster of several): asked again until the deadline.
        if (
            not refused
            or not all(is_transient(exc) for exc in refused.values())
            or time.monotonic() > deadline
        ):
            break
        time.sleep(0.2)
    if refused:
        # Name the topics: a DescribeConfigs ACL is granted per topic, and a few may lack it.
        names = sorted(refused)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise translate(refused[names[0]], f"describing configs of topic {shown} on {what}")
    return {
        topic: {
            name: entry.value
            for name, entry in entries.items()
            if entry.source in sources
            and not entry.is_read_only
            and not entry.is_sensitive
            and entry.value is not None
        }
        for topic, entries in described.items()
    }


def alter_topic_configs(
    admin: AdminClient, topic: str, set_configs: Mapping[str, str], delete: Iterable[str]
) -> None:
    """Incrementally SET and DELETE topic configs (IncrementalAlterConfigs, as MM2 4.0 does)."""
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in set_configs.items()
    ]
    entries += [ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) for name in delete]
    if not entries:
        return
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        raise translate(exc, f"altering configs of topic {topic}") from exc


def create_topic(
    admin: AdminClient,
    name: str,
    *,
    partitions: int,
    replication_factor: int | None,
    config: Mapping[str, str],
) -> bool:
    """Create `name`; False if it already existed (another instance, or MM2, made it first)."""
    return bool(
        create_topics(admin, [(name, partitions, dict(config))], replication_factor=replication_factor)
    )


def create_topics(
    admin: AdminClient,
    topics: Iterable[tuple[str, int, dict[str, str]]],
    *,
    replication_factor: int | None,
) -> list[str]:
    """Create (name, partitions, config) topics in one request; returns those this call created
    (one that existed already was made by another instance, or MM2, first)."""
    new_topics = [NewTopic(name, n, replication_factor or -1, config=config) for name, n, config in topics]
    if not new_topics:
        return []
    futures = admin.create_topics(new_topics, operation_timeout=TIMEOUT_SECONDS)
    created = []
    for name, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_SECONDS)
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            if code == KafkaError.UNSUPPORTED_VERSION:
                raise KafkaClientError(
                    f"creating topic {name}: the cluster does not create topics through the admin API "
                    "(UNSUPPORTED_VERSION); create the topic beforehand with kafka-topics.sh"
                ) from exc
            raise translate(exc, f"creating topic {name}") from exc
        except TimeoutError as exc:  # the future's own timeout; librdkafka's comes as a KafkaException
            raise KafkaClientError(
                f"creating topic {name}: no answer within {TIMEOUT_SECONDS:.0f} s; "
                "check that the cluster's controller is up, then run again"
            ) from exc
        created.append(name)
    return created


def add_partitions(admin: AdminClient, name: str, total: int) -> None:
    try:
        admin.create_partitions([NewPartitions(name, total)])[name].result(timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.INVALID_PARTITIONS:
            return  # already at least `total`: someone else added them
        raise translate(exc, f"adding partitions to {name}") from exc


Partition = tuple[str, int]  # (topic, partition): callers outside mirror/kafka never see TopicPartition


def _list_offsets(
    admin: AdminClient,
    partitions: Iterable[Partition],
    spec: OffsetSpec,
    isolation: IsolationLevel = IsolationLevel.READ_COMMITTED,
) -> dict[Partition, int]:
    request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
    if not request:
        return {}

    def ask() -> dict[Partition, int]:
        futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=TIMEOUT_SECONDS)
        try:
            offsets = {
                (tp.topic, tp.partition): future.result(timeout=TIMEOUT_SECONDS).offset
                for tp, future in futures.items()
            }
            # When a whole request to one leader fails (the broker just died), librdkafka answers
            # its partitions with no offset (-1001) instead of an error: no answer, never "0".
            unanswered = sorted(tp for tp, offset in offsets.items() if offset < 0)
            if unanswered:
                topic, partition = unanswered[0]
                raise KafkaException(
                    KafkaError(
                        KafkaError.LEADER_NOT_AVAILABLE, f"{topic}-{partition}'s leader gave no offset"
                    )
                )
            return offsets
        except KafkaException as exc:
            if error_code(exc) in STALE_LEADER_CODES | {KafkaError.LEADER_NOT_AVAILABLE}:
                # After a broker restart librdkafka (2.16) keeps sending the leader epoch it cached
                # before, and ListOffsets does not refresh it: the broker refuses until the client
                # asks for the topics' metadata again (else only the 5-minute refresh mends it).
                # The same for a leader that died: the cached one is asked until metadata is.
                with contextlib.suppress(KafkaException):  # the original error is the one to report
                    for topic in {tp.topic for tp in request}:
                        admin.list_topics(topic=topic, timeout=TIMEOUT_SECONDS)
            raise

    # Partitions just created or moving have no leader for a moment (NOT_LEADER_FOR_PARTITION).
    return retrying(ask, doing="listing partition offsets")


def last_stable_offsets(admin: AdminClient, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """The read_committed end of each partition: everything below it is decided (committed or aborted)."""
    return _list_offsets(admin, partitions, OffsetSpec.latest())


def high_watermarks(admin: AdminClient, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """The end of each partition, open transactions' records included: it moves whenever anyone writes."""
    return _list_offsets(admin, partitions, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)


def earliest_offsets(admin: AdminClient, partitions: Iterable[Partition]) -> dict[Partition, int]:
    return _list_offsets(admin, partitions, OffsetSpec.earliest())


def committed_positions(consumer: Consumer, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """The group's committed offsets; partitions without one are absent.

    The consumer must be read_committed: then the broker answers only once no transactional
    commit of these offsets is pending (KIP-447 require_stable).
    """
    return {
        partition: offset for partition, (offset, _) in committed_with_metadata(consumer, partitions).items()
    }


def committed_with_metadata(
    consumer: Consumer, partitions: Iterable[Partition]
) -> dict[Partition, tuple[int, str]]:
    """committed_positions, with each offset's metadata string ("" if none)."""
    request = [TopicPartition(topic, partition) for topic, partition in partitions]
    if not request:
        return {}

    def ask() -> list[TopicPartition]:
        result = consumer.committed(request, timeout=TIMEOUT_SECONDS)
        # Per-partition errors come back inside the answer, not raised: a partition whose offset
        # could not be read has an unknown position, not none (asked again, then raised).
        failed = next((tp for tp in result if tp.error is not None), None)
        if failed is not None:
            raise partition_error(failed.error, failed.topic, failed.partition)
        if len(result) != len(request):
            raise KafkaException(KafkaError(KafkaError._PARTIAL, "not every partition's offset came back"))
        return list(result)

    result = retrying(ask, doing="reading committed positions")
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in result if tp.offset >= 0}


def commit_positions(consumer: Consumer, positions: Mapping[Partition, int]) -> None:
    offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in positions.items()]
    if not offsets:
        return
    retrying(
        lambda: consumer.commit(offsets=offsets, asynchronous=False),
        doing="committing positions",
        only=COORDINATOR_CODES,
    )


def describe_topic_acls(admin: AdminClient) -> list[TopicAcl] | None:
    """Every LITERAL topic ACL of a cluster; None if the cluster has no authorizer."""
    match_all = AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    try:
        bindings = admin.describe_acls(match_all, request_timeout=TIMEOUT_SECONDS).result(
            timeout=TIMEOUT_SECONDS
        )
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.SECURITY_DISABLED:
            return None
        raise translate(exc, "describing topic ACLs") from exc
    return [
        TopicAcl(b.name, b.principal, b.host, b.operation.name, b.permission_type.name)
        for b in bindings
        if b.resource_pattern_type == ResourcePatternType.LITERAL
    ]


def create_topic_acls(admin: AdminClient, acls: Iterable[TopicAcl]) -> None:
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            acl.topic,
            ResourcePatternType.LITERAL,
            acl.principal,
            acl.host,
            AclOperation[acl.operation],
            AclPermissionType[acl.permission],
        )
        for acl in acls
    ]
    if not bindings:
        return
    try:
        for future in admin.create_acls(bindings, request_timeout=TIMEOUT_SECONDS).values():
            future.result(timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        raise translate(exc, "creating topic ACLs") from exc
