"""Consumer group operations: list groups, read and write their committed offsets, see which have
members; retried where the coordinator moved, with errors translated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription

from mirror.errors import KafkaClientError
from mirror.kafka.clients import COORDINATOR_CODES, TIMEOUT_SECONDS, partition_error, retrying
from mirror.kafka.offsets import Partition

WRITE_RETRY_SECONDS = 5.0


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str


def list_group_ids(admin: AdminClient, *, what: str) -> list[str]:
    """Every consumer group the cluster knows, sorted."""

    def ask() -> Any:
        result = admin.list_consumer_groups(request_timeout=TIMEOUT_SECONDS).result(timeout=TIMEOUT_SECONDS)
        # Each broker answers for the groups it coordinates: one that did not answer (down, still
        # loading) would leave its groups out of the list, as if they did not exist.
        if result.errors:
            raise KafkaException(result.errors[0])
        return result

    result = retrying(ask, doing=f"listing consumer groups of {what}")
    return sorted(listing.group_id for listing in result.valid or [])


def group_offsets(
    admin: AdminClient, groups: Iterable[str], *, what: str
) -> dict[str, dict[Partition, CommittedOffset]]:
    """Committed offsets per group (the API takes one group per request, so they go out together)."""
    groups = list(groups)

    def ask() -> dict[str, ConsumerGroupTopicPartitions]:
        futures = {
            group: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_SECONDS
            )[group]
            for group in groups
        }
        answers = {group: future.result(timeout=TIMEOUT_SECONDS) for group, future in futures.items()}
        for answer in answers.values():
            # A partition whose offset could not be read is not one without an offset.
            failed = next((tp for tp in answer.topic_partitions or [] if _unread(tp.error)), None)
            if failed is not None:
                raise partition_error(failed.error, failed.topic, failed.partition)
        return answers

    answers = retrying(ask, doing=f"listing consumer group offsets on {what}")
    return {
        group: {
            (tp.topic, tp.partition): CommittedOffset(tp.offset, tp.metadata or "")
            for tp in answer.topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }
        for group, answer in answers.items()
    }


def _unread(error: KafkaError | None) -> bool:
    """An error other than "no such topic" (a definite answer: nothing to list) left it unread."""
    return error is not None and error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART


def groups_with_members(admin: AdminClient, groups: Iterable[str], *, what: str) -> set[str]:
    """The groups among `groups` that have members right now (or are rebalancing)."""
    groups = list(groups)
    if not groups:
        return set()

    def ask() -> dict[str, ConsumerGroupDescription]:
        futures = admin.describe_consumer_groups(groups, request_timeout=TIMEOUT_SECONDS)
        return {group: future.result(timeout=TIMEOUT_SECONDS) for group, future in futures.items()}

    descriptions = retrying(ask, doing=f"describing consumer groups on {what}")
    idle = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}
    return {
        group
        for group, description in descriptions.items()
        if description.members or description.state not in idle
    }


def alter_group_offsets(
    admin: AdminClient, group: str, offsets: Mapping[Partition, int], *, what: str
) -> None:
    """Write `offsets` into `group`; the broker refuses (KafkaClientError) if the group has members."""
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
    )
    # Only a coordinator that moved is asked again: the caller decided these offsets while the group
    # was empty, and any other refusal (a member joined) must reach it, not be retried past.
    answer = retrying(
        lambda: admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_SECONDS)[group].result(
            timeout=TIMEOUT_SECONDS
        ),
        doing=f"writing offsets of group {group} on {what}",
        only=COORDINATOR_CODES,
        # Group after group in a round: a coordinator still loading fails the round soon, and the
        # next one tries again, rather than holding every later group's checkpoints back.
        timeout_seconds=WRITE_RETRY_SECONDS,
    )
    failed = [tp for tp in answer.topic_partitions or [] if tp.error is not None]
    if failed:
        raise KafkaClientError(
            f"writing offsets of group {group} on {what}: {failed[0].topic}-{failed[0].partition}: "
            f"{failed[0].error.str()}"
        )
