"""A producer that packs every partition a broker leads into one produce request: aiokafka's,
behind the calls the copy path makes of librdkafka's Producer.

librdkafka sends one partition per produce request, at most five in flight per connection
(confluentinc/librdkafka#1700). A copy task whose transaction touches thousands of partitions
with a record or two each waits for thousands of requests at every commit; Kafka's Java producer
(MM2's) and aiokafka send them in a request per broker. The bench's two floors measured the
difference at 10,000 partitions (bench/results/20261127T173646Z-huge-*), and mirror at 1,000:
p99 520 ms against 1,719 ms, MM2's 1,544 (20261127T202506Z-quick). A flow's `copy_producer`
chooses (mirror.runner.copy_producer).

aiokafka runs on asyncio; the copy loop is synchronous. Each process has one event loop in a
thread of its own, serving every PackingProducer in it. A producer's records go to its loop in
chunks, in order, and the loop appends them to one batch per partition (its side is
mirror.kafka.partition_sender); delivery reports come
back to the caller's thread, where poll() and flush() hand them to the `on_delivery` callbacks,
as librdkafka's do. Every transactional call waits on the loop, bounded: past its bound the
producer counts as stuck (ProducerStuckError) and its owner makes a new one, whose
initialisation fences it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from mirror.errors import ProducerStuckError
from mirror.kafka import aiokafka_codecs
from mirror.kafka.aiokafka_terms import kafka_error
from mirror.kafka.event_loop import process_loop
from mirror.kafka.partition_sender import PartitionSender
from mirror.kafka.produced import Delivered, Produced

# A chunk goes to the loop once this many records wait, and at every flush() (and, without a
# transaction, every poll()): a transaction's records are readable only once it commits, so
# holding a thin load's records until the commit's flush puts each partition's in one batch,
# while a catch-up's stream out as they come.
CHUNK_RECORDS = 2_000
BATCH_BYTES = 512 * 1024
GRACE_SECONDS = 5.0  # past a call's own timeout, before the producer counts as stuck
STOP_SECONDS = 5.0
ABORT_REPORTS_SECONDS = 2.0  # aiokafka ends an aborted transaction only after every batch is answered


class PackingProducer:
    """A transactional (or, with no id, idempotent) producer on aiokafka, called like librdkafka's.

    `group_id` is the group send_offsets_to_transaction commits for; the group metadata argument
    librdkafka wants is accepted and not read.
    """

    def __init__(
        self,
        options: Mapping[str, Any],
        transactional_id: str | None,
        *,
        group_id: str | None = None,
        topics: Collection[str] = (),
        doing: str,
        start_seconds: float = 60.0,
    ) -> None:
        self._loop = process_loop()
        self._group_id = group_id
        self._transactional = transactional_id is not None
        self._pending: list[Produced] = []  # produced, not yet handed to the loop
        self._reports: deque[tuple[Sequence[Produced], KafkaError | None, int]] = deque()
        self._outstanding = 0  # handed to the loop, not yet reported
        self._unsettled = 0  # reported on the loop, not yet taken off _outstanding
        self._settled = threading.Condition()
        self._broken: KafkaError | None = None  # unusable for anything: stuck, closed, failed fatally
        # A delivery failed: no transactional call may follow (the task reads the failure from the
        # delivery reports first, so that a record too large or refused is named, not fenced).
        self._failed: KafkaError | None = None
        self._queue: asyncio.Queue[tuple[str, Any, asyncio.Future[Any] | None]] | None = None
        self._producer: AIOKafkaProducer | None = None
        self._sender: PartitionSender | None = None  # the loop's side: records into batches
        self._worker: asyncio.Task[None] | None = None
        self._call(self._start(dict(options), transactional_id, topics), start_seconds, doing)

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        *,
        timestamp: int = 0,
        headers: list[tuple[str, bytes | None]] | None = None,
        on_delivery: Callable[[KafkaError | None, Any], None] | None = None,
    ) -> None:
        if self._broken is not None:
            raise KafkaException(self._broken)
        self._pending.append(Produced(topic, partition, key, value, timestamp, headers, on_delivery))
        if len(self._pending) >= CHUNK_RECORDS:
            self._hand_over()

    def poll(self, timeout: float = 0) -> int:
        """Serve the delivery reports that came in; wait up to `timeout` for one if none had.
        Without a transaction, what was produced goes to the loop now: it is readable as soon as
        it lands, so it waits for neither a full chunk nor a flush."""
        if not self._transactional:
            self._hand_over()
        if not self._reports and timeout > 0:
            with self._settled:
                self._settled.wait_for(lambda: bool(self._reports), timeout)
        return self._serve()

    def flush(self, timeout: float = -1) -> int:
        """Wait until every record produced is reported (their callbacks run here); the number
        still unreported when `timeout` passed."""
        self._hand_over()
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            self._serve()
            with self._settled:
                if self._reports:
                    # Reported since the serve above, and notified before this wait began: waiting
                    # now would sleep until the deadline (a 10,000-partition commit waited 60 s).
                    continue
                if self._outstanding == 0:
                    return 0
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return self._outstanding
                self._settled.wait(remaining if remaining is not None else 1.0)

    def begin_transaction(self) -> None:
        self._transaction_call(lambda p: p.begin_transaction(), 30.0, "beginning a transaction")

    def send_offsets_to_transaction(
        self, offsets: Sequence[TopicPartition], group_metadata: object, timeout: float
    ) -> None:
        del group_metadata  # aiokafka names the group; this producer was told it
        if self._group_id is None:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "no group to commit offsets for"))
        group = self._group_id
        # confluent-kafka commits a metadata string with its C terminator, and reads one back up
        # to the first NUL: without one, the reader takes whatever bytes follow in memory for
        # part of the metadata (44 of 250 reads of aiokafka's commits came back with bytes
        # appended; see librdkafka#4649). Committed as librdkafka does, they read back the same.
        committed = {
            AioTopicPartition(tp.topic, tp.partition): OffsetAndMetadata(
                tp.offset, f"{tp.metadata}\x00" if tp.metadata else ""
            )
            for tp in offsets
        }
        self._transaction_call(
            lambda p: p.send_offsets_to_transaction(committed, group), timeout, "adding offsets"
        )

    def commit_transaction(self, timeout: float = 60.0) -> None:
        self._hand_over()
        self._transaction_call(self._commit, timeout, "committing")

    async def _commit(self, producer: AIOKafkaProducer) -> None:
        """aiokafka commits a transaction one of whose batches failed for good: it only flushes.
        Every batch is answered first, so that a lost record (an offsets record produced after
        the copy task's flush, say) stops the commit instead of being committed around."""
        assert self._sender is not None  # noqa: S101 - started in __init__
        await self._sender.answered()
        if self._failed is not None:
            raise KafkaException(self._failed)
        await producer.commit_transaction()

    def abort_transaction(self, timeout: float = 60.0) -> None:
        """Abort, then serve every report of the aborted records before returning: the caller
        forgets their partitions' state next, and a report served after that would be taken for
        the next transaction's. aiokafka sends what is queued and ends the transaction once every
        batch is answered, so the reports are all in by then."""
        self._hand_over()
        self._transaction_call(lambda p: p.abort_transaction(), timeout, "aborting")
        if self.flush(ABORT_REPORTS_SECONDS) > 0:
            self._broken = KafkaError(KafkaError._FATAL, "aborted records still unreported", fatal=True)
            raise KafkaException(self._broken)

    def close(self) -> None:
        """Stop the producer without waiting for it: what it held open, the next holder of its id
        aborts. Its worker may be stuck in a call that timed out (a commit to a dead coordinator),
        so the stop does not queue behind it."""
        self._pending.clear()
        self._broken = self._broken or KafkaError(KafkaError._DESTROY, "closed", fatal=True)
        if self._producer is not None:
            asyncio.run_coroutine_threadsafe(self._stop(self._producer), self._loop)

    def _hand_over(self) -> None:
        if not self._pending or self._queue is None:
            return
        chunk, self._pending = self._pending, []
        with self._settled:
            self._outstanding += len(chunk)
        self._loop.call_soon_threadsafe(self._queue.put_nowait, ("records", chunk, None))

    def _serve(self) -> int:
        served = 0
        while self._reports:
            records, error, base = self._reports.popleft()
            for index, record in enumerate(records):
                if record.on_delivery is not None:
                    record.on_delivery(error, Delivered(record, -1 if error is not None else base + index))
            served += len(records)
        return served

    @property
    def usable(self) -> bool:
        """False once a delivery failed or the producer broke: its owner makes a new one."""
        return self._broken is None and self._failed is None

    def _transaction_call(
        self, action: Callable[[AIOKafkaProducer], Coroutine[Any, Any, Any]], timeout: float, doing: str
    ) -> None:
        if self._broken is not None or self._failed is not None:
            raise KafkaException(self._broken or self._failed)
        self._call(self._in_order(action), timeout, doing, fatal=True)

    def _call(
        self, work: Coroutine[Any, Any, Any], timeout: float, doing: str, *, fatal: bool = False
    ) -> Any:
        """Run `work` on the loop and wait for it, bounded; aiokafka's errors as librdkafka's."""
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(work, timeout), self._loop)
        try:
            return future.result(timeout + GRACE_SECONDS)
        except FutureTimeout:
            # One exception class (Python 3.11) for both: the call's own bound, met on the loop,
            # and the loop not answering at all.
            ran_out = future.done() and not future.cancelled()
            future.cancel()
            self._broken = KafkaError(KafkaError._FATAL, f"{doing}: stuck", fatal=True)
            raise ProducerStuckError(
                f"{doing}: not done within {timeout:g}s; replacing the producer"
                if ran_out
                else f"{doing}: aiokafka did not return {timeout + GRACE_SECONDS:g}s after the call; "
                "replacing the producer"
            ) from None
        except KafkaException as exc:  # ours, already librdkafka's kind (a failed delivery)
            if exc.args[0].fatal():
                self._broken = exc.args[0]
            raise
        except Exception as exc:  # every aiokafka error becomes librdkafka's kind
            error = kafka_error(exc, fatal=fatal)
            if error.fatal():
                self._broken = error
            raise KafkaException(error) from exc

    async def _start(
        self, options: dict[str, Any], transactional_id: str | None, topics: Collection[str]
    ) -> None:
        aiokafka_codecs.install()  # here, on the process's one loop thread: never two at once
        producer = AIOKafkaProducer(
            **options,
            # The chunks handed over are the linger: a batch waits for nothing once appended.
            linger_ms=0,
            max_batch_size=BATCH_BYTES,
            enable_idempotence=True,
            acks="all",
            transactional_id=transactional_id,
        )
        sender = PartitionSender(producer, self._report)
        try:
            await producer.start()  # a transactional id is initialised here, fencing older holders
            if topics:
                await sender.track(topics)
        except BaseException:  # the start's bound too: a producer started and never stopped leaks
            await producer.stop()
            raise
        self._producer, self._sender = producer, sender
        self._queue = asyncio.Queue()
        self._worker = asyncio.get_running_loop().create_task(self._work(self._queue, producer, sender))

    async def _stop(self, producer: AIOKafkaProducer) -> None:
        if self._worker is not None:
            self._worker.cancel()
        if self._sender is not None:
            self._sender.cancel()
        try:
            await asyncio.wait_for(producer.stop(), STOP_SECONDS)
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - given up: its batches cannot go anywhere
            # stop() waits for the queued batches, which a target that is away never takes. What
            # it would have done last is done without them: the sender cancelled (the cancel
            # reaches the transaction call it waits for), the batches failed, the connections closed.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(producer._sender.close(), STOP_SECONDS)
            producer._message_accumulator.fail_all(KafkaConnectionError("producer closed"))
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(producer.client.close(), STOP_SECONDS)

    async def _in_order(self, action: Callable[[AIOKafkaProducer], Coroutine[Any, Any, Any]]) -> Any:
        """`action` after every chunk handed over before it reached the producer."""
        assert self._queue is not None  # noqa: S101 - started in __init__
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(("call", action, done))
        return await done

    async def _work(
        self,
        queue: asyncio.Queue[tuple[str, Any, asyncio.Future[Any] | None]],
        producer: AIOKafkaProducer,
        sender: PartitionSender,
    ) -> None:
        """Chunks and calls, one at a time in the order they came: a partition's records keep it."""
        while True:
            kind, payload, done = await queue.get()
            if kind == "records":
                await sender.send(payload)
                continue
            assert done is not None  # noqa: S101 - calls always come with one
            try:
                await sender.appended()
                result = await payload(producer)
            except Exception as exc:  # noqa: BLE001 - handed to the waiting caller
                if not done.done():  # its caller may have given up on it
                    done.set_exception(exc)
            else:
                if not done.done():
                    done.set_result(result)

    def _report(self, records: Sequence[Produced], error: KafkaError | None, base: int = -1) -> None:
        if error is not None and self._failed is None:
            # aiokafka fails only the batch, never the transaction: a commit would still take the
            # records that did land (an offsets record or sync lost, with no callback to tell),
            # and the partition's sequence numbers now have a gap every later batch would trip on.
            # No transactional call follows, then: the task aborts and a new producer (fencing
            # this one) carries on. produce() goes on working, so that the failure itself reaches
            # the task through the delivery reports and is named there.
            self._failed = KafkaError(error.code(), f"a delivery failed: {error.str()}", fatal=True)
        self._reports.append((records, error, base))
        # A 10,000-partition commit is answered a batch, so a report, per partition: taking the
        # lock and waking the caller's thread for each held the GIL against the loop thousands of
        # times a commit. The caller is woken once for every report of one turn of the loop.
        if self._unsettled == 0:
            self._loop.call_soon(self._settle)
        self._unsettled += len(records)

    def _settle(self) -> None:
        settled, self._unsettled = self._unsettled, 0
        with self._settled:
            self._outstanding -= settled
            self._settled.notify_all()


# A copy task's producer: librdkafka's, or this one.
CopyProducer = Producer | PackingProducer
