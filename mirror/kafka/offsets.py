"""Partition offsets: the ends and starts of partitions, and a group's committed positions, with
errors translated and transient ones asked again."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import OFFSET_END, Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirror.kafka.clients import (
    COORDINATOR_CODES,
    STALE_LEADER_CODES,
    TIMEOUT_SECONDS,
    error_code,
    partition_error,
    retrying,
)

Partition = tuple[str, int]  # (topic, partition): callers outside mirror/kafka never see TopicPartition
# librdkafka's words when a leader's log ends below a position it checked against the leader's
# epochs (KIP-320): with auto.offset.reset=error it stops the partition and says where the log ends.
_TRUNCATED = re.compile(r"log truncation detected at .*?broker end offset is (\d+)", re.IGNORECASE)
# Partitions per ListOffsets or OffsetFetch request. librdkafka's CPU for one request grows much
# faster than its partitions (a group's offsets of 1,000 partitions took 10 ms, of 2,000 31 ms, of
# 10,000 0.5-0.6 s), and the driver's lag read asks both of every partition every 5 s. At 250 a
# request the 10,000 took 0.04 s; 50 and 100 were no cheaper, 500 and more cost more.
REQUEST_PARTITIONS = 250
T = TypeVar("T")


def _chunks(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[start : start + REQUEST_PARTITIONS] for start in range(0, len(items), REQUEST_PARTITIONS)]


def _ask_list_offsets(
    admin: AdminClient, request: Mapping[TopicPartition, Any], isolation: IsolationLevel
) -> dict[TopicPartition, Future[Any]]:
    """One future per partition, every request sent before any answer is awaited."""
    futures: dict[TopicPartition, Future[Any]] = {}
    for chunk in _chunks(list(request.items())):
        futures.update(
            admin.list_offsets(dict(chunk), isolation_level=isolation, request_timeout=TIMEOUT_SECONDS)
        )
    return futures


def truncation_point(error: KafkaError) -> int | None:
    """Where the partition's log now ends, if the consume `error` says the consumer found it shorter
    than the position it checked (an unclean leader election elected a replica that lacked the
    tail); None for any other error, such as an offset deleted by retention."""
    found = _TRUNCATED.search(error.str())
    return int(found.group(1)) if found else None


def _list_offsets(
    admin: AdminClient,
    partitions: Iterable[Partition],
    spec: OffsetSpec,
    isolation: IsolationLevel = IsolationLevel.READ_COMMITTED,
) -> dict[Partition, int]:
    request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
    if not request:
        return {}

    def ask() -> dict[Partition, int]:
        futures = _ask_list_offsets(admin, request, isolation)
        try:
            offsets = {
                (tp.topic, tp.partition): future.result(timeout=TIMEOUT_SECONDS).offset
                for tp, future in futures.items()
            }
            # When a whole request to one leader fails (the broker just died), librdkafka answers
            # its partitions with no offset (-1001) instead of an error: no answer, never "0".
            unanswered = sorted(tp for tp, offset in offsets.items() if offset < 0)
            if unanswered:
                raise _no_offset(*unanswered[0])
            return offsets
        except KafkaException as exc:
            _refresh_leaders(admin, exc, request)
            raise

    # Partitions just created or moving have no leader for a moment (NOT_LEADER_FOR_PARTITION).
    return retrying(ask, doing="listing partition offsets")


def _no_offset(topic: str, partition: int) -> KafkaException:
    return KafkaException(
        KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"{topic}-{partition}'s leader gave no offset")
    )


def _refresh_leaders(
    client: AdminClient | Consumer, exc: KafkaException, request: Iterable[TopicPartition]
) -> None:
    """After a refusal naming a stale or lost leader, ask for the topics' metadata again.

    After a broker restart librdkafka (2.16) keeps sending the leader epoch it cached before, and
    ListOffsets does not refresh it: the broker refuses until the client asks for the topics'
    metadata again (else only the 5-minute refresh mends it). The same for a leader that died: the
    cached one is asked until metadata is."""
    if error_code(exc) not in STALE_LEADER_CODES | {KafkaError.LEADER_NOT_AVAILABLE}:
        return
    with contextlib.suppress(KafkaException):  # the original error is the one to report
        for topic in {tp.topic for tp in request}:
            client.list_topics(topic=topic, timeout=TIMEOUT_SECONDS)


def last_stable_offsets(admin: AdminClient, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """The read_committed end of each partition: everything below it is decided (committed or aborted)."""
    return _list_offsets(admin, partitions, OffsetSpec.latest())


def stable_ends(consumer: Consumer, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """last_stable_offsets, asked through a read_committed `consumer` (its ListOffsets carry its
    isolation level) instead of the admin client, for a caller that asks thousands of partitions
    again and again. The admin client's list_offsets makes a concurrent.futures.Future per
    partition: in a 10,000-partition flow the lag read's 10,000 every 5 s were 45% of the driver's
    Python time (py-spy). The consumer answers a list per call, REQUEST_PARTITIONS a call, the
    calls one after another under one TIMEOUT_SECONDS bound."""
    request = [TopicPartition(topic, partition, OFFSET_END) for topic, partition in partitions]
    if not request:
        return {}

    def ask() -> dict[Partition, int]:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        ends: dict[Partition, int] = {}
        try:
            for chunk in _chunks(request):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
                for tp in consumer.offsets_for_times(list(chunk), timeout=remaining):
                    if tp.error is not None:
                        raise partition_error(tp.error, tp.topic, tp.partition)
                    if tp.offset < 0:  # no answer from its leader: never read as "0"
                        raise _no_offset(tp.topic, tp.partition)
                    ends[(tp.topic, tp.partition)] = tp.offset
        except KafkaException as exc:
            _refresh_leaders(consumer, exc, request)
            raise
        return ends

    return retrying(ask, doing="listing partition offsets")


class PendingOffsets:
    """Partition ends asked without waiting for them: whatever has come back when the caller looks.

    For a loop that must not stop for a broker's answer (a copy task's): a leader that died
    answers no sooner than the request's timeout, and the loop looks again next time.
    """

    def __init__(self, futures: Mapping[TopicPartition, Future[Any]]) -> None:
        self._futures = futures

    def answered(self) -> dict[Partition, int]:
        """The ends answered by now; a partition not answered yet, or answered with an error (its
        leader gone, an epoch the client cached before a restart), is absent."""
        found: dict[Partition, int] = {}
        for tp, future in self._futures.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                offset = future.result().offset
                if offset >= 0:  # -1001: the whole request to its leader failed
                    found[(tp.topic, tp.partition)] = offset
        return found

    def answered_epochs(self) -> dict[Partition, int]:
        """The source leader epoch each answer came with, where it came with one."""
        found: dict[Partition, int] = {}
        for tp, future in self._futures.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                epoch = getattr(future.result(), "leader_epoch", None)
                if epoch is not None and epoch >= 0:
                    found[(tp.topic, tp.partition)] = int(epoch)
        return found

    def failed(self) -> bool:
        """Whether any partition is unanswered by now or was answered with an error or no offset:
        the client may be asking a leader that died, or with an epoch it cached before a restart,
        and only a client that asks for metadata again mends that."""
        return any(
            not future.done() or future.exception() is not None or future.result().offset < 0
            for future in self._futures.values()
        )


def ask_last_stable_offsets(admin: AdminClient, partitions: Iterable[Partition]) -> PendingOffsets:
    """last_stable_offsets, asked now and answered later (PendingOffsets); librdkafka sends a
    request per leader for each REQUEST_PARTITIONS of them."""
    request = {TopicPartition(topic, partition): OffsetSpec.latest() for topic, partition in partitions}
    if not request:
        return PendingOffsets({})
    try:
        futures = _ask_list_offsets(admin, request, IsolationLevel.READ_COMMITTED)
    except KafkaException:
        return PendingOffsets({})  # not even queued (the client is closing): nothing answered
    return PendingOffsets(futures)


def high_watermarks(admin: AdminClient, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """The end of each partition, open transactions' records included: it moves whenever anyone writes."""
    return _list_offsets(admin, partitions, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)


def earliest_offsets(admin: AdminClient, partitions: Iterable[Partition]) -> dict[Partition, int]:
    return _list_offsets(admin, partitions, OffsetSpec.earliest())


def committed_positions(consumer: Consumer, partitions: Iterable[Partition]) -> dict[Partition, int]:
    """The group's committed offsets; partitions without one are absent.

    The consumer must be read_committed: then the broker answers only once no transactional
    commit of these offsets is pending (KIP-447 require_stable).
    """
    return {
        partition: offset for partition, (offset, _) in committed_with_metadata(consumer, partitions).items()
    }


def committed_with_metadata(
    consumer: Consumer, partitions: Iterable[Partition]
) -> dict[Partition, tuple[int, str]]:
    """committed_positions, with each offset's metadata string ("" if none)."""
    request = [TopicPartition(topic, partition) for topic, partition in partitions]
    if not request:
        return {}

    def ask() -> list[TopicPartition]:
        deadline = time.monotonic() + TIMEOUT_SECONDS  # for the whole read, however many requests
        answer: list[TopicPartition] = []
        for chunk in _chunks(request):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaException(
                    KafkaError(KafkaError._TIMED_OUT)
                )  # librdkafka's code for its own timeout
            result = consumer.committed(list(chunk), timeout=remaining)
            # Per-partition errors come back inside the answer, not raised: a partition whose offset
            # could not be read has an unknown position, not none (asked again, then raised).
            failed = next((tp for tp in result if tp.error is not None), None)
            if failed is not None:
                raise partition_error(failed.error, failed.topic, failed.partition)
            if len(result) != len(chunk):
                raise KafkaException(
                    KafkaError(KafkaError._PARTIAL, "not every partition's offset came back")
                )
            answer.extend(result)
        return answer

    result = retrying(ask, doing="reading committed positions")
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in result if tp.offset >= 0}


def commit_positions(consumer: Consumer, positions: Mapping[Partition, int]) -> None:
    offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in positions.items()]
    if not offsets:
        return
    retrying(
        lambda: consumer.commit(offsets=offsets, asynchronous=False),
        doing="committing positions",
        only=COORDINATOR_CODES,
    )
