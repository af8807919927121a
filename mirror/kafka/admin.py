"""Admin operations on topics and their ACLs, with errors translated (offsets: mirror.kafka.offsets)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, TopicCollection
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
    ResourcePatternType,
    ResourceType,
)

from mirror.errors import KafkaClientError
from mirror.kafka.acl import TopicAcl
from mirror.kafka.clients import TIMEOUT_SECONDS, error_code, is_transient, retrying, translate

# One describe's bound: a broker that does not answer costs a retry, not TIMEOUT_SECONDS.
DESCRIBE_SECONDS = 10.0
# How long fresh metadata may take before a controller-bound request is asked again (refresh_controller).
METADATA_SECONDS = 5.0
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid(0, 0) as confluent-kafka prints it


_NO_ANSWER_CODES = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT}


def refresh_controller(admin: AdminClient) -> None:
    """Fresh metadata, before asking again what the controller left unanswered.

    librdkafka sends CreateTopics, DescribeTopics and the other controller-bound requests to the
    broker its last metadata named controller (under KRaft, any live broker) and waits for that
    broker; an admin client that has not asked for metadata since keeps naming a broker killed a
    moment ago. By hand on `mirror local up --brokers 3`, a create held that way timed out 4 times in
    5; in a broker-loss drill a copy task's DescribeTopics did so for as long as the broker was down
    (no copy for 60 s). Any metadata answer names a live controller.
    """
    with contextlib.suppress(KafkaException):
        admin.list_topics(timeout=METADATA_SECONDS)


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
                # Unanswered (a broker just restarted, or starved, or killed while librdkafka's
                # metadata still names it controller): retriable, asked again of the controller that
                # fresh metadata names. A topic that does not exist is absent; the rest raises.
                code = KafkaError._TIMED_OUT if isinstance(exc, TimeoutError) else error_code(exc)
                if code in _NO_ANSWER_CODES:
                    refresh_controller(admin)
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


# A KRaft controller refuses a request that would write more than 10,000 metadata records ("Unable
# to perform excessively large batch operation"): one per topic, per partition and per config entry.
# MM2 sends all its new topics in one request and, refused, asks again every 10 minutes; mirror
# sends them in batches of at most half that.
RECORDS_PER_CREATE = 5000


def create_batches(
    topics: Iterable[tuple[str, int, dict[str, str]]], limit: int = RECORDS_PER_CREATE
) -> list[list[tuple[str, int, dict[str, str]]]]:
    """(name, partitions, config) topics in order, in batches of at most `limit` metadata records
    (a topic larger than that on its own goes alone)."""
    batches: list[list[tuple[str, int, dict[str, str]]]] = []
    records = 0
    for topic in topics:
        size = 1 + topic[1] + len(topic[2])
        if not batches or records + size > limit:
            batches.append([])
            records = 0
        batches[-1].append(topic)
        records += size
    return batches


# A create goes unanswered after CREATE_TRY_SECONDS, and the next try asks the controller fresh
# metadata names (refresh_controller). Short tries: a topic that a slow try did create answers
# TOPIC_ALREADY_EXISTS next.
CREATE_TRY_SECONDS = 5.0
CREATE_TRIES = 6


def create_topics(
    admin: AdminClient,
    topics: Iterable[tuple[str, int, dict[str, str]]],
    *,
    replication_factor: int | None,
) -> list[str]:
    """Create (name, partitions, config) topics, in as few requests as the controller accepts;
    returns those this call created (one that existed already was made by another instance, or
    MM2, first)."""
    created = []
    for batch in create_batches(topics):
        pending = {name: (n, config) for name, n, config in batch}
        for attempt in range(1, CREATE_TRIES + 1):
            if attempt > 1:
                refresh_controller(admin)
            new_topics = [
                NewTopic(name, n, replication_factor or -1, config=config)
                for name, (n, config) in pending.items()
            ]
            futures = admin.create_topics(
                new_topics, operation_timeout=CREATE_TRY_SECONDS, request_timeout=CREATE_TRY_SECONDS
            )
            last = attempt == CREATE_TRIES
            outcomes = {name: _created(name, future, last_try=last) for name, future in futures.items()}
            created += [name for name, outcome in outcomes.items() if outcome is True]
            pending = {name: pending[name] for name, outcome in outcomes.items() if outcome is None}
            if not pending:
                break
    return created


def _created(name: str, future: Future[None], *, last_try: bool) -> bool | None:
    """True if created, False if it existed already, None if unanswered (and not the last try)."""
    try:
        # librdkafka's own timeout ends the future first; this bound is for a future it never ends.
        future.result(timeout=CREATE_TRY_SECONDS * 1.5)
    except TimeoutError as exc:
        _give_up_if_last(name, exc, last_try=last_try)
        return None
    except KafkaException as exc:
        code = exc.args[0].code()
        if code == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        if code == KafkaError.UNSUPPORTED_VERSION:
            raise KafkaClientError(
                f"creating topic {name}: the cluster does not create topics through the admin API "
                "(UNSUPPORTED_VERSION); create the topic beforehand with kafka-topics.sh"
            ) from exc
        if code in _NO_ANSWER_CODES:
            _give_up_if_last(name, exc, last_try=last_try)
            return None
        if is_transient(exc) and not last_try:
            return None
        raise translate(exc, f"creating topic {name}") from exc
    return True


def _give_up_if_last(name: str, exc: Exception, *, last_try: bool) -> None:
    if not last_try:
        return
    raise KafkaClientError(
        f"creating topic {name}: no answer in {CREATE_TRIES} tries of {CREATE_TRY_SECONDS:.0f} s; "
        "check that the cluster's controller is up, then run again"
    ) from exc


def add_partitions(admin: AdminClient, name: str, total: int) -> None:
    try:
        admin.create_partitions([NewPartitions(name, total)])[name].result(timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.INVALID_PARTITIONS:
            return  # already at least `total`: someone else added them
        raise translate(exc, f"adding partitions to {name}") from exc


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
