"""The seeded workloads and the check that a target holds exactly (or at least) what the source got.

Record i of a catch-up workload goes to partition i % partitions with key b"<i>" and a value that
starts with i (8 bytes, big-endian) followed by seeded random bytes, so every record is unique and
verification can rebuild the expected value instead of keeping 2,000,000 of them in memory.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 8
SEED = 20261122
_POOL = 1024  # distinct random tails; the 8-byte counter keeps each value unique


@dataclass(frozen=True)
class CatchUp:
    """Records already in the source when a contender starts; timed until the target holds them all."""

    name: str
    records: int
    value_bytes: int

    @property
    def topic(self) -> str:
        return f"catchup-{self.name}"

    @property
    def megabytes(self) -> float:
        return self.records * self.value_bytes / 1e6


@dataclass(frozen=True)
class Steady:
    """A paced producer while the contender runs; latency is measured per record."""

    rate: int
    seconds: int

    @property
    def records(self) -> int:
        return self.rate * self.seconds


@dataclass(frozen=True)
class Mode:
    name: str
    catch_up: tuple[CatchUp, ...]
    steady: Steady
    # Checkpoint, group-sync and group-refresh interval of every contender.
    checkpoint_seconds: int


FULL = Mode(
    "full",
    (CatchUp("100b", 2_000_000, 100), CatchUp("1kb", 300_000, 1000)),
    Steady(rate=5000, seconds=60),
    checkpoint_seconds=5,
)
QUICK = Mode("quick", (CatchUp("100b", 300_000, 100),), Steady(rate=2000, seconds=8), checkpoint_seconds=1)


class Values:
    """The value of record i, rebuilt on demand from the seed."""

    def __init__(self, value_bytes: int, seed: int = SEED) -> None:
        rng = random.Random(seed ^ value_bytes)
        tail = max(0, value_bytes - 8)
        self._tails = [rng.randbytes(tail) for _ in range(_POOL)]
        self._value_bytes = value_bytes

    def __call__(self, index: int) -> bytes:
        return (struct.pack(">Q", index) + self._tails[index % _POOL])[: self._value_bytes]


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)


def seed(bootstrap: str, workload: CatchUp) -> None:
    """Write the workload into a new topic; the idempotent producer keeps each partition in order."""
    create_topic(bootstrap, workload.topic)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    values = Values(workload.value_bytes)
    for i in range(workload.records):
        while True:
            try:
                producer.produce(workload.topic, values(i), key=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError(f"seeding {workload.topic}: records still unsent after 300 s")


@dataclass
class Verdict:
    """What a read_committed read of the target found, compared with the workload."""

    records_read: int = 0
    missing: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    corrupted: int = 0

    @property
    def complete(self) -> bool:
        return self.missing == 0 and self.out_of_order == 0 and self.corrupted == 0


def verify(bootstrap: str, topic: str, workload: CatchUp, ends: dict[int, int]) -> Verdict:
    """Read every partition of `topic` up to `ends` (read_committed) and check it record by record.

    Per partition the next expected index advances on an exact match; an index already seen is a
    duplicate (at-least-once re-sends), a jump ahead or a wrong value is a defect.
    """
    values = Values(workload.value_bytes)
    verdict = Verdict()
    expected = {p: p for p in range(PARTITIONS)}  # next record index expected in partition p
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-verify",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
        }
    )
    pending = {p for p, end in ends.items() if end > 0}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
    try:
        while pending:
            for message in consumer.consume(10_000, timeout=5):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"verifying {topic}: {error}")
                    if message.offset() >= ends[message.partition()]:
                        pending.discard(message.partition())
                    continue
                partition = message.partition()
                verdict.records_read += 1
                index = int(message.key())
                if index == expected[partition] and message.value() == values(index):
                    expected[partition] += PARTITIONS
                elif index < expected[partition]:
                    verdict.duplicated += 1
                elif index % PARTITIONS != partition or message.value() != values(index):
                    verdict.corrupted += 1
                else:
                    verdict.out_of_order += 1
                if message.offset() + 1 >= ends[partition]:
                    pending.discard(partition)
    finally:
        consumer.close()
    for partition in range(PARTITIONS):
        wanted = len(range(partition, workload.records, PARTITIONS))
        verdict.missing += wanted - (expected[partition] - partition) // PARTITIONS
    return verdict
