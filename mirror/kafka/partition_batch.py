"""One partition's batch as mirror.kafka.partition_sender fills it: aiokafka's MessageBatch, told
its outcome once and reporting it straight to the sender.

aiokafka's own batch (a BatchBuilder in a MessageBatch) serves its send() API: a keyword call per
record, a RecordMetadata for the batch's future, and a done-callback (a Handle scheduled on the
loop) for each party that waits on it. mirror holds its records itself and only needs each
batch's outcome, once. At 10,000 partitions a transaction queues thousands of one-record
batches, and those layers were the largest part of the loop's time (py-spy: appending 15%, the
produce answer's batch.done 7%, call_soon 6%).

It is a MessageBatch to aiokafka, which drains, numbers, retries and answers it as any other
(the accumulator, the sender and the transaction manager are unchanged). What it overrides reads
its own builder, and what answers it (done, failure, done_noack) also reports to `on_answer`,
exactly once, whichever comes first: aiokafka's fail_all() can fail a batch already answered.
Written against aiokafka 0.14.0, which the project pins; mirror.kafka.partition_sender uses it
only with the linger of 0 its producer is built with.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.producer.message_accumulator import MessageBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import TopicPartition

from mirror.kafka.produced import Produced

# The batch's records, what failed them (None if acknowledged), and the first one's offset.
OnAnswer = Callable[[Sequence[Produced], BaseException | None, int], None]


class RecordsBuilder:
    """aiokafka's record batch builder (the C one) and the three calls aiokafka makes of a
    batch's builder: close(), closed(), record_count()."""

    __slots__ = ("_buffer", "_built", "_closed", "_count")

    def __init__(self, compression_type: int, transactional: bool, batch_bytes: int) -> None:
        self._built = DefaultRecordBatchBuilder(2, compression_type, transactional, -1, -1, 0, batch_bytes)
        self._count = 0
        self._closed = False
        self._buffer: bytearray | None = None

    def fill(self, records: list[Produced]) -> int:
        """Add as many of `records` as fit, in order; how many the batch holds then. A record the
        C builder refuses raises, and the count still says what it holds: aiokafka numbers the
        batch's sequence from it."""
        append = self._built.append
        for record in records:
            if (
                append(self._count, record.timestamp or None, record.key, record.value, record.headers or [])
                is None
            ):
                self._closed = True  # full, as aiokafka closes its own
                break
            self._count += 1
        return self._count

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        self._built.set_producer_state(producer_id, producer_epoch, base_sequence)

    def build(self) -> bytearray:
        """The batch's bytes, built once: aiokafka asks again on a retry."""
        self._closed = True
        if self._buffer is None:
            self._buffer = self._built.build()
        return self._buffer

    def close(self) -> None:
        self._closed = True

    def closed(self) -> bool:
        return self._closed

    def record_count(self) -> int:
        return self._count


class PartitionBatch(MessageBatch):  # type: ignore[misc]  # aiokafka is Any to mypy (pyproject)
    """A batch of `records` (those `builder` holds) for `tp`, its outcome reported to
    `on_answer` once."""

    def __init__(
        self,
        tp: TopicPartition,
        builder: RecordsBuilder,
        ttl: float,
        loop: asyncio.AbstractEventLoop,
        *,
        records: list[Produced],
        on_answer: OnAnswer,
    ) -> None:
        # MessageBatch's fields, set here rather than by its __init__: it looks the running loop
        # up twice (create_future) for every batch.
        self._tp = tp
        self._builder = builder
        self._ttl = ttl
        self._linger_time = 0.0
        self._ctime = time.monotonic()
        self.future = loop.create_future()  # aiokafka waits on it; nothing reads its result
        self._msg_futures: list[Any] = []  # never grows: append() takes no record
        self._drain_waiter = loop.create_future()
        self._retry_count = 0
        self.records = records
        self._on_answer: OnAnswer | None = on_answer

    @property
    def record_count(self) -> int:
        return self._builder._count

    def append(self, *args: Any, **kwargs: Any) -> None:
        """Takes no record through aiokafka's API (take() adds mirror's): aiokafka's add_message,
        never called on mirror's producer, would start a batch of its own."""
        return None

    def remaining_linger(self) -> None:
        return None  # the producer's linger is 0: drained as soon as its leader is free

    def is_empty(self) -> bool:
        return self._builder._count == 0

    def closed(self) -> bool:
        return self._builder._closed

    def take(self, records: list[Produced]) -> int:
        """Add as many of `records` as fit, while it is queued and open; how many. Its sequence
        numbers are given when it is drained, from the count it has then."""
        before = self._builder._count
        # A record aiokafka cannot encode stops it there: the chain that follows meets it again,
        # in aiokafka's own builder, and reports it.
        with contextlib.suppress(Exception):
            self._builder.fill(records)
        taken: int = self._builder._count - before
        self.records.extend(records[:taken])
        return taken

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        assert not self._drain_waiter.done()  # noqa: S101 - aiokafka's own check: numbered once a drain
        self._builder.set_producer_state(producer_id, producer_epoch, base_sequence)

    def get_data_buffer(self) -> bytearray:
        return self._builder.build()

    def done(
        self, base_offset: int, timestamp: int | None = None, log_start_offset: int | None = None
    ) -> None:
        if not self.future.done():
            self.future.set_result(None)
        self._answer(None, base_offset)

    def done_noack(self) -> None:
        if not self.future.done():
            self.future.set_result(None)
        self._answer(AioKafkaError("the batch was answered without an acknowledgement"), -1)

    def failure(self, exception: BaseException) -> None:
        super().failure(exception)
        if self.future.done() and not self.future.cancelled():
            self.future.exception()  # taken: it is reported below, not left for asyncio to log
        self._answer(exception, -1)

    def _answer(self, error: BaseException | None, base_offset: int) -> None:
        on_answer, self._on_answer = self._on_answer, None
        if on_answer is not None:
            on_answer(self.records, error, base_offset)
