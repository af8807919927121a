"""Which partitions' positions a copy task's look reads: all of a small task's, a slice of a large
one's in turn, and all of them for the last commit."""

from __future__ import annotations

from typing import cast

from confluent_kafka import TopicPartition

from mirror.source.partition_copy import PartitionCopy
from mirror.source.position_sweep import PositionSweep
from mirror.source.record_copy import SourceReads


class Consumer:
    """Every partition's consumer is 5 past where it was copied to (markers, aborted records)."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        self.asked.append([tp.partition for tp in partitions])
        return [TopicPartition(tp.topic, tp.partition, 15, leader_epoch=3) for tp in partitions]


def _parts(count: int) -> list[PartitionCopy]:
    return [PartitionCopy("A->B", "t", p, "A.t", 100, position=10) for p in range(count)]


def test_a_task_of_at_most_a_slice_of_partitions_reads_them_all_at_every_look() -> None:
    parts, consumer = _parts(3), Consumer()
    sweep = PositionSweep(parts, slice_size=3)
    sweep.sweep(cast(SourceReads, consumer))
    sweep.sweep(cast(SourceReads, consumer))
    assert consumer.asked == [[0, 1, 2], [0, 1, 2]]
    assert [(part.position, part.epoch) for part in parts] == [(15, 3)] * 3


def test_a_larger_task_reads_one_slice_a_look_and_comes_round_to_every_partition() -> None:
    parts, consumer = _parts(5), Consumer()
    sweep = PositionSweep(parts, slice_size=2)
    for _ in range(4):
        sweep.sweep(cast(SourceReads, consumer))
    assert consumer.asked == [[0, 1], [2, 3], [4], [0, 1]]
    assert all(part.position == 15 for part in parts)


def test_the_last_commit_reads_every_partition() -> None:
    parts, consumer = _parts(5), Consumer()
    sweep = PositionSweep(parts, slice_size=2)
    sweep.sweep(cast(SourceReads, consumer))
    sweep.sweep(cast(SourceReads, consumer), every=True)
    assert consumer.asked == [[0, 1], [0, 1, 2, 3, 4]]


def test_a_partition_holding_records_of_the_open_transaction_is_not_moved() -> None:
    # Its position moves when the transaction commits, past the records it holds.
    parts, consumer = _parts(2), Consumer()
    parts[1].upstream = [10, 11]
    PositionSweep(parts).sweep(cast(SourceReads, consumer))
    assert [part.position for part in parts] == [15, 10]
