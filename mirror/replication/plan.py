"""Planning micro-batches: source positions as Spark offsets, and how far each batch may go.

Spark stores offsets as JSON and compares them as strings, so keys are `topic:partition`
(Kafka topic names cannot contain ':') and dicts are always built in sorted key order;
the same positions in another order would look like new data and start empty batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Positions = dict[str, int]

MIN_RECORDS_PER_PARTITION = 1000


@dataclass(frozen=True, order=True)
class SourcePartitionRange:
    """Source offsets [start, end) of one partition: one transaction on the target."""

    topic: str
    partition: int
    start: int
    end: int


def position_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def parse_position_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def sorted_positions(positions: Mapping[str, int]) -> Positions:
    return {key: positions[key] for key in sorted(positions)}


def plan_end(
    start: Mapping[str, int],
    available: Mapping[str, int],
    max_records: int | None,
    new_partitions: Mapping[str, int] | None = None,
) -> Positions:
    """How far the next batch goes: up to `available` per partition, at most `max_records` in all.

    A partition missing from `start` enters at its starting position (`new_partitions`) without
    advancing: Spark hands `partitions()` the previous batch's end as start, which has no entry
    for it, so it may only move from the batch after. Positions never move backwards.
    """
    end = {key: max(position, available.get(key, position)) for key, position in start.items()}
    behind = [key for key in end if end[key] > start[key]]
    if max_records is not None and behind:
        share = max(max_records // len(behind), MIN_RECORDS_PER_PARTITION)
        for key in behind:
            end[key] = min(end[key], start[key] + share)
    for key, position in (new_partitions or {}).items():
        end.setdefault(key, position)
    return sorted_positions(end)


def ranges_between(start: Mapping[str, int], end: Mapping[str, int]) -> list[SourcePartitionRange]:
    ranges = []
    for key in sorted(end):
        begin = start.get(key, end[key])
        if end[key] > begin:
            topic, partition = parse_position_key(key)
            ranges.append(SourcePartitionRange(topic, partition, begin, end[key]))
    return ranges
