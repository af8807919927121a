"""Copy one source partition range into the target, exactly once. Runs on Spark executors.

One range is one Kafka transaction on the target holding, atomically:
  1. the copied records (same partition number, key, value, headers, timestamp);
  2. OffsetSync records for them (when the syncs topic lives on the target);
  3. the source position in the flow's offsets topic, in Connect's format (what MM2 reads);
  4. the same position as the positions group's offset (send_offsets_to_transaction), the O(1)
     guard every attempt reads first.

The transactional id is per source partition, so initialising a producer fences every older
attempt at that partition (a retried task, a replayed batch, a second `mirror run`). After that,
the committed position is the truth: whatever is below it was copied and is skipped.

Clients are cached per Python worker in module globals (Spark reuses workers; a closure would
carry copies of these dicts, see spark-design.md P3). Nothing here is created on the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from mirror.errors import (
    KafkaClientError,
    ProducerFencedError,
    RecordTooLargeError,
    SourceTruncatedError,
)
from mirror.kafka.admin import committed_positions
from mirror.kafka.clients import consumer as new_consumer
from mirror.kafka.clients import producer as new_producer
from mirror.kafka.source_offsets import SourcePartition, encode_key, encode_value
from mirror.kafka.wire import OffsetSync
from mirror.replication.offset_syncs import syncs_for_range
from mirror.replication.plan import SourcePartitionRange
from mirror.replication.settings import FlowSettings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 12
CONSUME_BATCH = 5000
STALL_SECONDS = 60.0
TRANSACTION_TIMEOUT_MS = "60000"
_FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
_TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}


@dataclass
class RangeStats:
    """What one range did; one row of the job's output."""

    topic: str
    partition: int
    start: int
    end: int
    copied_from: int = -1
    records: int = 0
    bytes: int = 0
    skipped: bool = False
    attempts: int = 0
    fenced: int = 0
    aborted: int = 0
    truncated_records: int = 0
    seconds: float = 0.0
    max_record_age_seconds: float = 0.0


@dataclass
class _Deliveries:
    """Delivery reports of the records of the range in flight, in produce order."""

    remote_topic: str = ""
    downstream: list[int] = field(default_factory=list)
    error: KafkaError | None = None
    failed_index: int = -1

    def reset(self, remote_topic: str) -> None:
        self.remote_topic = remote_topic
        self.downstream = []
        self.error = None
        self.failed_index = -1

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if message.topic() != self.remote_topic:
            return
        if error is not None:
            if self.error is None:
                self.error, self.failed_index = error, len(self.downstream)
            self.downstream.append(-1)
        else:
            # Per partition, librdkafka reports deliveries in produce order (idempotent producer).
            self.downstream.append(message.offset())


@dataclass
class _TransactionalWriter:
    producer: Producer
    deliveries: _Deliveries


# Per-worker caches, keyed by transactional id / flow name.
_WRITERS: dict[str, _TransactionalWriter] = {}
_SOURCE_CONSUMERS: dict[str, Consumer] = {}
_POSITION_CONSUMERS: dict[str, Consumer] = {}
_SYNC_PRODUCERS: dict[str, Producer] = {}


def _source_consumer(settings: FlowSettings) -> Consumer:
    consumer = _SOURCE_CONSUMERS.get(settings.name)
    if consumer is None:
        consumer = new_consumer(
            {
                **settings.source_consumer,
                "group.id": f"mirror-{settings.source}-{settings.target}-copier",
                "enable.auto.commit": "false",
                "enable.auto.offset.store": "false",
                # Records of aborted source transactions are never copied.
                "isolation.level": "read_committed",
                "auto.offset.reset": "error",
            }
        )
        _SOURCE_CONSUMERS[settings.name] = consumer
    return consumer


def _positions_consumer(settings: FlowSettings) -> Consumer:
    consumer = _POSITION_CONSUMERS.get(settings.name)
    if consumer is None:
        consumer = new_consumer(
            {
                **settings.target_consumer,
                "group.id": settings.positions_group(),
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
            }
        )
        _POSITION_CONSUMERS[settings.name] = consumer
    return consumer


def _writer(settings: FlowSettings, transactional_id: str) -> _TransactionalWriter:
    writer = _WRITERS.get(transactional_id)
    if writer is None:
        deliveries = _Deliveries()
        properties: dict[str, Any] = {
            "linger.ms": "5",
            **settings.target_producer,
            "on_delivery": deliveries.on_delivery,
            # Java-compatible key hashing: the offsets record lands in the partition Connect would use.
            "partitioner": "murmur2_random",
        }
        if settings.exactly_once:
            properties["transactional.id"] = transactional_id
            properties.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        else:
            properties["enable.idempotence"] = "true"
        producer = new_producer(properties)
        if settings.exactly_once:
            # Fences every older producer with this id and finishes or aborts its open transaction.
            _call(
                lambda: producer.init_transactions(60),
                f"flow {settings.name}: initialising {transactional_id}",
            )
        writer = _TransactionalWriter(producer, deliveries)
        _WRITERS[transactional_id] = writer
    return writer


def _evict(transactional_id: str) -> None:
    writer = _WRITERS.pop(transactional_id, None)
    if writer is not None:
        # A fenced producer cannot do anything useful; don't wait on it.
        writer.producer.purge(in_queue=True, in_flight=True)


def _call(action: Callable[[], Any], doing: str) -> Any:
    try:
        return action()
    except KafkaException as exc:
        raise _classify(exc, doing) from exc


class _AbortableError(Exception):
    """The transaction must be aborted, then the range retried."""


class _RetriableError(Exception):
    """Try the range again with the same producer."""


def _classify(exc: KafkaException, doing: str) -> Exception:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is None:
        return KafkaClientError(f"{doing}: {exc}")
    if error.code() in _FENCED_CODES or error.fatal():
        return ProducerFencedError(f"{doing}: fenced by a newer producer ({error.str()})")
    if error.txn_requires_abort():
        return _AbortableError(f"{doing}: {error.str()}")
    if error.retriable():
        return _RetriableError(f"{doing}: {error.str()}")
    return KafkaClientError(f"{doing}: {error.str()}")


def copy_range(settings: FlowSettings, source_range: SourcePartitionRange) -> RangeStats:
    """Copy [start, end) of one source partition; safe to run any number of times, concurrently."""
    stats = RangeStats(source_range.topic, source_range.partition, source_range.start, source_range.end)
    started = time.monotonic()
    transactional_id = settings.transactional_id(source_range.topic, source_range.partition)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        stats.attempts = attempt
        try:
            _copy_once(settings, source_range, transactional_id, stats)
            stats.seconds = time.monotonic() - started
            return stats
        except ProducerFencedError as exc:
            # Usually another worker of ours took this partition's id for a later task (P4);
            # re-initialising fences it in turn, and the committed position decides what is left.
            stats.fenced += 1
            _evict(transactional_id)
            last: Exception = exc
        except _AbortableError as exc:
            stats.aborted += 1
            _abort(transactional_id)
            last = exc
        except _RetriableError as exc:
            _abort(transactional_id)
            last = exc
        except BaseException:
            # Whatever stops this range must not leave its transaction open on the target.
            _abort(transactional_id)
            raise
        time.sleep(min(0.2 * attempt, 2.0))
    raise KafkaClientError(
        f"flow {settings.name}: {source_range.topic}-{source_range.partition} [{source_range.start}, "
        f"{source_range.end}) failed {MAX_ATTEMPTS} times; last error: {last}"
    )


def _abort(transactional_id: str) -> None:
    writer = _WRITERS.get(transactional_id)
    if writer is None:
        return
    try:
        writer.producer.abort_transaction(30)
    except KafkaException:
        _evict(transactional_id)


def _copy_once(
    settings: FlowSettings, source_range: SourcePartitionRange, transactional_id: str, stats: RangeStats
) -> None:
    topic, partition = source_range.topic, source_range.partition
    remote_topic = settings.remote_topic(topic)
    writer = _writer(settings, transactional_id)
    positions = _positions_consumer(settings)
    where = f"flow {settings.name}: {topic}-{partition}"

    # After init_transactions no older attempt can still commit, so this is the whole truth.
    committed = committed_positions(positions, [(remote_topic, partition)])
    begin = committed.get((remote_topic, partition), source_range.start)
    stats.copied_from = begin
    if begin >= source_range.end:
        stats.skipped = True
        return

    source = _source_consumer(settings)
    begin = _check_truncation(settings, source, topic, partition, begin, stats)
    producer, deliveries = writer.producer, writer.deliveries
    deliveries.reset(remote_topic)
    if settings.exactly_once:
        _call(producer.begin_transaction, f"{where}: beginning a transaction")

    upstream_offsets, record_count, byte_count, oldest = _copy_records(
        source, producer, settings, source_range, begin, remote_topic, where
    )
    _call(lambda: producer.flush(60), f"{where}: flushing")
    if deliveries.error is not None:
        _raise_delivery_error(deliveries, upstream_offsets, settings, source_range, remote_topic, where)

    syncs = syncs_for_range(
        zip(upstream_offsets, deliveries.downstream, strict=True), settings.offset_lag_max
    )
    if settings.emit_offset_syncs and settings.offset_syncs_location == "target":
        for upstream, downstream in syncs:
            _produce_sync(producer, settings, topic, partition, upstream, downstream)

    # Connect stores the last replicated offset; MM2 resumes at offset + 1 = end.
    offsets_key = encode_key(SourcePartition(settings.source, topic, partition))
    producer.produce(settings.offsets_topic, key=offsets_key, value=encode_value(source_range.end - 1))
    position = [TopicPartition(remote_topic, partition, source_range.end)]
    if settings.exactly_once:
        metadata = positions.consumer_group_metadata()
        _call(
            lambda: producer.send_offsets_to_transaction(position, metadata, 60),
            f"{where}: adding the position to the transaction",
        )
        _commit(producer, where)
    else:
        _call(lambda: producer.flush(60), f"{where}: flushing the position")
        _call(
            lambda: positions.commit(offsets=position, asynchronous=False),
            f"{where}: committing the position",
        )

    if settings.emit_offset_syncs and settings.offset_syncs_location == "source":
        # MM2's order: syncs follow the data they describe, never precede it.
        sync_producer = _sync_producer(settings)
        for upstream, downstream in syncs:
            _produce_sync(sync_producer, settings, topic, partition, upstream, downstream)
        sync_producer.flush(30)

    stats.records, stats.bytes = record_count, byte_count
    stats.max_record_age_seconds = max(0.0, time.time() - oldest / 1000) if oldest else 0.0


def _commit(producer: Producer, where: str) -> None:
    for _ in range(5):
        try:
            producer.commit_transaction(60)
            return
        except KafkaException as exc:
            classified = _classify(exc, f"{where}: committing")
            if not isinstance(classified, _RetriableError):
                raise classified from exc
    raise _AbortableError(f"{where}: commit did not complete after 5 tries")


def _check_truncation(
    settings: FlowSettings, source: Consumer, topic: str, partition: int, begin: int, stats: RangeStats
) -> int:
    low, _ = _call(
        lambda: source.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False),
        f"flow {settings.name}: reading the watermarks of {topic}-{partition}",
    )
    if begin >= low:
        return begin
    lost = low - begin
    message = (
        f"flow {settings.name}: {lost} records of {topic}-{partition} (offsets {begin}..{low - 1}) were deleted "
        "on the source before they were copied (retention or topic re-created)"
    )
    if settings.on_source_truncation == "fail":
        raise SourceTruncatedError(
            f"{message}; set on_source_truncation: continue to go on from offset {low}"
        )
    log.error("%s; continuing from offset %d", message, low)
    stats.truncated_records = lost
    return int(low)


def _copy_records(
    source: Consumer,
    producer: Producer,
    settings: FlowSettings,
    source_range: SourcePartitionRange,
    begin: int,
    remote_topic: str,
    where: str,
) -> tuple[list[int], int, int, int]:
    topic, partition, end = source_range.topic, source_range.partition, source_range.end
    source.assign([TopicPartition(topic, partition, begin)])
    upstream_offsets: list[int] = []
    byte_count = 0
    oldest = 0
    position = begin
    last_progress = time.monotonic()
    try:
        while position < end:
            messages = source.consume(num_messages=min(CONSUME_BATCH, end - position), timeout=0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    raise _classify(KafkaException(error), f"{where}: consuming")
                offset = message.offset()
                if offset >= end:
                    position = end
                    break
                key, value = message.key(), message.value()
                timestamp_type, timestamp = message.timestamp()
                _produce(
                    producer,
                    remote_topic,
                    partition,
                    key,
                    value,
                    message.headers(),
                    timestamp if timestamp_type else 0,
                    offset=offset,
                    where=where,
                )
                upstream_offsets.append(offset)
                byte_count += (len(value) if value else 0) + (len(key) if key else 0)
                if timestamp_type and (oldest == 0 or timestamp < oldest):
                    oldest = timestamp
                position = offset + 1
            if messages:
                last_progress = time.monotonic()
                continue
            # Nothing returned: the rest of the range may be aborted records or transaction markers.
            (current,) = source.position([TopicPartition(topic, partition)])
            if current.offset >= end:
                break
            if time.monotonic() - last_progress > STALL_SECONDS:
                raise _RetriableError(f"{where}: no progress at offset {position} for {STALL_SECONDS:g}s")
    finally:
        source.unassign()
    return upstream_offsets, len(upstream_offsets), byte_count, oldest


def _produce(
    producer: Producer,
    topic: str,
    partition: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
    timestamp: int,
    *,
    offset: int,
    where: str,
) -> None:
    while True:
        try:
            producer.produce(
                topic, value=value, key=key, partition=partition, headers=headers, timestamp=timestamp
            )
            return
        except BufferError:
            # The local queue is full: serve delivery reports until there is room.
            producer.poll(0.05)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() in _TOO_LARGE_CODES:
                size = (len(value) if value else 0) + (len(key) if key else 0)
                raise RecordTooLargeError(
                    f"{where}: the record at offset {offset} is {size:,} bytes, larger than the producer's "
                    f"message.max.bytes; raise message.max.bytes in the producer properties of the target "
                    f"cluster and max.message.bytes on {topic}"
                ) from exc
            raise _classify(exc, f"{where}: producing") from exc


def _raise_delivery_error(
    deliveries: _Deliveries,
    upstream_offsets: list[int],
    settings: FlowSettings,
    source_range: SourcePartitionRange,
    remote_topic: str,
    where: str,
) -> None:
    error = deliveries.error
    assert error is not None
    if error.code() in _TOO_LARGE_CODES:
        offset = upstream_offsets[deliveries.failed_index]
        raise RecordTooLargeError(
            f"{where}: the record at offset {offset} is larger than {settings.target} accepts for {remote_topic} "
            f"({error.str()}); raise max.message.bytes on {settings.target}'s {remote_topic} and the producer's "
            "message.max.bytes"
        )
    raise _classify(KafkaException(error), f"{where}: delivering to {remote_topic}")


def _produce_sync(
    producer: Producer, settings: FlowSettings, topic: str, partition: int, upstream: int, downstream: int
) -> None:
    sync = OffsetSync(topic, partition, upstream, downstream)
    producer.produce(settings.offset_syncs_topic(), key=sync.key(), value=sync.value(), partition=0)


def _sync_producer(settings: FlowSettings) -> Producer:
    producer = _SYNC_PRODUCERS.get(settings.name)
    if producer is None:
        producer = new_producer({**settings.source_producer, "enable.idempotence": "true"})
        _SYNC_PRODUCERS[settings.name] = producer
    return producer
