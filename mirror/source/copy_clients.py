"""The clients one copy task uses, with the librdkafka settings the copy depends on.

Plain values in (client properties, group and transactional ids), clients out: which flow they
serve is decided by its callers, mirror.source.clients and mirror.flow.ownership.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from confluent_kafka import Consumer, Producer

from mirror.kafka.aiokafka_terms import producer_options
from mirror.kafka.clients import consumer, producer
from mirror.kafka.packing_producer import CopyProducer, PackingProducer
from mirror.kafka.transactions import call, init_transactions
from mirror.source.split_reader import PARTITIONS_PER_CONSUMER

TRANSACTION_TIMEOUT_MS = "60000"


# How a task's consumers fetch. A fetch parked at the broker returns when records arrive, but not
# always when a source transaction's commit makes them readable: its wait is bounded.
#
# A task of more partitions than one consumer reads waits as long as Java consumers do (500 ms):
# its consumers' idle fetches, each naming up to 1,000 partitions, are the source broker's main load
# at that scale. Under a thin load a fetch returns as soon as any partition has a record, so each
# consumer would fetch again at once, naming all its partitions for a few records (the broker's cost
# is per partition named). librdkafka does not fetch a partition while its consumer's queue holds
# queued.min.messages (the whole consumer's queue: partitions' queues forward to it), and backs it
# off fetch.queue.backoff.ms. With a minimum of one, a partition is fetched again at most every
# 100 ms while records keep arriving; an idle consumer's queue is empty, so its fetches park at the
# broker as before. Java's consumer saves the same through incremental fetch sessions (KIP-227).
_FEW_PARTITIONS_FETCHES = {"fetch.wait.max.ms": "100"}
_MANY_PARTITIONS_FETCHES = {
    "fetch.wait.max.ms": "500",
    "queued.min.messages": "1",
    "fetch.queue.backoff.ms": "100",
}


def source_reader_config(properties: dict[str, str], group_id: str, partitions: int) -> dict[str, str]:
    """The source consumer's librdkafka configuration for a task of `partitions` partitions (the
    user's consumer properties win, except where the copy's correctness depends on the value)."""
    many = partitions > PARTITIONS_PER_CONSUMER
    return {
        # Prefetch stays bounded however many partitions one task owns: librdkafka's default
        # (64 MB a partition) would let a thousand partitions buffer gigabytes in catch-up.
        "queued.max.messages.kbytes": str(max(1024, 262_144 // max(1, partitions))),
        **(_MANY_PARTITIONS_FETCHES if many else _FEW_PARTITIONS_FETCHES),
        **properties,
        "group.id": group_id,
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        # Records of aborted source transactions are never copied.
        "isolation.level": "read_committed",
        # Records deleted before they were copied are reported, never skipped silently.
        "auto.offset.reset": "error",
    }


def source_reader(properties: dict[str, str], group_id: str, partitions: int) -> Consumer:
    """One consumer for every partition the task owns; assign()ed, never subscribed."""
    return consumer(source_reader_config(properties, group_id, partitions))


def positions_reader(properties: dict[str, str], group_id: str) -> Consumer:
    """Reads (read_committed) and, at-least-once, commits the flow's positions group."""
    return consumer(
        {
            **properties,
            "group.id": group_id,
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        }
    )


def end_asker(properties: dict[str, str], group_id: str) -> Consumer:
    """Asks the source for partitions' read_committed ends (offsets_for_times); never assigned."""
    return consumer(
        {
            **properties,
            "group.id": group_id,
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        }
    )


def remote_reader(properties: dict[str, str], group_id: str) -> Consumer:
    """Reads remote partitions read_committed, to tell an empty one from one holding records."""
    return consumer(
        {
            **properties,
            "group.id": group_id,
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
            "enable.partition.eof": "true",
            # An offset the partition no longer holds must fail the read, not jump to the end
            # (which would read as "empty").
            "auto.offset.reset": "error",
        }
    )


def task_writer_config(
    properties: dict[str, str], transactional_id: str | None, *, commit_interval_ms: int
) -> dict[str, Any]:
    """The task producer's librdkafka configuration (the user's producer properties win)."""
    config: dict[str, Any] = {
        # librdkafka sends each partition's batch in a request of its own (Java's producer puts
        # every ready partition into one), and the target broker checks each against the open
        # transaction. A transaction's records are readable only once it commits, and the commit
        # flushes first, so a transactional writer lingers for the whole interval: one request per
        # partition per transaction instead of one every 5 ms. Full batches still go at once.
        # At-least-once records are readable as soon as they land, so they linger 5 ms.
        "linger.ms": str(commit_interval_ms if transactional_id is not None else 5),
        **properties,
        # Java-compatible key hashing: an offsets record lands in the partition Connect would use.
        "partitioner": "murmur2_random",
    }
    if transactional_id is None:
        config["enable.idempotence"] = "true"
    else:
        config["transactional.id"] = transactional_id
        config.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
    return config


def task_writer(
    properties: dict[str, str],
    transactional_id: str | None,
    *,
    commit_interval_ms: int,
    doing: str,
    packing_group: str | None = None,
    topics: Collection[str] = (),
) -> CopyProducer:
    """The task's producer: transactional (initialised, so every older holder of the id is fenced
    and its open transaction ended) or, at-least-once, idempotent. With `packing_group`, aiokafka's
    (mirror.kafka.packing_producer), committing positions for that group and knowing `topics`, the
    ones it will write, from the start; else librdkafka's."""
    config = task_writer_config(properties, transactional_id, commit_interval_ms=commit_interval_ms)
    if packing_group is not None:
        options = producer_options(config, what=doing)
        # Started here, so its initialisation fails as librdkafka's init_transactions does: sorted
        # (a target away is retried, a missing ACL named), not as a bare KafkaException.
        packing: PackingProducer = call(
            lambda: PackingProducer(
                options, transactional_id, group_id=packing_group, topics=topics, doing=doing
            ),
            doing,
        )
        return packing
    writer = producer(config)
    if transactional_id is not None:
        init_transactions(writer, doing)
    return writer


def sync_writer(properties: dict[str, str]) -> Producer:
    """Writes OffsetSyncs into the source cluster (offset_syncs_topic_location: source)."""
    return producer({**properties, "enable.idempotence": "true"})
