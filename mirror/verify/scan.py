"""Read one side's ranges into digests: whole-partition chains (pass 1) or per-record streams (pass 2).

Pass 1 runs in worker processes, one per shard of partitions and side, so both clusters are read at
once and hashing uses every core; everything a worker needs crosses as plain values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from mirror.verify.digest import ChainDigest, record_digest
from mirror.verify.range_reads import read_ranges

Partition = tuple[str, int]


def chain_digests(
    properties: Mapping[str, str], ranges: Mapping[Partition, tuple[int, int]], what: str
) -> dict[Partition, tuple[int, str]]:
    """{partition: (committed records in the range, their chained digest)}."""
    chains = {tp: ChainDigest() for tp in ranges}
    for batch in read_ranges(properties, ranges, what=what):
        for message in batch:
            chains[(message.topic(), message.partition())].add(
                message.key(), message.value(), message.headers(), message.timestamp()[1]
            )
    return {tp: (chain.count, chain.hexdigest()) for tp, chain in chains.items()}


def first_and_count(
    properties: Mapping[str, str], ranges: Mapping[Partition, tuple[int, int]], what: str
) -> dict[Partition, tuple[int, int]]:
    """{partition: (committed records in the range, the first one's offset or -1)}."""
    found: dict[Partition, tuple[int, int]] = {tp: (0, -1) for tp in ranges}
    for batch in read_ranges(properties, ranges, what=what):
        for message in batch:
            tp = (message.topic(), message.partition())
            count, first = found[tp]
            found[tp] = (count + 1, message.offset() if first < 0 else first)
    return found


def record_digests(
    properties: Mapping[str, str], tp: Partition, start: int, end: int, what: str
) -> Iterator[tuple[int, bytes]]:
    """(offset, digest) of each committed record of one partition in [start, end), in order."""
    for batch in read_ranges(properties, {tp: (start, end)}, what=what):
        for message in batch:
            yield (
                message.offset(),
                record_digest(message.key(), message.value(), message.headers(), message.timestamp()[1]),
            )
