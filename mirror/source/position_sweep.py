"""Positions a copy task's consumer moved past aborted records and transaction markers while it had
no record to copy: the task commits them, so the lag reads 0 and a group that consumed everything
translates to the end of the remote partition.

Reading positions costs about 3 us of CPU a partition (15-16 ms for 5,000 on this project's 2-core
machine), and a task looks twice a second: at 10,000 partitions in two tasks that was 6% of a core,
where the copy workers got 0.3-0.6 of one under a steady load. So a look reads the positions of
SLICE partitions, the next ones each time: a task of at most SLICE partitions reads them all at
every look, as before; one of 5,000 each every 2.5 s. The task's last commit reads them all.
A position not swept yet lags only over markers and aborted records, which no read returns: the
fetch watch may then take the partition for idle, and at worst checks it against its leader.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirror.source.partition_copy import PartitionCopy
from mirror.source.record_copy import SourceReads, consumer_positions

SLICE = 1000


class PositionSweep:
    def __init__(self, parts: Sequence[PartitionCopy], *, slice_size: int = SLICE) -> None:
        self._parts, self._slice = parts, slice_size
        self._next = 0  # where the next slice starts

    def sweep(self, source: SourceReads, *, every: bool = False) -> None:
        """Move the positions of the next slice of partitions (of all of them, with `every`) to
        where the consumer is, where it moved with no record to copy."""
        parts = self._parts if every or len(self._parts) <= self._slice else self._take_slice()
        for part, (position, epoch) in zip(parts, consumer_positions(source, parts), strict=True):
            part.swept_to(position, epoch)

    def _take_slice(self) -> Sequence[PartitionCopy]:
        start = self._next
        self._next = start + self._slice if start + self._slice < len(self._parts) else 0
        return self._parts[start : start + self._slice]
