"""Read a Connect offsets topic to its end, the KIP-618 way, keeping the latest value per key.

KIP-618: take the end offsets with a read_uncommitted view (the high watermark, which includes
open transactions), then consume read_committed until every partition's position reaches them.
Reaching the high watermark read_committed means every transaction open at the start has
finished, so no committed offset written before the read began can be missed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from mirror.errors import KafkaClientError
from mirror.kafka.clients import consumer, retrying, translate


def read_to_end(
    properties: Mapping[str, str], topic: str, *, timeout_seconds: float = 60.0
) -> dict[bytes, bytes]:
    """{key: latest value} of `topic`; a tombstone removes its key. Records with a null key are skipped,
    as Connect's KafkaOffsetBackingStore does."""
    base = {**properties, "group.id": "mirror-offsets-reader", "enable.auto.commit": "false"}
    # librdkafka asks for end offsets at the consumer's isolation level, so the high watermark
    # needs a read_uncommitted consumer of its own.
    end_reader = consumer({**base, "isolation.level": "read_uncommitted"})
    try:
        partitions = _partitions(end_reader, topic, timeout_seconds)
        end_offsets = _high_watermarks(end_reader, partitions, timeout_seconds)
    finally:
        end_reader.close()
    reader = consumer(
        {
            **base,
            "isolation.level": "read_committed",
            "enable.partition.eof": "true",
            # An offset gone under the reader must fail the read: skipping to the end would leave
            # positions out, and a partition without one counts as never copied.
            "auto.offset.reset": "error",
        }
    )
    try:
        pending = {tp.partition: end for tp, end in end_offsets.items() if end > 0}
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        latest: dict[bytes, bytes] = {}
        deadline = time.monotonic() + timeout_seconds
        while pending:
            if time.monotonic() > deadline:
                raise KafkaClientError(
                    f"offsets topic {topic}: could not read to the end within {timeout_seconds:g}s "
                    f"(partitions still behind: {sorted(pending)}); a transaction may be hanging on the "
                    "cluster, check it with kafka-transactions.sh"
                )
            message = reader.poll(0.5)
            error = message.error() if message is not None else None
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise translate(KafkaException(error), f"reading offsets topic {topic}")
            if message is not None and error is None and (key := message.key()) is not None:
                value = message.value()
                if value is None:
                    latest.pop(key, None)
                else:
                    latest[key] = value
            _drop_finished(reader, topic, pending)
        return latest
    finally:
        reader.close()


def _partitions(reader: Consumer, topic: str, timeout_seconds: float) -> list[TopicPartition]:
    def ask() -> Any:
        described = reader.list_topics(topic, timeout=timeout_seconds).topics.get(topic)
        if described is not None and described.error is not None:
            # Not found is an answer; any other error (a leader moving) is asked again.
            if described.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaException(described.error)
            return None
        return described

    described = retrying(ask, doing=f"listing offsets topic {topic}", timeout_seconds=timeout_seconds)
    if described is None:
        raise KafkaClientError(
            f"offsets topic {topic}: not found; create it or check the flow's offsets topic"
        )
    return [TopicPartition(topic, p) for p in sorted(described.partitions)]


def _high_watermarks(
    reader: Consumer, partitions: list[TopicPartition], timeout_seconds: float
) -> dict[TopicPartition, int]:
    def high(tp: TopicPartition) -> int:
        return int(reader.get_watermark_offsets(tp, timeout=timeout_seconds)[1])

    return {
        tp: retrying(
            functools.partial(high, tp),
            doing=f"reading end offsets of {tp.topic}",
            timeout_seconds=timeout_seconds,
        )
        for tp in partitions
    }


def _drop_finished(reader: Consumer, topic: str, pending: dict[int, int]) -> None:
    positions = reader.position([TopicPartition(topic, p) for p in pending])
    for tp in positions:
        if tp.offset >= 0 and tp.offset >= pending[tp.partition]:
            del pending[tp.partition]
