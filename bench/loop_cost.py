"""The event loop's CPU for one copy-task transaction through the packing producer, offline.

    python -m bench.loop_cost
    python -m bench.loop_cost --topics 250 --partitions 10 --transactions 60
    python -m bench.loop_cost --aiokafka-codecs off   # aiokafka's own per-partition codecs

At 10,000 partitions under a thin steady load each copy task's transaction touches some 2,500
partitions with a record or two each, and aiokafka's event loop spends per partition: appending
the batch, building the produce request, reading the answer, reporting the outcome. This drives
that path with no broker and no socket: PartitionSender over aiokafka's own accumulator,
transaction manager and produce handler, a request encoded and its answer decoded as the sender
would, so what it measures is Python CPU alone (the thread's, by getrusage). It prints the median
and the spread over the transactions; the first few warm up and are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
from collections.abc import Sequence
from typing import Any

from aiokafka.cluster import ClusterMetadata
from aiokafka.producer.message_accumulator import MessageAccumulator
from aiokafka.producer.producer import AIOKafkaProducer
from aiokafka.producer.sender import SendProduceReqHandler
from aiokafka.producer.transaction_manager import TransactionManager
from aiokafka.protocol.produce import ProduceRequest_v7, ProduceResponse_v7
from aiokafka.structs import BrokerMetadata, PartitionMetadata, TopicPartition
from confluent_kafka import KafkaError

from mirror.kafka import aiokafka_codecs
from mirror.kafka.packing_producer import BATCH_BYTES, CHUNK_RECORDS
from mirror.kafka.partition_sender import PartitionSender
from mirror.kafka.produced import Produced

WARM_UP = 3
LEADER = 1


class OfflineClient:
    """What PartitionSender and the producer's batch calls read of aiokafka's client."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster

    async def _wait_on_metadata(self, topic: str) -> set[int]:
        return self.cluster.partitions_for_topic(topic) or set()


class OfflineProducer:
    """An AIOKafkaProducer's batch calls over a real accumulator, with no sender or connection
    (also the stand-in of tests/unit/test_partition_sender.py)."""

    create_batch = AIOKafkaProducer.create_batch
    send_batch = AIOKafkaProducer.send_batch
    _partition = AIOKafkaProducer._partition

    def __init__(self, accumulator: MessageAccumulator, transactions: TransactionManager) -> None:
        self.client = OfflineClient(accumulator._cluster)
        self._metadata = accumulator._cluster
        self._message_accumulator = accumulator
        self._txn_manager = transactions
        self._request_timeout_ms = 30_000
        self._key_serializer = self._value_serializer = None


class _Sender:
    """What SendProduceReqHandler reads of aiokafka's Sender."""

    def __init__(self, transactions: TransactionManager) -> None:
        self._txn_manager = transactions
        self._acks = -1
        self._request_timeout_ms = 30_000
        self._retry_backoff = 0.1
        self.client = None


def _cluster(topics: int, partitions: int) -> ClusterMetadata:
    cluster = ClusterMetadata()
    cluster._brokers[LEADER] = BrokerMetadata(LEADER, "127.0.0.1", 9092, None)
    for t in range(topics):
        name = f"topic-{t:04d}"
        cluster._partitions[name] = {
            p: PartitionMetadata(name, p, LEADER, [LEADER], [LEADER], None) for p in range(partitions)
        }
        cluster._broker_partitions[LEADER].update(TopicPartition(name, p) for p in range(partitions))
    return cluster


def _thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


async def _answer_every_batch(
    accumulator: MessageAccumulator, sender: PartitionSender, stub: _Sender, base: int
) -> float:
    """Drain, request, answer, until every batch is answered; the CPU spent making the answers
    (the broker's part, left out of the measure)."""
    transactions = stub._txn_manager
    broker = 0.0
    while accumulator._batches or sender._chains:
        for tp in list(transactions.partitions_to_add()):  # AddPartitionsToTxn answered
            transactions.partition_added(tp)
        nodes, _ = accumulator.drain_by_nodes(ignore_nodes=set(), muted_partitions=set())
        for batches in nodes.values():
            handler = SendProduceReqHandler(stub, batches)
            request = handler.create_request().build(ProduceRequest_v7)
            request.encode()
            started = _thread_cpu()
            answer = ProduceResponse_v7(
                [(topic, [(p, 0, base, -1, 0) for p, _ in parts]) for topic, parts in request.topics], 0
            ).encode()
            broker += _thread_cpu() - started
            handler.handle_response(ProduceResponse_v7.decode(answer))
        await asyncio.sleep(0)  # the chains and the batches' callbacks run
    await sender.answered()
    return broker


async def _measure(topics: int, partitions: int, transactions_count: int) -> list[float]:
    cluster = _cluster(topics, partitions)
    transactions = TransactionManager("loop-cost", 60_000)
    transactions.set_pid_and_epoch(7, 0)
    accumulator = MessageAccumulator(
        cluster, BATCH_BYTES, 0, 30.0, txn_manager=transactions, loop=asyncio.get_running_loop()
    )
    failed: list[KafkaError] = []

    def report(records: Sequence[Produced], error: KafkaError | None, base: int) -> None:
        if error is not None:
            failed.append(error)

    producer: Any = OfflineProducer(accumulator, transactions)
    sender = PartitionSender(producer, report)
    sender._tracked = set(cluster._partitions)
    stub = _Sender(transactions)
    spent: list[float] = []
    for n in range(WARM_UP + transactions_count):
        transactions.begin_transaction()
        records = [
            Produced(f"topic-{t:04d}", p, b"key-%d" % p, b"v" * 100, 1_700_000_000_000, None, None)
            for t in range(topics)
            for p in range(partitions)
        ]
        gc.collect()
        started = _thread_cpu()
        for first in range(0, len(records), CHUNK_RECORDS):  # the hand-overs a commit makes
            await sender.send(records[first : first + CHUNK_RECORDS])
        await sender.appended()
        broker = await _answer_every_batch(accumulator, sender, stub, 1_000 * n)
        if n >= WARM_UP:
            spent.append(_thread_cpu() - started - broker)
        transactions.committing_transaction()
        transactions.complete_transaction()
    if failed:
        raise SystemExit(f"{len(failed)} records failed, e.g. {failed[0]}")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=250)
    parser.add_argument("--partitions", type=int, default=10, help="per topic; one record each")
    parser.add_argument("--transactions", type=int, default=60)
    parser.add_argument("--aiokafka-codecs", choices=["on", "off"], default="on")
    args = parser.parse_args()
    if args.aiokafka_codecs == "on" and not aiokafka_codecs.install():
        raise SystemExit("this aiokafka is not the one mirror's codecs fit: run with --aiokafka-codecs off")
    spent = asyncio.run(_measure(args.topics, args.partitions, args.transactions))
    count = args.topics * args.partitions
    median = statistics.median(spent)
    print(
        f"{count:,} one-record partitions a transaction, {len(spent)} transactions: the loop's CPU "
        f"median {median * 1000:.1f} ms ({median / count * 1e6:.1f} us a partition), "
        f"min {min(spent) * 1000:.1f}, max {max(spent) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
