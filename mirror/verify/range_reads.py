"""Read many partitions over offset ranges, read_committed, in batches: for comparing whole logs.

One consumer reads every range it is given; a partition leaves the assignment once it reaches the
range's end, either by a record at or past the end (records before it were markers or aborted)
or by the partition's end of log (the range ends at the last stable offset). The reader never
holds more than one fetch batch: callers digest records as they come.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from mirror.errors import KafkaClientError
from mirror.kafka.clients import consumer, translate

Partition = tuple[str, int]
BATCH = 10_000
POLL_SECONDS = 0.5
STALL_SECONDS = 120.0

# Large fetches: a comparison reads logs end to end, and its speed is the fetch size.
_BULK = {
    "fetch.max.bytes": "52428800",
    "max.partition.fetch.bytes": "4194304",
    "queued.max.messages.kbytes": "65536",
    "fetch.wait.max.ms": "100",
}


def read_ranges(
    properties: Mapping[str, str],
    ranges: Mapping[Partition, tuple[int, int]],
    *,
    what: str,
    limits: Mapping[Partition, int] | None = None,
) -> Iterator[list[Message]]:
    """Batches of the committed records of each partition in [start, end), in offset order per
    partition (partitions interleave); with `limits`, no more than that many of a partition.
    Raises KafkaClientError if a partition makes no progress for STALL_SECONDS (a hanging
    transaction, an unreachable leader)."""
    pending = {tp: bounds for tp, bounds in ranges.items() if bounds[0] < bounds[1]}
    if not pending:
        return
    reader = consumer(
        {
            **properties,
            **_BULK,
            "group.id": "mirror-verify",  # never commits; librdkafka wants a group for assign()
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "true",
            "isolation.level": "read_committed",
            # A start retention has removed must fail, not silently read from another offset.
            "auto.offset.reset": "error",
        }
    )
    try:
        reader.assign([TopicPartition(t, p, start) for (t, p), (start, _) in pending.items()])
        ends = {tp: end for tp, (_, end) in pending.items()}
        left = {tp: limits.get(tp, end - start) for tp, (start, end) in pending.items()} if limits else None
        progress = time.monotonic()
        while ends:
            batch, done = _sort(reader.consume(num_messages=BATCH, timeout=POLL_SECONDS), ends, left, what)
            if batch or done:
                progress = time.monotonic()
            if done:
                reader.incremental_unassign([TopicPartition(t, p) for t, p in done])
            if batch:
                yield batch
            elif time.monotonic() - progress > STALL_SECONDS:
                stuck = ", ".join(f"{t}-{p}" for t, p in sorted(ends)[:5])
                raise KafkaClientError(
                    f"{what}: no progress reading {stuck} for {STALL_SECONDS:g}s; a transaction may "
                    "hang there (kafka-transactions.sh find-hanging) or its leader is unreachable"
                )
    except KafkaException as exc:
        raise translate(exc, f"{what}: reading") from exc
    finally:
        reader.close()


def _sort(
    messages: list[Message], ends: dict[Partition, int], left: dict[Partition, int] | None, what: str
) -> tuple[list[Message], list[Partition]]:
    """Sorts a fetch into (records inside their ranges, partitions that reached their end or limit);
    drops the latter from `ends`."""
    batch: list[Message] = []
    done: list[Partition] = []
    for message in messages:
        error = message.error()
        tp = (message.topic(), message.partition())
        end = ends.get(tp)
        if end is None:
            continue  # fetched before the partition left the assignment
        if error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET:
            raise KafkaClientError(
                f"{what}: {tp[0]}-{tp[1]} no longer holds the offsets to read (retention removed them "
                "meanwhile); run the command again"
            )
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            raise translate(KafkaException(error), f"{what}: reading {tp[0]}-{tp[1]}")
        if message.offset() >= end:
            done.append(tp)
            del ends[tp]
        elif error is None:
            batch.append(message)
            if left is not None:
                left[tp] -= 1
                if left[tp] <= 0:
                    done.append(tp)
                    del ends[tp]
    return batch, done
