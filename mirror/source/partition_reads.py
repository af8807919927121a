"""Single-partition reads a copy task needs now and then: watermarks, emptiness, a seek."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.kafka.offsets import high_watermarks
from mirror.kafka.transactions import RetriableError, call, classify

STALL_SECONDS = 60.0


def watermarks(reader: Consumer, topic: str, partition: int, *, doing: str) -> tuple[int, int]:
    """(low, high) of the partition, asked of the broker; high is the LSO for a read_committed reader."""
    low, high = call(
        lambda: reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False),
        doing,
    )
    return int(low), int(high)


def holds_no_committed_record(
    reader: Consumer, admin: AdminClient, topic: str, partition: int, *, where: str
) -> bool:
    """True only if the partition definitely has no committed record (aborted ones and markers do
    not count); RetriableError while that cannot be told yet.

    `reader` must be read_committed with enable.partition.eof. A transaction not decided yet (its
    markers wait for a new leader after a broker was lost) holds the read_committed end back at its
    first record, so that end alone would make a partition full of records look empty: the log's
    end, undecided records included, must agree with it first.
    """
    low, stable = watermarks(reader, topic, partition, doing=f"{where}: reading {topic}'s watermarks")
    end = high_watermarks(admin, [(topic, partition)])[(topic, partition)]
    if end > stable:
        raise RetriableError(
            f"{where}: {topic}-{partition} holds a transaction not decided yet (offsets {stable}..{end}); "
            "waiting for its markers"
        )
    if end <= low:
        return True
    reader.assign([TopicPartition(topic, partition, low)])
    deadline = time.monotonic() + STALL_SECONDS
    try:
        while time.monotonic() < deadline:
            for message in reader.consume(num_messages=1, timeout=0.05):
                error = message.error()
                if error is None:
                    return False
                if error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= stable:
                        return True
                    # A new leader's end lags for a moment after an election: not the end.
                    continue
                raise classify(KafkaException(error), f"{where}: reading {topic}")
    finally:
        reader.unassign()
    raise RetriableError(f"{where}: could not read {topic} to its end in {STALL_SECONDS:g}s")


def seek(source: Consumer, topic: str, partition: int, offset: int, leader_epoch: int = -1) -> None:
    """Move an assigned partition of `source` to `offset`. With the `leader_epoch` of the record
    before it, librdkafka first checks that the leader's log still holds that record (KIP-320)."""
    target = (
        TopicPartition(topic, partition, offset, leader_epoch=leader_epoch)
        if leader_epoch >= 0
        else TopicPartition(topic, partition, offset)
    )
    try:
        source.seek(target)
    except KafkaException:
        # A partition in an error state may refuse a seek; assigning it afresh always works.
        source.incremental_unassign([TopicPartition(topic, partition)])
        source.incremental_assign([target])
