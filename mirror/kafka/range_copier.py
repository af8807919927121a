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
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from mirror.errors import (
    KafkaClientError,
    ProducerFencedError,
    ProducerStuckError,
    RecordRejectedError,
    RecordTooLargeError,
    RemoteTopicDeletedError,
    SourceTruncatedError,
)
from mirror.kafka.admin import committed_positions
from mirror.kafka.clients import consumer as new_consumer
from mirror.kafka.clients import producer as new_producer
from mirror.kafka.source_offsets import SourcePartition, encode_key, encode_value
from mirror.kafka.transactions import (
    AbortableError,
    RetriableError,
    bounded,
    call,
    classify,
    commit,
    init_transactions,
    lease_reader_properties,
    stop_if_flow_taken_over,
)
from mirror.kafka.wire import OffsetSync
from mirror.replication.offset_syncs import syncs_for_range
from mirror.replication.plan import SourcePartitionRange
from mirror.replication.settings import FlowSettings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 12
CONSUME_BATCH = 5000
POLL_SECONDS = 0.05
STALL_SECONDS = 60.0
TRANSACTION_TIMEOUT_MS = "60000"
_TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}
_OUT_OF_RANGE_CODES = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}


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
    # Where the range really started copying when its remote partition had been re-created empty.
    recopied_from: int = -1
    seconds: float = 0.0
    max_record_age_seconds: float = 0.0


@dataclass
class _Deliveries:
    """Delivery reports of the records of the range in flight, in produce order."""

    remote_topic: str = ""
    downstream: list[int] = field(default_factory=list)
    error: KafkaError | None = None
    failed_index: int = -1  # the largest failed record: the one to name when it is too large
    failed_size: int = -1
    first_failed_index: int = -1

    def reset(self, remote_topic: str) -> None:
        self.remote_topic = remote_topic
        self.downstream = []
        self.error = None
        self.failed_index = -1
        self.failed_size = -1
        self.first_failed_index = -1

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if message.topic() != self.remote_topic:
            return
        if error is not None:
            # A broker rejects whole batches; the largest failed record is the one to name.
            size = len(message.value() or b"") + len(message.key() or b"")
            if self.error is None or size > self.failed_size:
                self.error, self.failed_index, self.failed_size = error, len(self.downstream), size
            if self.first_failed_index < 0:
                self.first_failed_index = len(self.downstream)
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
_CONSUMERS: dict[tuple[str, str], Consumer] = {}  # (flow, role)
_SYNC_PRODUCERS: dict[str, Producer] = {}


def _cached_consumer(settings: FlowSettings, role: str, properties: dict[str, str]) -> Consumer:
    key = (settings.name, role)
    if key not in _CONSUMERS:
        _CONSUMERS[key] = new_consumer(properties)
    return _CONSUMERS[key]


def _source_consumer(settings: FlowSettings) -> Consumer:
    return _cached_consumer(
        settings,
        "source",
        {
            **settings.source_consumer,
            "group.id": f"mirror-{settings.source}-{settings.target}-copier",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            # Records of aborted source transactions are never copied.
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",
            # A range ends where the source ended when it was planned; a fetch there must not
            # park for librdkafka's default 500 ms waiting for records the range will not take.
            "fetch.wait.max.ms": "20",
        },
    )


def _positions_consumer(settings: FlowSettings) -> Consumer:
    return _cached_consumer(
        settings,
        "positions",
        {
            **settings.target_consumer,
            "group.id": settings.positions_group(),
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        },
    )


def _writer_key(settings: FlowSettings, source_range: SourcePartitionRange) -> str:
    """The transactional id of the range's partition; at-least-once, one producer per worker and flow.

    Without transactions nothing needs fencing, and sharing the producer keeps it warm: a new
    idempotent producer waits ~500 ms for its producer id (librdkafka retries the lookup it loses
    to the bootstrap-connection swap), and Spark rarely gives a partition the same worker twice.
    """
    if settings.exactly_once:
        return settings.transactional_id(source_range.topic, source_range.partition)
    return f"idempotent:{settings.name}"


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
            init_transactions(producer, f"flow {settings.name}: initialising {transactional_id}")
        writer = _TransactionalWriter(producer, deliveries)
        _WRITERS[transactional_id] = writer
    return writer


def _evict(transactional_id: str) -> None:
    writer = _WRITERS.pop(transactional_id, None)
    if writer is not None:
        # A fenced producer cannot do anything useful; don't wait on it.
        writer.producer.purge(in_queue=True, in_flight=True)


class _OutOfRangeError(Exception):
    """The source no longer has the range's first offsets: check for truncation, then retry."""


def copy_range(settings: FlowSettings, source_range: SourcePartitionRange) -> RangeStats:
    """Copy [start, end) of one source partition; safe to run any number of times, concurrently."""
    stats = RangeStats(source_range.topic, source_range.partition, source_range.start, source_range.end)
    started = time.monotonic()
    transactional_id = _writer_key(settings, source_range)
    check_truncation = False
    for attempt in range(1, MAX_ATTEMPTS + 1):
        stats.attempts = attempt
        try:
            _copy_once(settings, source_range, transactional_id, stats, check_truncation=check_truncation)
            stats.seconds = time.monotonic() - started
            return stats
        except ProducerFencedError as exc:
            # Usually another worker of ours took this partition's id for a later task (P4);
            # re-initialising fences it in turn, and the committed position decides what is left.
            # But if another `mirror run` owns the flow now, this task is the zombie: it stops.
            stats.fenced += 1
            _evict(transactional_id)
            _stop_if_flow_taken_over(settings)
            last: Exception = exc
            continue  # re-initialising is the remedy; nothing to wait for
        except AbortableError as exc:
            stats.aborted += 1
            _abort(transactional_id)
            last = exc
        except RetriableError as exc:
            _abort(transactional_id)
            last = exc
        except _OutOfRangeError as exc:
            _abort(transactional_id)
            check_truncation, last = True, exc
            continue
        except BaseException:
            # Whatever stops this range must not leave its transaction open on the target.
            _abort(transactional_id)
            raise
        time.sleep(min(0.2 * attempt, 2.0))
    raise KafkaClientError(
        f"flow {settings.name}: {source_range.topic}-{source_range.partition} [{source_range.start}, "
        f"{source_range.end}) failed {MAX_ATTEMPTS} times; last error: {last}"
    )


def _stop_if_flow_taken_over(settings: FlowSettings) -> None:
    stop_if_flow_taken_over(settings, _cached_consumer(settings, "lease", lease_reader_properties(settings)))


def _abort(transactional_id: str) -> None:
    writer = _WRITERS.get(transactional_id)
    if writer is None:
        return
    try:
        bounded(lambda: writer.producer.abort_transaction(30), 30, f"aborting {transactional_id}")
    except (KafkaException, ProducerStuckError):
        _evict(transactional_id)


@dataclass(frozen=True)
class _RangeJob:
    """One range being copied, with the names every step needs."""

    settings: FlowSettings
    source_range: SourcePartitionRange

    @property
    def topic(self) -> str:
        return self.source_range.topic

    @property
    def partition(self) -> int:
        return self.source_range.partition

    @property
    def remote_topic(self) -> str:
        return self.settings.remote_topic(self.topic)

    @property
    def where(self) -> str:
        return f"flow {self.settings.name}: {self.topic}-{self.partition}"


@dataclass
class _Copied:
    upstream_offsets: list[int] = field(default_factory=list)
    bytes: int = 0
    oldest_timestamp_ms: int = 0


def _copy_once(
    settings: FlowSettings,
    source_range: SourcePartitionRange,
    transactional_id: str,
    stats: RangeStats,
    *,
    check_truncation: bool,
) -> None:
    job = _RangeJob(settings, source_range)
    remote_topic, partition, where = job.remote_topic, job.partition, job.where
    writer = _writer(settings, transactional_id)
    positions = _positions_consumer(settings)

    # After init_transactions no older attempt can still commit, so this is the whole truth.
    committed = committed_positions(positions, [(remote_topic, partition)])
    found = committed.get((remote_topic, partition))
    begin = found if found is not None else _begin_without_position(job, stats)
    stats.copied_from = begin
    if begin >= source_range.end:
        stats.skipped = True
        return

    source = _source_consumer(settings)
    if check_truncation:
        # Only after the consumer hit out-of-range: a watermark lookup costs a round trip per range.
        begin = _check_truncation(job, source, begin, stats)
    producer, deliveries = writer.producer, writer.deliveries
    deliveries.reset(remote_topic)
    position = [TopicPartition(remote_topic, partition, source_range.end)]
    if settings.exactly_once:
        call(producer.begin_transaction, f"{where}: beginning a transaction")
        # The position is known before copying, and adding it first is a coordinator round trip:
        # a producer fenced since it was cached (P4) finds out now, before doing the work.
        metadata = positions.consumer_group_metadata()
        call(
            lambda: bounded(lambda: producer.send_offsets_to_transaction(position, metadata, 60), 60, where),
            f"{where}: adding the position to the transaction",
        )

    copied = _copy_records(job, source, producer, begin)
    call(lambda: producer.flush(60), f"{where}: flushing")
    if deliveries.error is not None:
        _raise_delivery_error(job, deliveries, copied.upstream_offsets)

    pairs = zip(copied.upstream_offsets, deliveries.downstream, strict=True)
    syncs = [
        OffsetSync(job.topic, partition, up, down)
        for up, down in syncs_for_range(pairs, settings.offset_lag_max)
    ]
    if settings.emit_offset_syncs and settings.offset_syncs_location == "target":
        _produce_syncs(producer, settings, syncs)

    # Connect stores the last replicated offset; MM2 resumes at offset + 1 = end.
    offsets_key = encode_key(SourcePartition(settings.source, job.topic, partition))
    producer.produce(settings.offsets_topic, key=offsets_key, value=encode_value(source_range.end - 1))
    if settings.exactly_once:
        commit(producer, where)
    else:
        call(lambda: producer.flush(60), f"{where}: flushing the position")
        call(
            lambda: positions.commit(offsets=position, asynchronous=False),
            f"{where}: committing the position",
        )

    if settings.emit_offset_syncs and settings.offset_syncs_location == "source":
        # MM2's order: syncs follow the data they describe, never precede it.
        sync_producer = _sync_producer(settings)
        _produce_syncs(sync_producer, settings, syncs)
        sync_producer.flush(30)

    stats.records, stats.bytes = len(copied.upstream_offsets), copied.bytes
    if copied.oldest_timestamp_ms:
        stats.max_record_age_seconds = max(0.0, time.time() - copied.oldest_timestamp_ms / 1000)


def _begin_without_position(job: _RangeJob, stats: RangeStats) -> int:
    """Where a range starts when the positions group has no offset for its remote partition.

    Normally that is a new partition, planned from the source's earliest offset, and the range's
    start is right. But Kafka drops a group's offsets when their topic is deleted: a range that
    starts past the source's earliest offset, into a remote partition holding no committed record,
    is copying into a remote topic deleted (or deleted and re-created) after records went into it.
    Resuming at the range's start would leave the re-created topic without them, silently.
    """
    settings, start = job.settings, job.source_range.start
    low = _source_earliest(job, _source_consumer(settings))
    if start <= low or not _holds_no_committed_record(job):
        return start
    message = (
        f"{job.where}: {job.remote_topic}-{job.partition} on {settings.target} holds no record, but "
        f"{start - low:,} records (offsets {low}..{start - 1}) had been copied into it: the remote "
        "topic was deleted or re-created"
    )
    if settings.on_remote_topic_deleted == "fail":
        raise RemoteTopicDeletedError(
            f"{message}; restore it, or set on_remote_topic_deleted: recopy to copy the partition "
            f"again from offset {low}"
        )
    log.error("%s; copying the partition again from offset %d", message, low)
    stats.recopied_from = low
    return low


def _holds_no_committed_record(job: _RangeJob) -> bool:
    """True if the remote partition has no committed record (aborted ones and markers do not count)."""
    settings = job.settings
    reader = _cached_consumer(
        settings,
        "remote",
        {
            **settings.target_consumer,
            "group.id": f"mirror-{settings.source}-{settings.target}-copier",
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
            "enable.partition.eof": "true",
        },
    )
    remote = TopicPartition(job.remote_topic, job.partition)
    low, high = call(
        lambda: reader.get_watermark_offsets(remote, timeout=30, cached=False),
        f"{job.where}: reading the remote partition's watermarks",
    )
    if high <= low:
        return True
    reader.assign([TopicPartition(job.remote_topic, job.partition, low)])
    deadline = time.monotonic() + STALL_SECONDS
    try:
        while time.monotonic() < deadline:
            for message in reader.consume(num_messages=1, timeout=POLL_SECONDS):
                error = message.error()
                if error is None:
                    return False
                if error.code() == KafkaError._PARTITION_EOF:
                    return True
                raise classify(KafkaException(error), f"{job.where}: reading {job.remote_topic}")
    finally:
        reader.unassign()
    raise RetriableError(f"{job.where}: could not read {job.remote_topic} to its end in {STALL_SECONDS:g}s")


def _source_earliest(job: _RangeJob, source: Consumer) -> int:
    low, _ = call(
        lambda: source.get_watermark_offsets(
            TopicPartition(job.topic, job.partition), timeout=30, cached=False
        ),
        f"{job.where}: reading the source watermarks",
    )
    return int(low)


def _check_truncation(job: _RangeJob, source: Consumer, begin: int, stats: RangeStats) -> int:
    settings = job.settings
    low = _source_earliest(job, source)
    if begin >= low:
        return begin
    lost = low - begin
    message = (
        f"{job.where}: {lost} records (offsets {begin}..{low - 1}) were deleted on the source before "
        "they were copied (retention or topic re-created)"
    )
    if settings.on_source_truncation == "fail":
        raise SourceTruncatedError(
            f"{message}; set on_source_truncation: continue to go on from offset {low}"
        )
    log.error("%s; continuing from offset %d", message, low)
    stats.truncated_records = lost
    return int(low)


def _copy_records(job: _RangeJob, source: Consumer, producer: Producer, begin: int) -> _Copied:
    topic, partition, end = job.topic, job.partition, job.source_range.end
    remote_topic, where = job.remote_topic, job.where
    source.assign([TopicPartition(topic, partition, begin)])
    copied = _Copied()
    # The per-record loop is the copier's hot path (the largest cost in its profile): bound
    # methods and running totals live in locals, and each record's fields are read once.
    produce, keep_offset = producer.produce, copied.upstream_offsets.append
    size, oldest = 0, 0
    position = begin
    last_progress = time.monotonic()
    try:
        while position < end:
            # consume() waits for all num_messages or the timeout. Asking for no more than the range
            # still holds returns as soon as it arrived; its tail may be markers and aborted records
            # that never come, so the wait stays short and position() tells where the range ends.
            wanted = max(1, min(CONSUME_BATCH, end - position))
            messages = source.consume(num_messages=wanted, timeout=POLL_SECONDS)
            for message in messages:
                error = message.error()
                if error is not None:
                    raise _consume_error(error, position, where)
                offset = message.offset()
                if offset >= end:
                    position = end
                    break
                key, value = message.key(), message.value()
                timestamp_type, timestamp = message.timestamp()
                # CreateTime or LogAppendTime, the source's value is kept; 0 would mean "now".
                if not timestamp_type:
                    timestamp = 0
                elif oldest == 0 or timestamp < oldest:
                    oldest = timestamp
                headers = message.headers()
                try:
                    produce(remote_topic, value, key, partition, timestamp=timestamp, headers=headers)
                except (BufferError, KafkaException) as exc:
                    _produce_after(exc, producer, remote_topic, partition, (key, value, timestamp, headers),
                                   offset=offset, where=where)  # fmt: skip
                keep_offset(offset)
                size += (len(value) if value else 0) + (len(key) if key else 0)
                position = offset + 1
            if messages:
                last_progress = time.monotonic()
                if position >= end:
                    break
            # The rest of the range may be aborted records or transaction markers.
            (current,) = source.position([TopicPartition(topic, partition)])
            if current.offset >= end:
                break
            if time.monotonic() - last_progress > STALL_SECONDS:
                raise RetriableError(f"{where}: no progress at offset {position} for {STALL_SECONDS:g}s")
    finally:
        source.unassign()
    copied.bytes, copied.oldest_timestamp_ms = size, oldest
    return copied


def _consume_error(error: KafkaError, position: int, where: str) -> Exception:
    if error.code() in _OUT_OF_RANGE_CODES:
        return _OutOfRangeError(f"{where}: offset {position} is no longer on the source")
    return classify(KafkaException(error), f"{where}: consuming")


Record = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]


def _produce_after(
    exc: BufferError | KafkaException,
    producer: Producer,
    topic: str,
    partition: int,
    record: Record,
    *,
    offset: int,
    where: str,
) -> None:
    """The slow path of a produce that failed: wait for room in a full queue, or name the error."""
    key, value, timestamp, headers = record
    while isinstance(exc, BufferError):
        # The local queue is full: serve delivery reports until there is room.
        producer.poll(0.05)
        try:
            producer.produce(topic, value, key, partition, timestamp=timestamp, headers=headers)
            return
        except (BufferError, KafkaException) as again:
            exc = again
    error = exc.args[0]
    if error.code() in _TOO_LARGE_CODES:
        size = (len(value) if value else 0) + (len(key) if key else 0)
        raise RecordTooLargeError(
            f"{where}: the record at offset {offset} is {size:,} bytes, larger than the producer's "
            f"message.max.bytes; raise message.max.bytes in the producer properties of the target "
            f"cluster and max.message.bytes on {topic}"
        ) from exc
    raise classify(exc, f"{where}: producing") from exc


def _raise_delivery_error(job: _RangeJob, deliveries: _Deliveries, upstream_offsets: list[int]) -> None:
    error = deliveries.error
    if error is None:
        return
    if error.code() in _TOO_LARGE_CODES:
        offset = upstream_offsets[deliveries.failed_index]
        raise RecordTooLargeError(
            f"{job.where}: the record at offset {offset} ({deliveries.failed_size:,} bytes) is larger than "
            f"{job.settings.target} accepts for {job.remote_topic} ({error.str()}); raise "
            f"max.message.bytes on {job.settings.target}'s {job.remote_topic} and the producer's "
            "message.max.bytes"
        )
    if error.code() == KafkaError.INVALID_RECORD:
        offset = upstream_offsets[deliveries.first_failed_index]
        raise RecordRejectedError(
            f"{job.where}: {job.settings.target} refused the record at offset {offset} for "
            f"{job.remote_topic} as invalid ({error.str()}); a compacted topic takes only records "
            f"with keys: make {job.remote_topic}'s cleanup.policy (and other configs) match "
            f"{job.settings.source}'s {job.topic}, which the topic config sync does unless "
            "config_properties_exclude names them"
        )
    raise classify(KafkaException(error), f"{job.where}: delivering to {job.remote_topic}")


def _produce_syncs(producer: Producer, settings: FlowSettings, syncs: list[OffsetSync]) -> None:
    for sync in syncs:
        producer.produce(settings.offset_syncs_topic(), key=sync.key(), value=sync.value(), partition=0)


def _sync_producer(settings: FlowSettings) -> Producer:
    producer = _SYNC_PRODUCERS.get(settings.name)
    if producer is None:
        producer = new_producer({**settings.source_producer, "enable.idempotence": "true"})
        _SYNC_PRODUCERS[settings.name] = producer
    return producer
