"""The loop side of mirror.kafka.packing_producer: records into aiokafka's batches, per partition.

Runs on the process's event loop only. Records arrive in chunks, in the order they were produced;
each partition's go into aiokafka's accumulator in that order: at once, into a batch of their own
(mirror.kafka.partition_batch) or the partition's still queued and open; else through a chain of
its own that waits for the queued batch to go. Every batch's outcome is reported through the
callback the producer gave, from the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Collection, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaError

from mirror.kafka.aiokafka_terms import kafka_error
from mirror.kafka.partition_batch import PartitionBatch, RecordsBuilder
from mirror.kafka.produced import Produced, fill_batch

PLACED_KEYS = 1 << 16  # keys whose partition is remembered
_NO_OFFSET = "the target acknowledged the batch without its offset (duplicate sequence number)"

# (records, the error that failed them or None, the first one's offset when delivered)
Report = Callable[[Sequence[Produced], KafkaError | None, int], None]


class PartitionSender:
    """Appends each chunk's records to aiokafka's batches (at once, or through a chain per
    partition), and reports every record's outcome through `report` once its batch is answered
    (or failed before)."""

    def __init__(self, producer: AIOKafkaProducer, report: Report) -> None:
        self._producer = producer
        self._report = report
        self._partition = DefaultPartitioner()
        self._placed: dict[tuple[str, int, bytes], int] = {}  # (topic, partitions, key) -> partition
        self._tracked: set[str] = set()  # the topics aiokafka keeps metadata of
        # Per partition with records on their way to aiokafka: the task that appends them, and
        # the records it has yet to take.
        self._chains: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._waiting: dict[tuple[str, int], list[Produced]] = {}
        self._delivering: set[asyncio.Future[object]] = set()  # chains' batches not yet answered
        self._loop = asyncio.get_running_loop()
        self._partitions: dict[tuple[str, int], AioTopicPartition] = {}
        self._unanswered = 0  # batches appended at once (PartitionBatch), not yet answered
        self._all_answered: asyncio.Future[None] | None = None  # what answered() waits on for them

    async def track(self, topics: Collection[str]) -> None:
        """The topics it will write, in one metadata request now: else each chunk that brings new
        ones asks again for every topic so far, and a load reaching a thousand topics a few at a
        time asked for them all dozens of times, each answer parsed in Python."""
        self._tracked |= set(topics)
        with contextlib.suppress(AioKafkaError):  # send() asks again for any it lacks
            await self._producer.client.set_topics(sorted(self._tracked))

    async def send(self, records: list[Produced]) -> None:
        """Hand a chunk's records to their partitions' chains; returns before they are appended."""
        topics = {record.topic for record in records}
        if not topics <= self._tracked:
            # aiokafka asks for a topic's metadata when it first meets it, one request per topic:
            # a task starting on a thousand topics waited a minute before its first commit. Every
            # new topic of a chunk comes in one request instead.
            await self.track(topics)
        by_partition: dict[tuple[str, int], list[Produced]] = {}
        known: dict[str, list[int]] = {}  # partitions per topic, for records placed by key
        for record in records:
            if record.partition < 0:
                # The offsets records, one per moved partition at every commit: only a topic not
                # yet asked about in this chunk awaits anything, not a coroutine per record.
                try:
                    partitions = known.get(record.topic)
                    if partitions is None:
                        partitions = known[record.topic] = sorted(
                            await self._producer.partitions_for(record.topic)
                        )
                    record.partition = self._by_key(record, partitions)
                except Exception as exc:  # noqa: BLE001 - reported as its delivery error
                    self._report([record], kafka_error(exc), -1)
                    continue
            by_partition.setdefault((record.topic, record.partition), []).append(record)
        loop = asyncio.get_running_loop()
        appendable = self._appendable(topics)
        for key, group in by_partition.items():
            waiting = self._waiting.get(key)
            if waiting is not None:  # the partition's chain is running: its next batch takes these
                waiting.extend(group)
                continue
            left = self._append_now(key, group) if key[1] in appendable.get(key[0], ()) else group
            if not left:
                continue
            # aiokafka queues one batch per partition at a time: a partition's next batch waits
            # for its last to go out. Waiting here would hold every other partition behind it (a
            # 5,000-partition catch-up took 22 s a transaction that way, against 0.3 s); each
            # partition waits in a chain of its own instead.
            self._waiting[key] = left
            chain = loop.create_task(self._chain(key))
            self._chains[key] = chain
            chain.add_done_callback(functools.partial(self._chain_ended, key))

    def _appendable(self, topics: Collection[str]) -> dict[str, Collection[int]]:
        """The partitions of `topics` a batch may go to aiokafka's accumulator for at once, as
        send_batch would let it after its checks: the producer open and not failed, in a
        transaction if it is transactional, the partition in its metadata. Empty if any check
        fails: the chains then meet the failure in send_batch, which names it."""
        accumulator, transactions = self._producer._message_accumulator, self._producer._txn_manager
        if accumulator._closed or accumulator._exception is not None:
            return {}
        transactional = transactions is not None and transactions.transactional_id is not None
        if transactional and not transactions.is_in_transaction():
            return {}
        cluster = self._producer.client.cluster
        return {topic: cluster.partitions_for_topic(topic) or () for topic in topics}

    def _append_now(self, key: tuple[str, int], records: list[Produced]) -> list[Produced]:
        """Append the first batch of `records` to the partition's queue in aiokafka's accumulator
        now, if that queue is empty (add_batch's own condition); the records left for a chain.

        The steady load at 10,000 partitions gives most partitions a record or two a
        transaction: each came through a task of its own and two coroutines (send_batch,
        add_batch), and a shield over its future. Without them the loop's CPU per one-record
        batch fell from 60 to 37 us (measured offline on aiokafka's accumulator, handlers and
        encoders, 2,500 partitions, no sockets); a PartitionBatch, which reports its outcome
        itself, takes it lower still. What _append_batch does for add_batch is done here: the
        partition joins the transaction, the batch is queued and the sender woken; the sender
        numbers the batch when it drains it, as any other."""
        accumulator = self._producer._message_accumulator
        tp = self._partitions.get(key)
        if tp is None:
            tp = self._partitions[key] = AioTopicPartition(*key)
        queued = accumulator._batches.get(tp)
        if queued:
            # A batch still queued (not yet in a request) takes them while it is open, as aiokafka
            # fills its own: a thin transaction comes in two hand-overs (CHUNK_RECORDS), and a
            # partition with records in both took a chain and a second batch. A batch closed (by
            # the commit's flush, or sent and queued again) or not ours is followed by a chain,
            # which waits for it to drain, in order.
            last = queued[-1]
            if type(last) is PartitionBatch and not last.closed():
                return records[last.take(records) :]
            return records
        transactions = self._producer._txn_manager
        transactional = transactions is not None and transactions.transactional_id is not None
        try:
            builder = RecordsBuilder(accumulator._compression_type, transactional, accumulator._batch_size)
            end = builder.fill(records)
        except Exception:  # noqa: BLE001 - the chain meets it again and reports it
            return records
        if end == 0:
            return records
        try:
            if transactions is not None:
                transactions.maybe_add_partition_to_txn(tp)
            batch = PartitionBatch(
                tp,
                builder,
                accumulator._batch_ttl,
                self._loop,
                records=records[:end],
                on_answer=self._answered,
            )
            accumulator._batches[tp].append(batch)
            if not accumulator._waiter_future.done():
                accumulator._waiter_future.set_result(None)
        except Exception:  # noqa: BLE001 - raised here it would end the producer's worker; the chain reports it
            return records
        self._unanswered += 1
        return records[end:]

    def _answered(self, records: Sequence[Produced], error: BaseException | None, base: int) -> None:
        """A PartitionBatch's outcome, once."""
        self._unanswered -= 1
        self._outcome(records, error, base)
        waiting = self._all_answered
        if self._unanswered == 0 and waiting is not None and not waiting.done():
            waiting.set_result(None)  # after the reports: answered() returns once they are in

    async def appended(self) -> None:
        """Every record handed over so far is in aiokafka's accumulator (or reported failed):
        a call that follows, a commit say, covers them."""
        if self._chains:
            await asyncio.wait(list(self._chains.values()))

    async def answered(self) -> None:
        """Every batch appended so far has its answer (and its records their reports)."""
        if self._unanswered:
            if self._all_answered is None or self._all_answered.done():  # done: an earlier commit's
                self._all_answered = self._loop.create_future()
            await asyncio.shield(self._all_answered)  # a caller giving up leaves it for the next
        if self._delivering:
            await asyncio.wait(list(self._delivering))

    def cancel(self) -> None:
        """Stop appending: the producer is being stopped."""
        for chain in list(self._chains.values()):
            chain.cancel()

    async def _chain(self, key: tuple[str, int]) -> None:
        """Append the partition's records as they come. A batch waits in aiokafka's add_batch for
        the partition's last one to go into a request (bounded, and refused once the sender has
        failed); what comes meanwhile gathers for the batch after it. So any number of hand-overs
        make at most two batches waiting, where a batch per hand-over went out one a request and
        a partition handed records K times waited K requests."""
        while self._waiting[key]:
            records, self._waiting[key] = self._waiting[key], []
            await self._send_partition(key[0], key[1], records)
        del self._waiting[key]

    def _chain_ended(self, key: tuple[str, int], ended: asyncio.Task[None]) -> None:
        if self._chains.get(key) is not ended:
            return  # it ended as it should, and a new chain has the partition
        del self._chains[key]
        left = self._waiting.pop(key, None)  # records only if it was cancelled or failed
        if left and not ended.cancelled():
            self._report(left, kafka_error(ended.exception()), -1)  # type: ignore[arg-type]

    def _by_key(self, record: Produced, partitions: list[int]) -> int:
        """The partition of `partitions` (its topic's, sorted) the record's key places it in."""
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

    async def _send_partition(self, topic: str, partition: int, records: list[Produced]) -> None:
        producer = self._producer
        start = 0
        while start < len(records):
            try:
                batch, end = fill_batch(producer.create_batch(), records, start)
            except Exception as exc:  # noqa: BLE001 - a record aiokafka cannot encode
                self._report(records[start:], kafka_error(exc), -1)
                return
            if end == start:  # aiokafka 0.14 takes any first record; this keeps the loop finite if not
                self._report(
                    records[start : start + 1], KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"), -1
                )
                start += 1
                continue
            chunk = records[start:end]
            start = end
            try:
                delivered = await producer.send_batch(batch, topic, partition=partition)
            except Exception as exc:  # noqa: BLE001 - reported as the records' delivery error
                self._report(chunk, kafka_error(exc), -1)
                continue
            delivered.add_done_callback(lambda outcome, chunk=chunk: self._delivered(outcome, chunk))
            self._delivering.add(delivered)  # after _delivered: it has run by the time this goes
            delivered.add_done_callback(self._delivering.discard)

    def _delivered(self, outcome: asyncio.Future[object], records: list[Produced]) -> None:
        """A chain's batch answered (aiokafka's own batch, through its future)."""
        if outcome.cancelled():
            self._report(records, KafkaError(KafkaError._PURGE_QUEUE, "purged"), -1)
        elif (error := outcome.exception()) is not None:
            self._outcome(records, error, -1)
        else:
            self._outcome(records, None, outcome.result().offset)  # type: ignore[attr-defined]

    def _outcome(self, records: Sequence[Produced], error: BaseException | None, base: int) -> None:
        if error is not None:
            self._report(records, kafka_error(error), -1)
        elif base < 0:
            # aiokafka takes a DUPLICATE_SEQUENCE_NUMBER answer for success and resolves the batch
            # with the broker's offset, -1: written, but where is unknown. Reported as offsets -1,
            # 0, 1... they would feed the offset syncs and the re-created-topic check; as a delivery
            # error the transaction aborts and its records are copied again from the committed
            # position.
            self._report(records, KafkaError(KafkaError.DUPLICATE_SEQUENCE_NUMBER, _NO_OFFSET), -1)
        else:
            self._report(records, None, base)
