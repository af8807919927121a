"""Sparse per-partition history of OffsetSyncs and MM2's translation of upstream offsets.

Per source partition MM2 (4.x, KAFKA-15202) keeps 64 syncs: slot 0 is the latest, and older slots
hold older syncs spaced roughly exponentially in upstream offset, so recent history is dense and
old history sparse. Between neighbouring slots i-1 and i it keeps two invariants:
    B: syncs[i-1].up <= syncs[i].up + 2**i - 2**(i-1)     (slot i is not too old)
    C: syncs[i-1].up >= syncs[i].up + 2**max(i-3, 0)       (slot i is old enough to be worth a slot)
A new sync goes into slot 0; each following slot keeps its value while B still holds, else takes
the best candidate from the previous array that satisfies both.

Translation (the "+1 rule", KAFKA-12468): a group at upstream offset U uses the newest kept sync
(u, d) with u <= U. At U == u the answer is exactly d. Past it, only d + 1 is safe: between u and U
some upstream offsets may be markers, aborted or compacted records that were never copied, so
counting forward could skip data, and moving one record past the sync only ever re-reads.

mirror also keeps the most recent RECENT_SYNCS syncs of each partition (two int64 arrays, 16 KiB
a partition): the source component writes a sync at every transaction's last record, so a group
that stopped at a transaction boundary within that window translates exactly, not to the sparse
slot before it. Lookups take the closest sync at or below U from either history; both hold only
real syncs, so the +1 rule's guarantee (never skip) is unchanged.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from mirror.kafka.wire import OffsetSync

SLOTS = 64
RECENT_SYNCS = 1024

# translate()'s answer when the group is older than every kept sync: MM2 emits nothing then.
TOO_OLD = -1

Partition = tuple[str, int]


class OffsetSyncStore:
    """Feed it the syncs topic in order with add(); ask translate() once loaded."""

    def __init__(self, *, keep_history_while_loading: bool = True) -> None:
        self._syncs: dict[Partition, list[OffsetSync]] = {}
        self._recent: dict[Partition, tuple[array[int], array[int]]] = {}
        # KAFKA-15905: history read before the initial read-to-end may only be trusted if the
        # previous checkpoints could be restored (they keep translation from moving backwards).
        self._keep_history_while_loading = keep_history_while_loading
        self.loaded = False

    def add(self, sync: OffsetSync) -> None:
        partition = (sync.topic, sync.partition)
        old = self._syncs.get(partition)
        loading_without_history = not self.loaded and not self._keep_history_while_loading
        if (
            old is None
            or loading_without_history
            or sync.upstream_offset < old[0].upstream_offset
            or sync.downstream_offset < old[0].downstream_offset
        ):
            # New partition, an upstream rewind (source topic re-created) or a downstream reset
            # (remote topic re-created): earlier history is void. MM2 keeps it after a downstream
            # reset, and once the reset ages out of the slots a group past it translates through
            # a sync of the old remote topic, far beyond the new one's records: group sync would
            # then move an idle group there and skip everything in between.
            self._syncs[partition] = [sync] * SLOTS
            self._recent[partition] = (
                array("q", [sync.upstream_offset]),
                array("q", [sync.downstream_offset]),
            )
            return
        self._syncs[partition] = _updated(old, sync)
        ups, downs = self._recent[partition]
        ups.append(sync.upstream_offset)
        downs.append(sync.downstream_offset)
        if len(ups) > 2 * RECENT_SYNCS:  # trim in bulk, so appends stay amortised O(1)
            del ups[:-RECENT_SYNCS]
            del downs[:-RECENT_SYNCS]

    def mark_loaded(self) -> None:
        """The initial read to the end of the syncs topic is done; translation may start."""
        self.loaded = True

    def latest(self, topic: str, partition: int) -> OffsetSync | None:
        syncs = self._syncs.get((topic, partition))
        return syncs[0] if syncs else None

    def partitions(self) -> list[Partition]:
        return sorted(self._syncs)

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """Downstream offset for a group at `upstream_offset`; None if unknown, TOO_OLD if too old."""
        if not self.loaded:
            return None
        syncs = self._syncs.get((topic, partition))
        if syncs is None:
            return None
        sparse = next((s for s in syncs if s.upstream_offset <= upstream_offset), syncs[-1])
        up, down = sparse.upstream_offset, sparse.downstream_offset
        ups, downs = self._recent[(topic, partition)]
        index = bisect_right(ups, upstream_offset) - 1
        if index >= 0 and (up > upstream_offset or ups[index] > up):
            up, down = ups[index], downs[index]
        if up > upstream_offset:
            return TOO_OLD
        step = 0 if upstream_offset == up else 1
        return down + step


def _keeps_b(newer: OffsetSync, older: OffsetSync, newer_slot: int, older_slot: int) -> bool:
    """Invariant B: `older` is recent enough to sit in `older_slot` behind `newer`."""
    bound = older.upstream_offset + (1 << older_slot) - (1 << newer_slot)
    return newer is older or newer.upstream_offset <= bound


def _keeps_c(newer: OffsetSync, older: OffsetSync, newer_slot: int) -> bool:
    """Invariant C: `older` is far enough behind `newer` to be worth a slot of its own."""
    bound = older.upstream_offset + (1 << max(newer_slot - 2, 0))
    return newer is older or newer.upstream_offset >= bound


def _updated(old: list[OffsetSync], sync: OffsetSync) -> list[OffsetSync]:
    """The 64 slots after `sync` arrives, given the slots before it (MM2's updateSyncArray)."""
    syncs = list(old)
    syncs[0] = sync
    replacement, candidate_index = sync, 0
    for slot in range(1, SLOTS):
        previous = slot - 1
        # Walk the old array for the oldest candidate that still fits behind syncs[previous].
        while True:
            candidate = old[candidate_index]
            fits_b = _keeps_b(syncs[previous], candidate, previous, slot)
            fits_c = _keeps_c(syncs[previous], candidate, previous)
            leaves_room = slot + 1 >= SLOTS or _keeps_c(candidate, syncs[slot + 1], slot)
            duplicate = candidate_index + 1 < SLOTS and candidate is old[candidate_index + 1]
            if fits_b and fits_c and leaves_room:
                replacement = candidate
            skip = duplicate or not fits_c
            if (fits_b and fits_c and leaves_room) or skip:
                candidate_index += 1
            if not (candidate_index < slot and skip):
                break
        if _keeps_b(syncs[previous], syncs[slot], previous, slot):
            break  # the rest of the history is still valid
        syncs[slot] = replacement
    return syncs
