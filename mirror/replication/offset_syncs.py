"""Which copied records get an OffsetSync: MM2's PartitionState triggers, plus every range's last record.

A sync (U, D) claims downstream offset D holds upstream offset U. MM2 emits one for the first
record, whenever upstream offsets jump (transaction markers, compaction, aborted records),
whenever downstream offsets go backwards (truncation), and when the downstream offset drifted
`offset_lag_max` past the last sync. mirror also syncs the last record of every transaction, so a
group that consumed everything on the source translates to exactly the end of the remote partition.
"""

from __future__ import annotations

from collections.abc import Iterable


class PartitionState:
    """MM2's per-partition trigger state (OffsetSyncWriter.PartitionState)."""

    def __init__(self, offset_lag_max: int) -> None:
        self._offset_lag_max = offset_lag_max
        self._previous_upstream = -1
        self._previous_downstream = -1
        self._last_sync_downstream = -1

    def needs_sync(self, upstream: int, downstream: int) -> bool:
        # +1: translation may move one record past a sync, so drift is measured from the record after it.
        due = (
            self._last_sync_downstream == -1
            or downstream - (self._last_sync_downstream + 1) >= self._offset_lag_max
            or upstream - self._previous_upstream != 1
            or downstream < self._previous_downstream
        )
        if due:
            self._last_sync_downstream = downstream
        self._previous_upstream, self._previous_downstream = upstream, downstream
        return due


def syncs_for_range(pairs: Iterable[tuple[int, int]], offset_lag_max: int) -> list[tuple[int, int]]:
    """(upstream, downstream) pairs to emit for one copied range, in order, the last pair always included."""
    state = PartitionState(offset_lag_max)
    syncs: list[tuple[int, int]] = []
    last: tuple[int, int] | None = None
    for pair in pairs:
        if state.needs_sync(*pair):
            syncs.append(pair)
        last = pair
    if last is not None and (not syncs or syncs[-1] != last):
        syncs.append(last)
    return syncs
