"""Which copied records get an OffsetSync: MM2's PartitionState triggers, plus the last record
copied before a partition goes quiet.

A sync (U, D) claims downstream offset D holds upstream offset U. MM2 emits one for the first
record, whenever upstream offsets jump (transaction markers, compaction, aborted records),
whenever downstream offsets go backwards (truncation), and when the downstream offset drifted
`offset_lag_max` past the last sync. mirror also syncs the last record a partition copied once it
has been quiet for a transaction, so a group that consumed everything on the source translates to
exactly the end of the remote partition, while a busy partition gets no more syncs than MM2's.
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


def triggered_syncs(
    state: PartitionState, pairs: Iterable[tuple[int, int]]
) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """(the pairs MM2's triggers sync, the last pair if no sync covers it) for one transaction."""
    syncs: list[tuple[int, int]] = []
    last: tuple[int, int] | None = None
    for pair in pairs:
        if state.needs_sync(*pair):
            syncs.append(pair)
        last = pair
    unsynced = None if last is None or (syncs and syncs[-1] == last) else last
    return syncs, unsynced


def syncs_for_range(pairs: Iterable[tuple[int, int]], offset_lag_max: int) -> list[tuple[int, int]]:
    """What a partition that copies `pairs` in one transaction, then goes quiet, syncs: the
    triggered pairs, then its last pair."""
    syncs, unsynced = triggered_syncs(PartitionState(offset_lag_max), pairs)
    return syncs if unsynced is None else [*syncs, unsynced]
