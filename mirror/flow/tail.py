"""Follow a partition of a compacted internal topic (or one of each of several topics), read_committed,
catching up on demand.

The checkpoint and heartbeat components keep their state in Kafka topics (offset syncs,
checkpoints, heartbeats) and re-read what is new before each decision. catch_up() takes the high
watermark first and reads read_committed until its position passes it: then every transaction
that was open when it was called has ended, so nothing committed before the call is missed
(the KIP-618 read-to-end rule, see offsets_store).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from mirror.errors import KafkaClientError
from mirror.kafka.clients import consumer, retrying, translate

POLL_SECONDS = 0.2
# newest_timestamp reads this many offsets back from each partition's end: the last records and the
# transaction markers after them (one per transaction, and a commit rarely holds a single record).
TAIL_RECORDS = 20


@dataclass(frozen=True, slots=True)
class TailRecord:
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    offset: int


class PartitionTail:
    """A long-lived reader of `topic`-`partition`; not thread-safe, one per worker and topic."""

    def __init__(self, properties: Mapping[str, str], topic: str, partition: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self._ends, self._reader = _tail_consumers(properties)
        self._reader.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])

    def catch_up(self, *, timeout_seconds: float = 60.0) -> list[TailRecord]:
        """Every committed record written since the last call (or since the start)."""
        tp = TopicPartition(self.topic, self.partition)
        try:
            low, end = self._ends.get_watermark_offsets(tp, timeout=timeout_seconds, cached=False)
        except KafkaException as exc:
            raise translate(exc, f"reading the end of {self.topic}") from exc
        records: list[TailRecord] = []
        if end <= low:
            return records  # empty (or compacted to nothing)
        deadline = time.monotonic() + timeout_seconds
        while self._position() < end:
            if time.monotonic() > deadline:
                raise KafkaClientError(
                    f"{self.topic}: could not read to offset {end} within {timeout_seconds:g}s; "
                    "a transaction may be hanging on the cluster, check it with kafka-transactions.sh"
                )
            records += [_tail_record(message) for message in _polled(self._reader)]
        return records

    def _position(self) -> int:
        (position,) = self._reader.position([TopicPartition(self.topic, self.partition)])
        return int(position.offset) if position.offset >= 0 else -1

    def close(self) -> None:
        self._ends.close()
        self._reader.close()


class TopicTails:
    """Partition 0 of each of a growing set of topics (heartbeats topics have one), read_committed,
    through one pair of consumers however many topics it follows: a reader per topic cost a
    target with many remote heartbeats topics two consumers and two fetches a second each, and
    their first catch-ups in turn held a heartbeat round (and a `mirror run` stopping) for 15 s and
    more (CI, 2026-12-02). Not thread-safe, one per worker and flow."""

    def __init__(self, properties: Mapping[str, str]) -> None:
        self._ends, self._reader = _tail_consumers(properties)
        self.topics: list[str] = []

    def follow(self, topic: str) -> None:
        """Read `topic` from its start at the next catch-up; a topic already followed is left as is."""
        if topic not in self.topics:
            self._reader.incremental_assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            self.topics.append(topic)

    def catch_up(self, *, timeout_seconds: float) -> tuple[dict[str, list[TailRecord]], list[str]]:
        """Every committed record written since the last call, per topic, and the topics not read
        to the ends they had at the call within `timeout_seconds` (a transaction hanging, or a slow
        cluster): what was read of them is returned, and the next call goes on from there."""
        ends: dict[str, int] = {}
        for topic in self.topics:
            try:
                low, end = self._ends.get_watermark_offsets(
                    TopicPartition(topic, 0), timeout=timeout_seconds, cached=False
                )
            except KafkaException as exc:
                raise translate(exc, f"reading the end of {topic}") from exc
            if end > low:
                ends[topic] = end
        records: dict[str, list[TailRecord]] = {}
        deadline = time.monotonic() + timeout_seconds
        behind = self._behind(ends)
        while behind and time.monotonic() < deadline:
            for message in _polled(self._reader):
                records.setdefault(str(message.topic()), []).append(_tail_record(message))
            behind = self._behind(ends)
        return records, behind

    def _behind(self, ends: Mapping[str, int]) -> list[str]:
        if not ends:
            return []
        positions = self._reader.position([TopicPartition(topic, 0) for topic in ends])
        return [tp.topic for tp in positions if tp.offset < ends[tp.topic]]

    def close(self) -> None:
        self._ends.close()
        self._reader.close()


def _tail_consumers(properties: Mapping[str, str]) -> tuple[Consumer, Consumer]:
    """A tail's end reader and record reader."""
    base = {
        **properties,
        "group.id": "mirror-tail",  # never commits; librdkafka wants a group for assign()
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        # Java's default, as MM2's consumers have: a tail stays assigned between rounds, and
        # at 50 ms an idle one fetched 20 times a second (catch_up reads to an end it knows).
        "fetch.wait.max.ms": "500",
    }
    # librdkafka asks for end offsets at the consumer's isolation level; the high watermark
    # (open transactions included) needs a read_uncommitted consumer.
    return (
        consumer({**base, "isolation.level": "read_uncommitted"}),
        consumer({**base, "isolation.level": "read_committed"}),
    )


def _polled(reader: Consumer) -> list[Message]:
    """One poll's records; an error other than a partition's end raises."""
    messages = []
    for message in reader.consume(num_messages=5000, timeout=POLL_SECONDS):
        error = message.error()
        if error is None:
            messages.append(message)
        elif error.code() != KafkaError._PARTITION_EOF:
            raise translate(KafkaException(error), f"reading {message.topic()}")
    return messages


def _tail_record(message: Message) -> TailRecord:
    _, timestamp = message.timestamp()
    return TailRecord(message.key(), message.value(), timestamp, message.offset())


def newest_timestamp(
    properties: Mapping[str, str], topic: str, *, timeout_seconds: float = 10.0
) -> float | None:
    """The newest committed record's timestamp (epoch seconds) over every partition of `topic`,
    reading only the last few records of each; None if it holds none. For topics written with the
    writer's clock (an offsets topic), that is when it was last written. A topic that cannot be
    read now (just created, a leader moving) is asked again, then raises: never "never written"."""
    reader = consumer({**properties, "group.id": "mirror-tail", "enable.auto.commit": "false",
                       "isolation.level": "read_committed"})  # fmt: skip
    try:
        return retrying(
            lambda: _newest_timestamp(reader, topic, timeout_seconds),
            doing=f"reading the newest records of {topic}",
        )
    finally:
        reader.close()


def _newest_timestamp(reader: Consumer, topic: str, timeout_seconds: float) -> float | None:
    metadata = reader.list_topics(topic, timeout=timeout_seconds).topics.get(topic)
    if metadata is not None and metadata.error is not None:
        if metadata.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise KafkaException(metadata.error)
        return None
    if metadata is None:
        return None
    starts, ends = [], {}
    for partition in metadata.partitions:
        low, high = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_seconds)
        if high > low:
            starts.append(TopicPartition(topic, partition, max(low, high - TAIL_RECORDS)))
            ends[partition] = high
    if not starts:
        return None
    reader.assign(starts)
    newest = 0
    deadline = time.monotonic() + timeout_seconds
    # A read_committed reader's end is the last stable offset: reads stop there, past markers.
    while time.monotonic() < deadline:
        for message in reader.consume(num_messages=1000, timeout=POLL_SECONDS):
            if message.error() is None:
                newest = max(newest, message.timestamp()[1])
        if all(tp.offset >= ends[tp.partition] for tp in reader.position(starts)):
            return newest / 1000 if newest else None
    # A partition not read to its end may hold the newest record: no answer, not an old one.
    raise KafkaClientError(
        f"reading the newest records of {topic}: not read to its end in {timeout_seconds:g}s"
    )
