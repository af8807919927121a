"""PartitionSender's two ways into aiokafka's accumulator: a partition with nothing queued takes its
batch at once, one with a batch still queued gets a chain that waits for it to drain. Built on
aiokafka's own accumulator and transaction manager, with no broker: what is pinned is which batch
is queued when, and in which order the records come back reported."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from aiokafka.cluster import ClusterMetadata
from aiokafka.errors import KafkaConnectionError
from aiokafka.producer.message_accumulator import MessageAccumulator
from aiokafka.producer.transaction_manager import TransactionManager
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.structs import PartitionMetadata, TopicPartition
from confluent_kafka import KafkaError

from bench.loop_cost import OfflineProducer
from mirror.kafka.partition_sender import PartitionSender
from mirror.kafka.produced import Produced, fill_batch

TOPIC = "t"


Reported = list[tuple[bytes | None, KafkaError | None, int]]


def _sender(transactional_id: str | None = "task:0") -> tuple[PartitionSender, OfflineProducer, Reported]:
    cluster = ClusterMetadata()
    cluster._partitions[TOPIC] = {p: PartitionMetadata(TOPIC, p, 1, [1], [1], None) for p in range(2)}
    transactions = TransactionManager(transactional_id, 60_000)
    transactions.set_pid_and_epoch(7, 0)
    accumulator = MessageAccumulator(
        cluster, 512 * 1024, 0, 30.0, txn_manager=transactions, loop=asyncio.get_running_loop()
    )
    producer = OfflineProducer(accumulator, transactions)
    reported: Reported = []

    def report(records: Sequence[Produced], error: KafkaError | None, base: int) -> None:
        reported.extend(
            (record.value, error, -1 if error else base + index) for index, record in enumerate(records)
        )

    sender = PartitionSender(producer, report)  # type: ignore[arg-type]
    sender._tracked = {TOPIC}
    return sender, producer, reported


def _record(partition: int, value: bytes) -> Produced:
    return Produced(TOPIC, partition, b"k", value, 1_700_000_000_000, None, None)


def _drain_and_answer(producer: OfflineProducer, partition: int, base_offset: int) -> Any:
    """What aiokafka's sender does with the partition's first queued batch: number it, then its
    produce response lands."""
    batch = producer._message_accumulator._pop_batch(TopicPartition(TOPIC, partition))
    batch.done(base_offset)
    return batch


def test_a_partition_with_nothing_queued_takes_its_batch_at_once_and_joins_the_transaction() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"a"), _record(1, b"b"), _record(0, b"c")])
        # Queued during send() itself: no chain, nothing left to await.
        assert sender._chains == {}
        queued = producer._message_accumulator._batches
        assert [len(queued[TopicPartition(TOPIC, p)]) for p in (0, 1)] == [1, 1]
        joining = producer._txn_manager.partitions_to_add()
        assert joining == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
        _drain_and_answer(producer, 0, 40)
        _drain_and_answer(producer, 1, 7)
        await sender.answered()
        assert sorted(reported) == [(b"a", None, 40), (b"b", None, 7), (b"c", None, 41)]
        assert sender._delivering == set()

    asyncio.run(run())


def test_records_for_a_partition_whose_batch_is_still_queued_join_it_until_it_is_drained() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"first")])
        await sender.send([_record(0, b"second"), _record(1, b"other")])
        assert sender._chains == {}
        tp = TopicPartition(TOPIC, 0)
        assert [batch.record_count for batch in producer._message_accumulator._batches[tp]] == [2]
        _drain_and_answer(producer, 0, 100)
        await sender.send([_record(0, b"third")])  # drained: a batch of its own, at once
        assert sender._chains == {}
        _drain_and_answer(producer, 0, 102)
        _drain_and_answer(producer, 1, 7)
        await sender.answered()
        assert reported == [
            (b"first", None, 100),
            (b"second", None, 101),
            (b"third", None, 102),
            (b"other", None, 7),
        ]
        assert producer._txn_manager.sequence_number(tp) == 3

    asyncio.run(run())


def test_records_for_a_partition_whose_queued_batch_is_closed_follow_it_in_a_batch_of_their_own() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"first")])
        producer._message_accumulator._batches[TopicPartition(TOPIC, 0)][
            0
        ]._builder.close()  # as a commit's flush does
        await sender.send([_record(0, b"second")])
        await sender.send([_record(0, b"third")])  # joins the chain's waiting records
        tp = TopicPartition(TOPIC, 0)
        assert list(sender._chains) == [(TOPIC, 0)]
        await asyncio.sleep(0)
        assert len(producer._message_accumulator._batches[tp]) == 1  # the chain waits for it to drain
        _drain_and_answer(producer, 0, 100)
        await sender.appended()
        assert [batch.record_count for batch in producer._message_accumulator._batches[tp]] == [2]
        _drain_and_answer(producer, 0, 101)
        await sender.answered()
        assert reported == [(b"first", None, 100), (b"second", None, 101), (b"third", None, 102)]

    asyncio.run(run())


def test_outside_a_transaction_the_records_are_refused_with_aiokafkas_reason() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()  # no begin_transaction
        await sender.send([_record(0, b"a")])
        await sender.appended()
        assert producer._message_accumulator._batches.get(TopicPartition(TOPIC, 0)) is None
        assert [(value, offset) for value, _, offset in reported] == [(b"a", -1)]
        error = reported[0][1]
        assert error is not None and "transaction" in error.str(), error

    asyncio.run(run())


def test_a_batch_appended_at_once_that_fails_reports_its_records_failed() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(1, b"a"), _record(1, b"b")])
        batch = producer._message_accumulator._pop_batch(TopicPartition(TOPIC, 1))
        batch.failure(KafkaConnectionError("the leader went away"))
        await sender.answered()
        assert [(value, offset) for value, _, offset in reported] == [(b"a", -1), (b"b", -1)]
        assert all(error is not None for _, error, _ in reported), reported

    asyncio.run(run())


def test_a_batch_acknowledged_without_its_offset_reports_its_records_failed_not_at_made_up_offsets() -> None:
    """aiokafka resolves a batch the broker answered DUPLICATE_SEQUENCE_NUMBER with offset -1."""

    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"a"), _record(0, b"b"), _record(0, b"c")])
        _drain_and_answer(producer, 0, -1)
        await sender.answered()
        assert [(value, offset) for value, _, offset in reported] == [(b"a", -1), (b"b", -1), (b"c", -1)]
        codes = {error.code() for _, error, _ in reported if error is not None}
        assert codes == {KafkaError.DUPLICATE_SEQUENCE_NUMBER}, reported

    asyncio.run(run())


def test_without_a_transaction_an_idempotent_producer_takes_the_batch_at_once_too() -> None:
    async def run() -> None:
        sender, producer, reported = _sender(transactional_id=None)
        await sender.send([_record(0, b"a")])
        assert sender._chains == {}
        assert producer._txn_manager.partitions_to_add() == set()
        _drain_and_answer(producer, 0, 5)
        await sender.answered()
        assert reported == [(b"a", None, 5)]

    asyncio.run(run())


def test_a_batch_appended_at_once_is_byte_for_byte_the_batch_aiokafka_would_build() -> None:
    async def run() -> None:
        sender, producer, _ = _sender()
        producer._txn_manager.begin_transaction()
        records = [
            Produced(TOPIC, 0, b"k", b"v", 1_700_000_000_000, [("h", b"1"), ("n", None)], None),
            Produced(TOPIC, 0, None, None, 1_700_000_000_005, None, None),
            Produced(TOPIC, 0, b"k2", b"x" * 300, 1_699_999_999_999, [], None),
        ]
        await sender.send(records)
        ours = _drain_and_answer(producer, 0, 0)
        theirs, end = fill_batch(producer.create_batch(), records, 0)
        assert end == 3
        theirs._set_producer_state(7, 0, 0)  # what the drain numbered ours with
        assert bytes(ours.get_data_buffer()) == bytes(theirs._build())

    asyncio.run(run())


def test_a_batch_failed_after_its_answer_is_reported_once() -> None:
    """aiokafka's fail_all() fails every batch it still holds as pending, answered or not."""

    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"a"), _record(1, b"b")])
        _drain_and_answer(producer, 0, 40)  # answered; aiokafka's callback has not run yet
        producer._message_accumulator._pop_batch(TopicPartition(TOPIC, 1))  # in flight
        producer._message_accumulator.fail_all(KafkaConnectionError("the sender died"))
        await sender.answered()
        assert sorted((value, offset) for value, _, offset in reported) == [(b"a", 40), (b"b", -1)]
        assert sender._unanswered == 0

    asyncio.run(run())


def test_a_batch_sent_again_keeps_the_sequence_numbers_it_was_first_given() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"a"), _record(0, b"b")])
        accumulator, tp = producer._message_accumulator, TopicPartition(TOPIC, 0)
        first = accumulator._pop_batch(tp)
        sent = bytes(first.get_data_buffer())
        accumulator.reenqueue(first)  # a retriable error: the sender queues it again
        again = accumulator._pop_batch(tp)
        assert again is first
        assert bytes(again.get_data_buffer()) == sent
        assert DefaultRecordBatch(sent).base_sequence == 0
        assert producer._txn_manager.sequence_number(tp) == 2  # counted once, not per send
        again.done(10)
        await sender.answered()
        assert reported == [(b"a", None, 10), (b"b", None, 11)]

    asyncio.run(run())


def test_a_commit_that_gave_up_waiting_for_answers_can_wait_again() -> None:
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"a")])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sender.answered(), 0.01)  # unanswered: wait_for cancels the wait
        _drain_and_answer(producer, 0, 3)
        await asyncio.wait_for(sender.answered(), 5)
        assert reported == [(b"a", None, 3)]

    asyncio.run(run())


def test_a_record_aiokafka_cannot_encode_stops_a_queued_batch_there_and_only_it_and_those_after_fail() -> (
    None
):
    async def run() -> None:
        sender, producer, reported = _sender()
        producer._txn_manager.begin_transaction()
        await sender.send([_record(0, b"a")])
        unencodable = Produced(TOPIC, 0, b"k", "not bytes", 0, None, None)  # type: ignore[arg-type]
        await sender.send([_record(0, b"b"), unencodable, _record(0, b"d")])
        tp = TopicPartition(TOPIC, 0)
        queued = producer._message_accumulator._batches[tp]
        assert [batch.record_count for batch in queued] == [2]  # a and b: what the batch holds
        _drain_and_answer(producer, 0, 10)
        await sender.appended()
        await sender.answered()
        assert producer._txn_manager.sequence_number(tp) == 2
        assert [(value, offset) for value, _, offset in reported] == [
            (b"a", 10), (b"b", 11), ("not bytes", -1), (b"d", -1)
        ]  # fmt: skip

    asyncio.run(run())
