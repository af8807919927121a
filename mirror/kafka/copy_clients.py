"""The clients one copy task uses, with the librdkafka settings the copy depends on."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer

from mirror.kafka.clients import consumer, producer
from mirror.kafka.transactions import init_transactions, lease_reader_properties
from mirror.replication.settings import FlowSettings

TRANSACTION_TIMEOUT_MS = "60000"


def source_reader(settings: FlowSettings, partitions: int) -> Consumer:
    """One consumer for every partition the task owns; assign()ed, never subscribed."""
    return consumer(
        {
            # Prefetch stays bounded however many partitions one task owns: librdkafka's default
            # (64 MB a partition) would let a thousand partitions buffer gigabytes in catch-up.
            "queued.max.messages.kbytes": str(max(1024, 262_144 // max(1, partitions))),
            # A fetch parked at the broker returns when records arrive, but not always when a
            # source transaction's commit makes them readable: bound that wait.
            "fetch.wait.max.ms": "100",
            **settings.source_consumer,
            "group.id": f"mirror-{settings.source}-{settings.target}-copier",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            # Records of aborted source transactions are never copied.
            "isolation.level": "read_committed",
            # Records deleted before they were copied are reported, never skipped silently.
            "auto.offset.reset": "error",
        }
    )


def positions_reader(settings: FlowSettings) -> Consumer:
    """Reads (read_committed) and, at-least-once, commits the flow's positions group."""
    return consumer(
        {
            **settings.target_consumer,
            "group.id": settings.positions_group(),
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        }
    )


def flow_mark_reader(settings: FlowSettings) -> Consumer:
    return consumer(lease_reader_properties(settings))


def remote_reader(settings: FlowSettings) -> Consumer:
    """Reads remote partitions read_committed, to tell an empty one from one holding records."""
    return consumer(
        {
            **settings.target_consumer,
            "group.id": f"mirror-{settings.source}-{settings.target}-copier",
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
            "enable.partition.eof": "true",
        }
    )


def task_writer(settings: FlowSettings, transactional_id: str | None) -> Producer:
    """The task's producer: transactional (initialised, so every older holder of the id is fenced
    and its open transaction ended) or, at-least-once, idempotent."""
    properties: dict[str, Any] = {
        "linger.ms": "5",
        **settings.target_producer,
        # Java-compatible key hashing: an offsets record lands in the partition Connect would use.
        "partitioner": "murmur2_random",
    }
    if transactional_id is None:
        properties["enable.idempotence"] = "true"
        return producer(properties)
    properties["transactional.id"] = transactional_id
    properties.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
    writer = producer(properties)
    init_transactions(writer, f"flow {settings.name}: initialising {transactional_id}")
    return writer


def sync_writer(settings: FlowSettings) -> Producer:
    """Writes OffsetSyncs into the source cluster (offset_syncs_topic_location: source)."""
    return producer({**settings.source_producer, "enable.idempotence": "true"})
