"""Reading whole topics back, read_committed, to compare a target with its source record by record."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.helpers import retrying


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def read_topic(
    bootstrap_servers: str, topic: str, timeout: float = 120.0, *, security: Mapping[str, str] | None = None
) -> dict[int, list[Record]]:
    """Every committed record of `topic`, per partition, in offset order."""
    return read_topics(bootstrap_servers, [topic], timeout, security=security)[topic]


def read_topics(
    bootstrap_servers: str,
    topics: list[str],
    timeout: float = 120.0,
    *,
    security: Mapping[str, str] | None = None,
) -> dict[str, dict[int, list[Record]]]:
    """Every committed record of each of `topics`, per partition, in offset order: one consumer
    for them all (thousands of partitions are read in one go)."""
    client = {"bootstrap.servers": bootstrap_servers, **(security or {})}
    end_reader = Consumer({**client, "group.id": "verify", "isolation.level": "read_uncommitted"})
    metadata = end_reader.list_topics(timeout=30)
    # A topic that does not exist reads as no partitions, as before it is created.
    partitions = [
        (topic, p)
        for topic in topics
        for p in sorted(metadata.topics[topic].partitions if topic in metadata.topics else ())
    ]

    # Leaders of a replicated cluster move back to a broker just restarted: asked again.
    def ends(tp: tuple[str, int]) -> Callable[[], tuple[int, int]]:
        return lambda: end_reader.get_watermark_offsets(TopicPartition(*tp), timeout=30)

    ranges = {tp: retrying(ends(tp)) for tp in partitions}
    end_reader.close()
    reader = Consumer(
        {
            **client,
            "group.id": "verify",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic, p in partitions])
    records: dict[str, dict[int, list[Record]]] = {topic: {} for topic in topics}
    for topic, p in partitions:
        records[topic][p] = []
    # A partition whose records were all deleted (retention, deleteRecords) has nothing to read.
    pending = {tp for tp in partitions if ranges[tp][1] > ranges[tp][0]}
    deadline = time.monotonic() + timeout
    try:
        while pending:
            assert time.monotonic() < deadline, (
                f"could not read {topics} to their ends; behind: {sorted(pending)}"
            )
            for message in reader.consume(1000, timeout=0.5):
                if message.error() is None:
                    records[message.topic()][message.partition()].append(
                        Record(
                            message.key(),
                            message.value(),
                            tuple(message.headers() or ()),
                            message.timestamp()[1],
                        )
                    )
            for tp in reader.position([TopicPartition(*tp) for tp in pending]):
                if tp.offset >= ranges[(tp.topic, tp.partition)][1]:
                    pending.discard((tp.topic, tp.partition))
    finally:
        reader.close()
    return records


def assert_same_records(source: dict[int, list[Record]], target: dict[int, list[Record]]) -> None:
    """Same partitions, same records in the same order: nothing missing, nothing duplicated."""
    assert sorted(target) == sorted(source), "partition counts differ"
    for partition, expected in source.items():
        actual = target[partition]
        assert len(actual) == len(expected), (
            f"partition {partition}: {len(actual)} records on the target, {len(expected)} on the source"
        )
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert got == want, f"partition {partition}, record {index}: {got!r} != {want!r}"


@dataclass(frozen=True)
class Comparison:
    """A target checked against its source, record by record, per partition."""

    checked: int  # records on the source
    lost: int  # on the source, not on the target
    duplicated: int  # on the target more often than on the source (or not on the source at all)
    out_of_order: int  # partitions holding exactly the source's records, in another order

    @property
    def exact(self) -> bool:
        return self.lost == self.duplicated == self.out_of_order == 0

    def __add__(self, other: Comparison) -> Comparison:
        return Comparison(
            self.checked + other.checked,
            self.lost + other.lost,
            self.duplicated + other.duplicated,
            self.out_of_order + other.out_of_order,
        )


def compare_records(source: dict[int, list[Record]], target: dict[int, list[Record]]) -> Comparison:
    """Counts rather than the first difference: what a fault report shows."""
    lost = duplicated = out_of_order = checked = 0
    for partition in sorted(set(source) | set(target)):
        expected, actual = source.get(partition, []), target.get(partition, [])
        checked += len(expected)
        missing = Counter(expected) - Counter(actual)
        extra = Counter(actual) - Counter(expected)
        lost += sum(missing.values())
        duplicated += sum(extra.values())
        if not missing and not extra and actual != expected:
            out_of_order += 1
    return Comparison(checked, lost, duplicated, out_of_order)
