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
chunks, in order, and the loop appends them to one batch per partition; delivery reports come
back to the caller's thread, where poll() and flush() hand them to the `on_delivery` callbacks,
as librdkafka's do. Every transactional call waits on the loop, bounded: past its bound the
producer counts as stuck (ProducerStuckError) and its owner makes a new one, whose
initialisation fences it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from mirror.errors import ProducerStuckError
from mirror.kafka.aiokafka_terms import kafka_error
from mirror.kafka.event_loop import process_loop
from mirror.kafka.produced import Delivered, Produced, fill_batch

# A chunk goes to the loop once this many records wait, and at every flush() (and, without a
# transaction, every poll()): a transaction's records are readable only once it commits, so
# holding a thin load's records until the commit's flush puts each partition's in one batch,
# while a catch-up's stream out as they come.
CHUNK_RECORDS = 2_000
BATCH_BYTES = 512 * 1024
GRACE_SECONDS = 5.0  # past a call's own timeout, before the producer counts as stuck
STOP_SECONDS = 5.0
PLACED_KEYS = 1 << 16  # keys whose partition is remembered
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
        self._settled = threading.Condition()
        self._broken: KafkaError | None = None  # unusable for anything: stuck, closed, failed fatally
        # A delivery failed: no transactional call may follow (the task reads the failure from the
        # delivery reports first, so that a record too large or refused is named, not fenced).
        self._failed: KafkaError | None = None
        self._partition = DefaultPartitioner()
        self._placed: dict[tuple[str, int, bytes], int] = {}  # (topic, partitions, key) -> partition
        self._queue: asyncio.Queue[tuple[str, Any, asyncio.Future[Any] | None]] | None = None
        self._producer: AIOKafkaProducer | None = None
        self._tracked: set[str] = set()  # the topics aiokafka keeps metadata of
        # Per partition with records on their way to aiokafka: the task that appends them, and
        # the records it has yet to take.
        self._chains: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._waiting: dict[tuple[str, int], list[Produced]] = {}
        self._delivering: set[asyncio.Future[Any]] = set()  # batches appended and not yet answered
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
        if self._delivering:
            await asyncio.wait(list(self._delivering))
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
            future.cancel()
            self._broken = KafkaError(KafkaError._FATAL, f"{doing}: stuck", fatal=True)
            raise ProducerStuckError(
                f"{doing}: aiokafka did not return {timeout + GRACE_SECONDS:g}s after the call; "
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
        producer = AIOKafkaProducer(
            **options,
            # The chunks handed over are the linger: a batch waits for nothing once appended.
            linger_ms=0,
            max_batch_size=BATCH_BYTES,
            enable_idempotence=True,
            acks="all",
            transactional_id=transactional_id,
        )
        try:
            await producer.start()  # a transactional id is initialised here, fencing older holders
            if topics:
                # The topics it will write, in one metadata request now: else each chunk that
                # brings new ones asks again for every topic so far, and a load reaching a
                # thousand topics a few at a time asked for them all dozens of times, each answer
                # parsed in Python.
                self._tracked = set(topics)
                with contextlib.suppress(AioKafkaError):  # _send asks again for any it lacks
                    await producer.client.set_topics(sorted(self._tracked))
        except BaseException:  # the start's bound too: a producer started and never stopped leaks
            await producer.stop()
            raise
        self._producer = producer
        self._queue = asyncio.Queue()
        self._worker = asyncio.get_running_loop().create_task(self._work(self._queue, producer))

    async def _stop(self, producer: AIOKafkaProducer) -> None:
        if self._worker is not None:
            self._worker.cancel()
        for chain in list(self._chains.values()):
            chain.cancel()
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
        self, queue: asyncio.Queue[tuple[str, Any, asyncio.Future[Any] | None]], producer: AIOKafkaProducer
    ) -> None:
        """Chunks and calls, one at a time in the order they came: a partition's records keep it."""
        while True:
            kind, payload, done = await queue.get()
            if kind == "records":
                await self._send(producer, payload)
                continue
            assert done is not None  # noqa: S101 - calls always come with one
            try:
                await self._appended()
                result = await payload(producer)
            except Exception as exc:  # noqa: BLE001 - handed to the waiting caller
                if not done.done():  # its caller may have given up on it
                    done.set_exception(exc)
            else:
                if not done.done():
                    done.set_result(result)

    async def _send(self, producer: AIOKafkaProducer, records: list[Produced]) -> None:
        topics = {record.topic for record in records}
        if not topics <= self._tracked:
            # aiokafka asks for a topic's metadata when it first meets it, one request per topic:
            # a task starting on a thousand topics waited a minute before its first commit. Every
            # new topic of a chunk comes in one request instead.
            self._tracked |= topics
            with contextlib.suppress(AioKafkaError):  # a topic still unknown fails its records below
                await producer.client.set_topics(sorted(self._tracked))
        by_partition: dict[tuple[str, int], list[Produced]] = {}
        known: dict[str, list[int]] = {}  # partitions per topic, for records placed by key
        for record in records:
            if record.partition < 0:
                try:
                    record.partition = await self._by_key(producer, record, known)
                except Exception as exc:  # noqa: BLE001 - reported as its delivery error
                    self._report([record], kafka_error(exc))
                    continue
            by_partition.setdefault((record.topic, record.partition), []).append(record)
        loop = asyncio.get_running_loop()
        for key, group in by_partition.items():
            waiting = self._waiting.get(key)
            if waiting is not None:  # the partition's chain is running: its next batch takes these
                waiting.extend(group)
                continue
            # aiokafka queues one batch per partition at a time: a partition's next batch waits
            # for its last to go out. Waiting here would hold every other partition behind it (a
            # 5,000-partition catch-up took 22 s a transaction that way, against 0.3 s); each
            # partition waits in a chain of its own instead.
            self._waiting[key] = group
            chain = loop.create_task(self._chain(producer, key))
            self._chains[key] = chain
            chain.add_done_callback(functools.partial(self._chain_ended, key))

    async def _chain(self, producer: AIOKafkaProducer, key: tuple[str, int]) -> None:
        """Append the partition's records as they come. A batch waits in aiokafka's add_batch for
        the partition's last one to go into a request (bounded, and refused once the sender has
        failed); what comes meanwhile gathers for the batch after it. So any number of hand-overs
        make at most two batches waiting, where a batch per hand-over went out one a request and
        a partition handed records K times waited K requests."""
        while self._waiting[key]:
            records, self._waiting[key] = self._waiting[key], []
            await self._send_partition(producer, key[0], key[1], records)
        del self._waiting[key]

    def _chain_ended(self, key: tuple[str, int], ended: asyncio.Task[None]) -> None:
        if self._chains.get(key) is not ended:
            return  # it ended as it should, and a new chain has the partition
        del self._chains[key]
        left = self._waiting.pop(key, None)  # records only if it was cancelled or failed
        if left and not ended.cancelled():
            self._report(left, kafka_error(ended.exception()))  # type: ignore[arg-type]

    async def _appended(self) -> None:
        """Every record handed over so far is in aiokafka's accumulator (or reported failed):
        a call that follows, a commit say, covers them."""
        if self._chains:
            await asyncio.wait(list(self._chains.values()))

    async def _by_key(self, producer: AIOKafkaProducer, record: Produced, known: dict[str, list[int]]) -> int:
        if record.topic not in known:
            known[record.topic] = sorted(await producer.partitions_for(record.topic))
        partitions = known[record.topic]
        if record.key is None:  # a partition at random
            return int(self._partition(None, partitions, partitions))
        # The offsets topic's keys come back every commit, one per moved partition, and murmur2
        # in Python was 3% of a 10,000-partition copy's samples: each key is hashed once.
        placed = (record.topic, len(partitions), record.key)
        partition = self._placed.get(placed)
        if partition is None:
            if len(self._placed) >= PLACED_KEYS:
                self._placed.clear()
            partition = self._placed[placed] = int(self._partition(record.key, partitions, partitions))
        return partition

    async def _send_partition(
        self, producer: AIOKafkaProducer, topic: str, partition: int, records: list[Produced]
    ) -> None:
        start = 0
        while start < len(records):
            try:
                batch, end = fill_batch(producer.create_batch(), records, start)
            except Exception as exc:  # noqa: BLE001 - a record aiokafka cannot encode
                self._report(records[start:], kafka_error(exc))
                return
            if end == start:  # aiokafka 0.14 takes any first record; this keeps the loop finite if not
                self._report(
                    records[start : start + 1], KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large")
                )
                start += 1
                continue
            chunk = records[start:end]
            start = end
            try:
                delivered = await producer.send_batch(batch, topic, partition=partition)
            except Exception as exc:  # noqa: BLE001 - reported as the records' delivery error
                self._report(chunk, kafka_error(exc))
                continue
            delivered.add_done_callback(lambda outcome, chunk=chunk: self._batch_done(outcome, chunk))
            self._delivering.add(delivered)  # after _batch_done: it has run by the time this goes
            delivered.add_done_callback(self._delivering.discard)

    def _batch_done(self, outcome: asyncio.Future[Any], records: list[Produced]) -> None:
        if outcome.cancelled():
            self._report(records, KafkaError(KafkaError._PURGE_QUEUE, "purged"))
        elif outcome.exception() is not None:
            self._report(records, kafka_error(outcome.exception()))  # type: ignore[arg-type]
        else:
            self._report(records, None, outcome.result().offset)

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
        with self._settled:
            self._outstanding -= len(records)
            self._settled.notify_all()


# A copy task's producer: librdkafka's, or this one.
CopyProducer = Producer | PackingProducer
