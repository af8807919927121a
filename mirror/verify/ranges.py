"""Where a source partition and its copy line up: the ranges `mirror verify` compares.

End anchor: every copy transaction commits the flow's position P (the next source offset to copy)
with the metadata `d=<target offset of the last copied record>`, atomically with the records. So
the committed source records below P and the committed target records up to d are the same
sequence, wherever markers and aborted copies put their offsets.

Start anchor: an OffsetSync (u, d0) says target offset d0 holds source offset u. The first record
a flow copies into a partition is always synced, so the oldest sync covers everything copied, as
long as both logs still hold it. Syncs from before the remote partition was re-created or
truncated (the downstream offset goes back) belong to another copy and are dropped. Without a
usable sync the comparison starts at both logs' beginnings.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirror.kafka.wire import OffsetSync

Partition = tuple[str, int]
NEVER_COPIED = "never copied"


@dataclass(frozen=True)
class Extent:
    """One partition's log: its first offset and its last stable offset (read_committed end)."""

    low: int
    end: int


@dataclass(frozen=True)
class CopyRange:
    """Compare source [source_start, source_end) with target [target_start, target_end)."""

    topic: str
    partition: int
    remote_topic: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    target_lso: int  # committed target records in [target_end, target_lso) were not written by the flow
    unverified: int  # source offsets the copy may hold but no anchor covers (before the start anchor)
    not_yet_copied: int  # source offsets past the flow's position
    anchor: str  # "offset sync" or "log starts"


class StartAnchors:
    """Fed the syncs topic in order; keeps per partition the oldest sync of the current copy that
    both logs still hold. Memory: one sync per partition."""

    def __init__(self, source: dict[Partition, Extent], target: dict[Partition, Extent]) -> None:
        self._source, self._target = source, target
        self._oldest: dict[Partition, OffsetSync] = {}
        self._last_downstream: dict[Partition, int] = {}

    def add(self, sync: OffsetSync) -> None:
        tp = (sync.topic, sync.partition)
        if tp not in self._source:
            return
        if sync.downstream_offset < self._last_downstream.get(tp, -1):
            self._oldest.pop(tp, None)  # the remote partition was re-created or truncated
        self._last_downstream[tp] = sync.downstream_offset
        source, target = self._source[tp], self._target[tp]
        if (
            tp not in self._oldest
            and sync.upstream_offset >= source.low
            and sync.downstream_offset >= target.low
        ):
            self._oldest[tp] = sync

    def get(self, tp: Partition) -> OffsetSync | None:
        return self._oldest.get(tp)


def copy_range(
    tp: Partition,
    *,
    remote_topic: str,
    source: Extent,
    target: Extent,
    position: tuple[int, int] | None,
    start: OffsetSync | None,
) -> CopyRange | str:
    """The ranges to compare for one partition, or why there is nothing to compare."""
    topic, partition = tp
    if position is None:
        return NEVER_COPIED
    next_offset, last_landed = position
    if last_landed < 0 and next_offset <= source.low:
        # The flow committed a position but copied nothing yet (the partition was empty): nothing to
        # compare, and its copy must hold nothing.
        return CopyRange(
            topic, partition, remote_topic, source.low, source.low, target.low, target.low, target.end,
            unverified=0, not_yet_copied=max(0, source.end - source.low), anchor="nothing copied yet",
        )  # fmt: skip
    if last_landed < 0:
        return (
            "its position names no target offset (written by MM2); it will once mirror copies a record of it"
        )
    copied_to = min(next_offset, source.end)
    not_yet_copied = max(0, source.end - max(next_offset, source.low))
    if copied_to <= source.low:
        # Retention removed everything copied: nothing to compare, but the tail after the copy still counts.
        nothing = last_landed + 1
        return CopyRange(
            topic, partition, remote_topic, source.low, source.low, nothing, nothing, target.end,
            unverified=0, not_yet_copied=not_yet_copied, anchor="nothing left on the source",
        )  # fmt: skip
    if start is not None and start.upstream_offset < copied_to and start.downstream_offset <= last_landed:
        source_start, target_start, anchor = start.upstream_offset, start.downstream_offset, "offset sync"
    else:
        source_start, target_start, anchor = source.low, target.low, "log starts"
    return CopyRange(
        topic,
        partition,
        remote_topic,
        source_start=source_start,
        source_end=max(source_start, copied_to),
        target_start=target_start,
        target_end=max(target_start, last_landed + 1),
        target_lso=target.end,
        unverified=max(0, source_start - source.low),
        not_yet_copied=not_yet_copied,
        anchor=anchor,
    )
