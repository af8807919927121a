"""Committing what a copy task copied since its last commit: one Kafka transaction on the target
per producer of the task.

Each holds, atomically, for every partition of that producer that moved:
  1. the copied records (already produced when the commit starts);
  2. OffsetSync records for them (when the syncs topic lives on the target);
  3. the source position in the flow's offsets topic, in Connect's format (what MM2 reads);
  4. the same position as the positions group's offset (send_offsets_to_transaction), which every
     task reads first when it opens.
At-least-once, the same steps run without a transaction: records, syncs and offsets records are
flushed, then the positions group is committed.

A task with several producers flushes them all first (they send in parallel), then commits their
transactions in parallel. Some may commit and others fail: the error is raised after the
committed ones are accounted for, the task aborts the rest and reads every position back from the
target, where the committed ones now are.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirror.config.flow_settings import FlowSettings
from mirror.errors import (
    ClusterAuthenticationError,
    NotAuthorizedError,
    ProducerFencedError,
    RecordRejectedError,
    RecordTooLargeError,
)
from mirror.flow.source_offsets import SourcePartition, encode_key, encode_value
from mirror.kafka.transactions import AbortableError, RetriableError, call, classify, commit, send_offsets
from mirror.kafka.wire import OffsetSync
from mirror.source.partition_copy import PartitionCopy
from mirror.source.positions import position_metadata
from mirror.source.record_copy import TOO_LARGE_CODES
from mirror.source.stats import TaskStats

FLUSH_SECONDS = 60.0


class RemoteRecreatedError(Exception):
    """A remote partition was deleted and re-created under the running task: abort, then re-read."""


@dataclass
class CommitTimes:
    """Where a commit's seconds went (the task's DEBUG line): with several producers, the slowest
    producer's for each step."""

    flush: float = 0.0  # every record delivered: librdkafka sends one partition per produce request
    positions: float = 0.0  # send_offsets_to_transaction: AddOffsetsToTxn, then TxnOffsetCommit
    end: float = 0.0  # the offsets records delivered, then EndTxn (a marker into every partition)

    def __str__(self) -> str:
        return (
            f"flush {self.flush * 1000:.0f} ms, positions {self.positions * 1000:.0f} ms, "
            f"end {self.end * 1000:.0f} ms"
        )


@dataclass
class Writers:
    """The clients a commit uses."""

    producers: Sequence[Producer]  # a partition's records went through producers[part.producer]
    positions: Consumer  # its group is the positions group: its metadata goes into the transaction
    sync_producer: Producer | None  # syncs into the source cluster, if they live there
    # Commits several producers' transactions at once; None with one producer.
    pool: ThreadPoolExecutor | None = None
    # Set per producer as its transaction commits: the ones left open are the task's to abort.
    committed: list[bool] | None = None
    times: CommitTimes = field(default_factory=CommitTimes)


@dataclass
class OpenTransaction:
    """The open transaction, as a copy task's loop counts it."""

    opened_at: float | None = None  # when it took its first record (or swept position)
    records: int = 0
    size: int = 0


def commit_moved(
    settings: FlowSettings,
    parts: Sequence[PartitionCopy],
    writers: Writers,
    stats: TaskStats,
    *,
    in_transaction: bool,
) -> int:
    """Commit every partition that moved since the last commit; returns the records committed."""
    where = f"flow {settings.name}"
    began = time.monotonic()
    for producer in writers.producers:  # all were sending meanwhile: this waits for the slowest
        if call(partial(producer.flush, FLUSH_SECONDS), f"{where}: flushing"):
            # Records still undelivered (a remote topic being deleted and re-created, a target
            # away): the transaction cannot commit them, so it is aborted and the task goes back.
            raise RetriableError(f"{where}: records still undelivered after {FLUSH_SECONDS:g}s")
    writers.times.flush = time.monotonic() - began
    touched = [part for part in parts if part.upstream]
    for part in touched:
        _raise_delivery_error(settings, part)
        if part.recreated_remote():
            part.recreated = True
            raise RemoteRecreatedError(f"{part.where()}: {part.remote_topic}-{part.partition} was re-created")
    syncs = _syncs(parts, touched)
    writer_of = _writer_of(parts, writers) if syncs else {}
    syncs_topic = settings.offset_syncs_topic() if syncs else ""
    if settings.emit_offset_syncs and settings.offset_syncs_location == "target":
        for sync in syncs:
            _produce_sync(
                writers.producers[writer_of.get((sync.topic, sync.partition), 0)], syncs_topic, sync
            )
    # A partition that copied records is written even if it ends where it was committed (copied
    # again after the source lost records): its metadata describes the new last record.
    moved = [part for part in parts if part.upstream or part.moved_since_commit()]
    outcome = _write_all_positions(settings, moved, writers, in_transaction=in_transaction)
    done = {index for index, error in outcome.items() if error is None}
    records = _account(
        [part for part in parts if part.producer in done],
        [part for part in touched if part.producer in done],
        [part for part in moved if part.producer in done],
        stats,
    )
    if writers.sync_producer is not None and syncs:
        # MM2's order: syncs follow the data they describe, never precede it.
        for sync in syncs:
            if writer_of.get((sync.topic, sync.partition), 0) in done:
                _produce_sync(writers.sync_producer, syncs_topic, sync)
        writers.sync_producer.poll(0)
    failures = [error for error in outcome.values() if error is not None]
    if failures:
        raise _gravest(failures)
    return records


def _writer_of(parts: Sequence[PartitionCopy], writers: Writers) -> dict[tuple[str, int], int]:
    """Which producer writes each partition; empty with one producer (every partition is its),
    so a commit with one producer builds no map over a thousand partitions."""
    if len(writers.producers) == 1:
        return {}
    return {(part.topic, part.partition): part.producer for part in parts}


def _write_all_positions(
    settings: FlowSettings, moved: Sequence[PartitionCopy], writers: Writers, *, in_transaction: bool
) -> dict[int, BaseException | None]:
    """Each producer's moved positions and commit, in parallel when there are several; which
    producers committed (None) and which failed (their error)."""
    count = len(writers.producers)
    metadata = writers.positions.consumer_group_metadata() if in_transaction else None

    def write(index: int) -> None:
        own = [part for part in moved if part.producer == index]
        producer = writers.producers[index]
        _write_positions(settings, own, writers, producer, metadata, in_transaction=in_transaction)
        if writers.committed is not None:
            writers.committed[index] = True

    if count == 1 or writers.pool is None:
        outcome: dict[int, BaseException | None] = {}
        for index in range(count):
            write(index)  # one producer: its error is the commit's, raised as it is
            outcome[index] = None
        return outcome
    futures = {index: writers.pool.submit(write, index) for index in range(count)}
    return {index: future.exception() for index, future in futures.items()}


def _gravest(errors: Sequence[BaseException]) -> BaseException:
    """Of the producers' commit errors, the one the task must act on: one only the user can fix
    first, then a fence (the task re-opens every producer), then the first."""
    for kinds in ((NotAuthorizedError, ClusterAuthenticationError), (ProducerFencedError,)):
        for error in errors:
            if isinstance(error, kinds):
                return error
    return errors[0]


def _write_positions(
    settings: FlowSettings,
    moved: Sequence[PartitionCopy],
    writers: Writers,
    producer: Producer,
    metadata: Any,
    *,
    in_transaction: bool,
) -> None:
    """The moved positions, in Connect's offsets topic and the positions group; then the commit."""
    where = f"flow {settings.name}"
    # The metadata keeps where the partition's last record landed and the remote topic's ID: a task
    # that opens later can tell a remote topic re-created since even if Kafka kept the group's offsets;
    # and the source leader epoch, with which it checks the source log still holds what was copied;
    # and the last record's source offset while its trailing sync is due, which a task that opens
    # after this one sends if this one cannot (killed, fenced, or unsure whether its commit landed).
    # It stays after the sync went out, until the position is next written (rewriting a quiet
    # partition's position for it would cost every steady transaction an offset per partition gone
    # quiet): a task that opens sends it again, one sync per quiet partition per epoch
    # (epoch_seconds) or rewind, which is harmless. With the syncs on the source cluster, sent
    # after this commit and lost if the task dies before they go out, it is there whichever syncs
    # covered the last record.
    syncs_after_commit = writers.sync_producer is not None
    positions = [
        TopicPartition(
            part.remote_topic,
            part.partition,
            part.position,
            metadata=position_metadata(
                part.downstream_end(),
                part.remote_topic_id,
                part.epoch,
                part.source_topic_id,
                unsynced=part.unsynced_upstream(syncs_after_commit=syncs_after_commit),
            ),
        )
        for part in moved
    ]
    for part in moved:
        if part.position > 0:
            # Connect stores the last replicated offset; MM2 resumes at offset + 1 = position.
            key = encode_key(SourcePartition(settings.source, part.topic, part.partition))
            producer.produce(settings.offsets_topic, key=key, value=encode_value(part.position - 1))
    if not in_transaction:
        call(lambda: producer.flush(60), f"{where}: flushing the positions")
        if positions:
            call(
                lambda: writers.positions.commit(offsets=positions, asynchronous=False),
                f"{where}: committing the positions",
            )
        return
    began = time.monotonic()
    if positions:
        doing = f"{where}: adding the positions to the transaction"
        call(lambda: send_offsets(producer, positions, metadata, doing), doing)
    ending = time.monotonic()
    commit(producer, where)
    times = writers.times
    times.positions, times.end = (
        max(times.positions, ending - began),
        max(times.end, time.monotonic() - ending),
    )


def _account(
    parts: Sequence[PartitionCopy],
    touched: Sequence[PartitionCopy],
    moved: Sequence[PartitionCopy],
    stats: TaskStats,
) -> int:
    """After the commit: the partitions' committed state, and the stats the driver gets."""
    committed_at = time.time()
    records = 0
    oldest = min((part.oldest_ms for part in touched if part.oldest_ms), default=0)
    for part in touched:
        records += part.pending
        stats.copied(part.topic, part.partition, part.pending, part.bytes)
        if part.oldest_ms:
            stats.ages[f"{part.topic}:{part.partition}"] = max(0.0, committed_at - part.oldest_ms / 1000)
    for part in moved:
        if part.truncated:
            stats.truncated[f"{part.topic}:{part.partition}"] = part.truncated
            part.truncated = 0
    for part in parts:
        part.syncs_committed()
        if part.upstream or part.moved_since_commit():
            part.committed_now()
    stats.transactions += 1
    if oldest:
        stats.latencies.append(max(0.0, committed_at - oldest / 1000))
    return records


def _syncs(parts: Sequence[PartitionCopy], touched: Sequence[PartitionCopy]) -> list[OffsetSync]:
    syncs = [
        OffsetSync(part.topic, part.partition, up, down) for part in touched for up, down in part.take_syncs()
    ]
    for part in parts:
        if not part.upstream and part.unsynced is not None:
            pair = part.take_trailing_sync()
            if pair is not None:
                syncs.append(OffsetSync(part.topic, part.partition, *pair))
    return syncs


def needs_commit(parts: Sequence[PartitionCopy]) -> bool:
    """Something to commit without new records: a moved position, or a quiet partition's last sync."""
    return any(part.moved_since_commit() or part.unsynced is not None for part in parts)


def _produce_sync(producer: Producer, topic: str, sync: OffsetSync) -> None:
    producer.produce(topic, key=sync.key(), value=sync.value(), partition=0)


def _raise_delivery_error(settings: FlowSettings, part: PartitionCopy) -> None:
    error: KafkaError | None = part.failure
    if error is None:
        return
    offset = part.upstream[part.failed_at] if 0 <= part.failed_at < len(part.upstream) else -1
    if error.code() in TOO_LARGE_CODES:
        raise RecordTooLargeError(
            f"{part.where()}: the record at offset {offset} ({part.failed_size:,} bytes) is larger than "
            f"{settings.target} accepts for "
            f"{part.remote_topic} ({error.str()}); raise max.message.bytes on {settings.target}'s "
            f"{part.remote_topic} and the producer's message.max.bytes"
        )
    if error.code() == KafkaError.INVALID_RECORD:
        offset = part.upstream[part.first_failed_at] if 0 <= part.first_failed_at < len(part.upstream) else -1
        raise RecordRejectedError(
            f"{part.where()}: {settings.target} refused the record at offset {offset} for "
            f"{part.remote_topic} as invalid ({error.str()}); a compacted topic takes only records "
            f"with keys: make {part.remote_topic}'s cleanup.policy (and other configs) match "
            f"{settings.source}'s {part.topic}, which the topic config sync does unless "
            "config_properties_exclude names them"
        )
    classified = classify(KafkaException(error), f"{part.where()}: delivering to {part.remote_topic}")
    if isinstance(classified, (ProducerFencedError, NotAuthorizedError)):
        raise classified
    # Anything else (a message timed out while the target was away) fails only this transaction.
    raise AbortableError(str(classified))
