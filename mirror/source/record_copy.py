"""The copy loop's hot path: consumed source messages, produced to their remote partitions.

Every record keeps its partition number, key, value, headers and timestamp. Each partition's
bookkeeping (upstream offsets, delivery reports, bytes) lives in a `CopySink` the caller owns;
this module only moves records and names the errors librdkafka raises on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from mirror.errors import RecordTooLargeError
from mirror.kafka.transactions import call, classify

TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}
OUT_OF_RANGE_CODES = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}
# Consume errors about one partition that librdkafka recovers from by itself.
_PASSING_CODES = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
}


class CopySink(Protocol):
    """One source partition's side of the copy: where its records go and what it remembers."""

    topic: str  # the source topic
    remote_topic: str
    partition: int
    producer: int  # which of the task's producers writes it
    upstream: list[int]  # source offsets produced in the open transaction, in order
    bytes: int
    oldest_ms: int  # smallest record timestamp in the open transaction; 0 if none

    def on_delivery(self, error: KafkaError | None, message: Message) -> None: ...

    def where(self) -> str: ...


class SourceReads(Protocol):
    """What the copy loop reads from: a Consumer, or a task's SplitReader of several."""

    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...

    def poll(self, timeout: float) -> Message | None: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...


class ConsumeError(Exception):
    """A consumed message carried an error for one partition."""

    def __init__(self, topic: str, partition: int, error: KafkaError) -> None:
        super().__init__(f"{topic}-{partition}: {error.str()}")
        self.topic, self.partition, self.error = topic, partition, error

    @property
    def out_of_range(self) -> bool:
        return self.error.code() in OUT_OF_RANGE_CODES

    @property
    def retriable(self) -> bool:
        return bool(self.error.retriable()) or self.error.code() in _PASSING_CODES

    def classified(self) -> Exception:
        return classify(KafkaException(self.error), f"{self.topic}-{self.partition}: consuming")


def copy_messages(
    messages: Sequence[Message], producers: Sequence[Producer], sinks: Mapping[tuple[str, int], CopySink]
) -> tuple[list[ConsumeError], int]:
    """Produce every record of `messages` to its partition's sink, through the sink's producer
    (`producers[sink.producer]`); returns the consume errors met and the key and value bytes
    produced.

    The profile's largest cost: bound methods and the current sink live in locals, and a sink is
    looked up only when the partition changes (a fetch returns runs of one partition).
    """
    errors: list[ConsumeError] = []
    producer = producers[0]
    produce = producer.produce
    current: tuple[str, int] | None = None
    sink: Any = None
    keep: Callable[[int], None] | None = None
    delivered: Any = None
    remote = ""
    partition = -1
    size = total = 0
    oldest = 0
    for message in messages:
        error = message.error()
        if error is not None:
            errors.append(ConsumeError(message.topic(), message.partition(), error))
            continue
        key_of = (message.topic(), message.partition())
        if key_of != current:
            if sink is not None:
                total += size
                sink.bytes += size
                sink.oldest_ms = oldest
            current, sink = key_of, sinks[key_of]
            producer = producers[sink.producer]
            produce = producer.produce
            keep, delivered = sink.upstream.append, sink.on_delivery
            remote, partition = sink.remote_topic, sink.partition
            size, oldest = 0, sink.oldest_ms
        key, value = message.key(), message.value()
        timestamp_type, timestamp = message.timestamp()
        # CreateTime or LogAppendTime, the source's value is kept; 0 would mean "now".
        if not timestamp_type:
            timestamp = 0
        elif oldest == 0 or timestamp < oldest:
            oldest = timestamp
        headers = message.headers()
        try:
            produce(
                remote, value, key, partition, timestamp=timestamp, headers=headers, on_delivery=delivered
            )
        except (BufferError, KafkaException) as exc:
            _produce_after(exc, producer, sink, (key, value, timestamp, headers), offset=message.offset())
        keep(message.offset())  # type: ignore[misc]
        size += (len(value) if value else 0) + (len(key) if key else 0)
    if sink is not None:
        total += size
        sink.bytes += size
        sink.oldest_ms = oldest
    return errors, total


def next_messages(source: SourceReads, most: int, wait_seconds: float) -> list[Message]:
    """Up to `most` messages: what is there now, else the first to arrive within `wait_seconds`.

    consume(n, timeout) waits until it has n messages or the timeout passed; at a low rate that
    wait is pure latency. poll() returns the moment one message is there, and consume(n, 0) then
    takes whatever else the fetch brought.
    """
    messages: list[Message] = source.consume(most, 0)
    if messages or wait_seconds <= 0:
        return messages
    first = source.poll(wait_seconds)
    if first is None:
        return []
    return [first, *source.consume(most - 1, 0)]


def consumer_positions(source: SourceReads, sinks: Sequence[CopySink]) -> list[tuple[int, int]]:
    """The consumer's position per sink's partition, in order, with the source leader epoch of
    what it read last; (-1, -1) where it has none yet.

    Past the last record returned, it also moves over aborted records and transaction markers,
    which are never returned: a copied position may end there.
    """
    request = [TopicPartition(sink.topic, sink.partition) for sink in sinks]
    if not request:
        return []
    positions = call(lambda: source.position(request), "reading the consumer's positions")
    return [
        (tp.offset, tp.leader_epoch if tp.leader_epoch is not None else -1) if tp.offset >= 0 else (-1, -1)
        for tp in positions
    ]


Record = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]


def _produce_after(
    exc: BufferError | KafkaException, producer: Producer, sink: Any, record: Record, *, offset: int
) -> None:
    """The slow path of a produce that failed: wait for room in a full queue, or name the error."""
    key, value, timestamp, headers = record
    while isinstance(exc, BufferError):
        # The local queue is full: serve delivery reports until there is room.
        producer.poll(0.05)
        try:
            producer.produce(
                sink.remote_topic, value, key, sink.partition, timestamp=timestamp, headers=headers,
                on_delivery=sink.on_delivery,
            )  # fmt: skip
            return
        except (BufferError, KafkaException) as again:
            exc = again
    error = exc.args[0]
    if error.code() in TOO_LARGE_CODES:
        size = (len(value) if value else 0) + (len(key) if key else 0)
        raise RecordTooLargeError(
            f"{sink.where()}: the record at offset {offset} is {size:,} bytes, larger than the producer's "
            f"message.max.bytes; raise message.max.bytes in the producer properties of the target "
            f"cluster and max.message.bytes on {sink.remote_topic}"
        ) from exc
    raise classify(exc, f"{sink.where()}: producing") from exc
