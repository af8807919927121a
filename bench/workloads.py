"""The seeded workloads and the check that a target holds exactly (or at least) what the source got.

Record i of a catch-up workload goes to the (i % N)-th of its N partitions, counted across its topics
in order (`TopicSet.place`), with key b"<i>" and a value that starts with i (8 bytes, big-endian)
followed by seeded random bytes, so every record is unique and verification can rebuild the expected
value instead of keeping 2,000,000 of them in memory.

Topic names, chosen so no contender's topic regexes match another workload's topics:
- `catchup-<name>`: the 8-partition catch-up workloads, one topic each;
- `many-000` ... `many-099`: the many-partitions catch-up (100 topics x 10 partitions);
- `steady-<contender>`: the 8-partition steady load, one topic per contender;
- `many-steady-<contender>-000` ...: the many-partitions steady load, a fresh set per contender.
"""

from __future__ import annotations

import random
import re
import struct
from dataclasses import dataclass
from functools import cached_property

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.kafka.admin import create_topics as create_mirror_topics

PARTITIONS = 8
SEED = 20261122
_POOL = 1024  # distinct random tails; the 8-byte counter keeps each value unique


@dataclass(frozen=True)
class TopicSet:
    """`prefix` alone (one topic) or `prefix-000`, `prefix-001`, ... (up to 1,000 topics), each with
    `partitions` partitions."""

    prefix: str
    topics: int = 1
    partitions: int = PARTITIONS

    @cached_property  # place() runs once per record produced
    def names(self) -> list[str]:
        if self.topics == 1:
            return [self.prefix]
        return [f"{self.prefix}-{index:03d}" for index in range(self.topics)]

    @property
    def pattern(self) -> str:
        """A regex that full-matches exactly these topics (MM2 and mirror both full-match `topics`).

        No backslash (an escape in MM2's .properties file) and no comma (MM2's list separator).
        """
        return self.prefix if self.topics == 1 else f"{self.prefix}-[0-9]{{3}}"

    @property
    def total(self) -> int:
        return self.topics * self.partitions

    def place(self, index: int) -> tuple[str, int]:
        """The topic and partition of record `index`: round-robin over every partition of the set."""
        topic, partition = divmod(index % self.total, self.partitions)
        return self.names[topic], partition


@dataclass(frozen=True)
class CatchUp:
    """Records already in the source when a contender starts; timed until the target holds them all."""

    name: str
    records: int
    value_bytes: int
    # None: the one topic `catchup-<name>` with PARTITIONS partitions.
    layout: TopicSet | None = None

    @property
    def topic_set(self) -> TopicSet:
        return self.layout or TopicSet(f"catchup-{self.name}")

    @property
    def topic(self) -> str:
        """The first (for the 8-partition workloads, the only) topic."""
        return self.topic_set.names[0]

    @property
    def megabytes(self) -> float:
        return self.records * self.value_bytes / 1e6


@dataclass(frozen=True)
class Steady:
    """A paced producer while the contender runs; latency is measured per record."""

    rate: int
    seconds: int
    # How long after the last produce() records still count as delivered.
    wait_seconds: int = 60

    @property
    def records(self) -> int:
        return self.rate * self.seconds


@dataclass(frozen=True)
class ManyPartitions:
    """A catch-up over many small partitions, then in the same contender process a steady load
    spread over a second, per-contender set of topics of the same shape."""

    catch_up: CatchUp
    steady: Steady

    def steady_topics(self, contender: str) -> TopicSet:
        shape = self.catch_up.topic_set
        return TopicSet(f"many-steady-{contender}", shape.topics, shape.partitions)


@dataclass(frozen=True)
class Mode:
    name: str
    catch_up: tuple[CatchUp, ...]
    steady: Steady
    many: ManyPartitions
    # Checkpoint, group-sync and group-refresh interval of every contender.
    checkpoint_seconds: int
    # How long a catch-up may take, and how often the target's end offsets are asked for it.
    catch_up_timeout: float = 1200.0
    poll_seconds: float = 0.1


_MANY_CATCH_UP = CatchUp("1000p-100b", 100_000, 100, TopicSet("many", topics=100, partitions=10))
FULL = Mode(
    "full",
    (CatchUp("100b", 2_000_000, 100), CatchUp("1kb", 300_000, 1000)),
    Steady(rate=5000, seconds=60),
    ManyPartitions(_MANY_CATCH_UP, Steady(rate=2000, seconds=60, wait_seconds=90)),
    checkpoint_seconds=5,
)
# 10,000 partitions in one flow (1,000 topics x 10): 500 topics seeded for the catch-up, then
# 5,000 records/s for two minutes into the other 500, made before the contender starts. Not two sets
# of 10,000: a broker here may hold 20,000 open files (`ulimit -Hn`, which root cannot raise in this
# container), about one a partition, and 20,000 partitions on one broker ran out of them.
# Single-broker clusters: a 3-broker RF 3 cluster of 10,000 partitions idles at ~1.9 cores.
HUGE = Mode(
    "huge",
    (),
    Steady(rate=5000, seconds=120, wait_seconds=120),
    ManyPartitions(
        CatchUp("5000p-100b", 100_000, 100, TopicSet("huge", topics=500, partitions=10)),
        Steady(rate=5000, seconds=120, wait_seconds=120),
    ),
    checkpoint_seconds=5,
    # MM2 sends all its remote topics in one CreateTopics request, which the controller refuses at
    # this size, and tries again every refresh.topics.interval.seconds (600 s): it copies nothing.
    catch_up_timeout=420.0,
    # Listing 10,000 partitions ten times a second would load the target more than the copy does.
    poll_seconds=0.5,
)
QUICK = Mode(
    "quick",
    (CatchUp("100b", 300_000, 100),),
    Steady(rate=2000, seconds=8),
    ManyPartitions(_MANY_CATCH_UP, Steady(rate=2000, seconds=15, wait_seconds=90)),
    checkpoint_seconds=1,
)


class Values:
    """The value of record i, rebuilt on demand from the seed."""

    def __init__(self, value_bytes: int, seed: int = SEED) -> None:
        rng = random.Random(seed ^ value_bytes)
        tail = max(0, value_bytes - 8)
        self._tails = [rng.randbytes(tail) for _ in range(_POOL)]
        self._value_bytes = value_bytes

    def __call__(self, index: int) -> bytes:
        return (struct.pack(">Q", index) + self._tails[index % _POOL])[: self._value_bytes]


def matching_topics(bootstrap: str, patterns: list[str]) -> dict[str, int]:
    """Topics of the cluster that full-match one of the regexes `patterns` -> their partition counts
    (how MM2 and mirror both read `topics`)."""
    regex = re.compile("|".join(f"(?:{pattern})" for pattern in patterns))
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60).topics
    return {name: len(topic.partitions) for name, topic in sorted(listed.items()) if regex.fullmatch(name)}


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    create_topics(bootstrap, TopicSet(topic, 1, partitions))


def create_topics(bootstrap: str, topics: TopicSet, configs: dict[str, str] | None = None) -> None:
    """Every topic of the set, in requests the KRaft controller accepts (mirror's own batching), with
    the brokers' default replication factor: 1 on single brokers, 3 on replicated clusters."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_mirror_topics(
        admin, [(name, topics.partitions, configs or {}) for name in topics.names], replication_factor=None
    )


def seed(bootstrap: str, workload: CatchUp) -> None:
    """Write the workload into new topics; the idempotent producer keeps each partition in order."""
    topics = workload.topic_set
    create_topics(bootstrap, topics)
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
        topic, partition = topics.place(i)
        while True:
            try:
                producer.produce(topic, values(i), key=b"%d" % i, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError(f"seeding {workload.name}: records still unsent after 300 s")


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


def verify(bootstrap: str, remote: list[str], workload: CatchUp, ends: dict[tuple[str, int], int]) -> Verdict:
    """Read every partition of the `remote` topics (the workload's, in order) up to `ends`
    (read_committed) and check it record by record.

    Per partition the next expected index advances on an exact match; an index already seen is a
    duplicate (at-least-once re-sends), a jump ahead or a wrong value is a defect.
    """
    layout = workload.topic_set
    total, per_topic = layout.total, layout.partitions
    first = {topic: position * per_topic for position, topic in enumerate(remote)}  # its partition 0
    values = Values(workload.value_bytes)
    verdict = Verdict()
    expected = list(range(total))  # next record index expected in partition n (counted across topics)
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
    pending = {tp for tp, end in ends.items() if end > 0}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic, p in pending])
    try:
        while pending:
            for message in consumer.consume(10_000, timeout=5):
                error = message.error()
                at = (message.topic(), message.partition())
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"verifying {at[0]}: {error}")
                    if message.offset() >= ends[at]:
                        pending.discard(at)
                    continue
                partition = first[at[0]] + at[1]
                verdict.records_read += 1
                index = int(message.key())
                if index == expected[partition] and message.value() == values(index):
                    expected[partition] += total
                elif index < expected[partition]:
                    verdict.duplicated += 1
                elif index % total != partition or message.value() != values(index):
                    verdict.corrupted += 1
                else:
                    verdict.out_of_order += 1
                if message.offset() + 1 >= ends[at]:
                    pending.discard(at)
    finally:
        consumer.close()
    for partition in range(total):
        wanted = len(range(partition, workload.records, total))
        verdict.missing += wanted - (expected[partition] - partition) // total
    return verdict
