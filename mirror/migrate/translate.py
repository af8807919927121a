"""Translate consumer-group offsets exactly, for groups that stopped on the source.

The checkpoint component translates as MM2 does: to the newest offset sync at or below the group's
offset, so a moved group may read again the records between that sync and where it stopped. A
migration can do better, because it may read the logs. Between an offset sync (u, d) and the
group's offset U, source and target hold the same committed records in the same order; so if n
committed source records lie in [u, U), the group resumes on the target at the (n+1)-th committed
record from d. A group at the flow's position P resumes right after where the flow's last record
landed (the position's `d=`). A group ahead of P waits for the flow to copy up to it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.clients import admin_client
from mirror.kafka.offsets import earliest_offsets
from mirror.kafka.wire import OffsetSync
from mirror.source.offsets_admin import positions_and_landings
from mirror.verify.offset_syncs import read_offset_syncs
from mirror.verify.range_reads import read_ranges

Partition = tuple[str, int]


@dataclass
class Translation:
    """Per group, its offsets for the target's (remote) partitions, and what could not be translated."""

    offsets: dict[str, dict[Partition, int]] = field(default_factory=dict)
    not_copied_yet: dict[str, list[Partition]] = field(default_factory=dict)  # source partitions
    untranslatable: dict[str, dict[Partition, str]] = field(default_factory=dict)


class NewestSyncs:
    """Fed the syncs topic in order; keeps, per (partition, U) asked about, the newest sync at or below U
    of the remote partition's current copy (syncs before it went back were of a copy since deleted)
    whose records both logs still hold (`lows`: per partition, the source's and the target's first
    offset)."""

    def __init__(
        self, wanted: Mapping[Partition, Iterable[int]], lows: Mapping[Partition, tuple[int, int]]
    ) -> None:
        self._wanted = {tp: sorted(set(offsets)) for tp, offsets in wanted.items()}
        self._lows = lows
        self._best: dict[tuple[Partition, int], OffsetSync] = {}
        self._last_downstream: dict[Partition, int] = {}

    def add(self, sync: OffsetSync) -> None:
        tp = (sync.topic, sync.partition)
        wanted = self._wanted.get(tp)
        if wanted is None:
            return
        if sync.downstream_offset < self._last_downstream.get(tp, -1):
            for offset in wanted:
                self._best.pop((tp, offset), None)
        self._last_downstream[tp] = sync.downstream_offset
        source_low, target_low = self._lows.get(tp, (0, 0))
        if sync.upstream_offset < source_low or sync.downstream_offset < target_low:
            return  # retention removed its records: counting from it would go wrong
        for offset in wanted:
            if sync.upstream_offset <= offset:
                self._best[(tp, offset)] = sync

    def get(self, tp: Partition, offset: int) -> OffsetSync | None:
        return self._best.get((tp, offset))


def translate_groups(settings: FlowSettings, groups: Mapping[str, Mapping[Partition, int]]) -> Translation:
    """Exact target offsets for `groups` (source partition -> committed offset), none of them active."""
    partitions = sorted({tp for offsets in groups.values() for tp in offsets})
    positions = positions_and_landings(settings, partitions)
    result = Translation()
    behind: dict[Partition, set[int]] = defaultdict(set)
    for group, offsets in groups.items():
        for tp, upstream in offsets.items():
            found = positions.get(tp)
            landed = found[1] if found else -1
            if found is None or upstream > found[0]:
                result.not_copied_yet.setdefault(group, []).append(tp)
            elif landed < 0:
                result.untranslatable.setdefault(group, {})[tp] = "the flow's position names no target offset"
            elif upstream == found[0]:
                result.offsets.setdefault(group, {})[_remote(settings, tp)] = landed + 1
            else:
                behind[tp].add(upstream)
    exact = _translate_behind(settings, behind, {tp: positions[tp][1] + 1 for tp in behind})
    for group, offsets in groups.items():
        for tp, upstream in offsets.items():
            if upstream not in behind.get(tp, ()):
                continue
            translated = exact.get((tp, upstream))
            if isinstance(translated, int):
                result.offsets.setdefault(group, {})[_remote(settings, tp)] = translated
            else:
                result.untranslatable.setdefault(group, {})[tp] = translated or "no offset sync"
    return result


def _translate_behind(
    settings: FlowSettings, behind: Mapping[Partition, set[int]], target_ends: Mapping[Partition, int]
) -> dict[tuple[Partition, int], int | str]:
    if not behind:
        return {}
    remote = {tp: _remote(settings, tp) for tp in behind}
    source_lows = earliest_offsets(admin_client(settings.source_admin), list(behind))
    target_lows = earliest_offsets(admin_client(settings.target_admin), list(remote.values()))
    syncs = NewestSyncs(behind, {tp: (source_lows[tp], target_lows[remote[tp]]) for tp in behind})
    for record in read_offset_syncs(settings):
        syncs.add(record)
    found: dict[tuple[Partition, int], int | str] = {}
    # A read covers one range per partition, so each round takes one asked offset per partition.
    rounds: dict[int, list[tuple[Partition, int, OffsetSync]]] = defaultdict(list)
    for tp, offsets in sorted(behind.items()):
        anchored = [(upstream, syncs.get(tp, upstream)) for upstream in sorted(offsets)]
        for upstream, sync in anchored:
            if sync is None:
                found[(tp, upstream)] = "the group is behind the oldest offset sync the flow kept"
        for index, (upstream, sync) in enumerate((u, s) for u, s in anchored if s is not None):
            rounds[index].append((tp, upstream, sync))
    for asks in rounds.values():
        counts = _count_committed(
            settings.source_consumer,
            {tp: (sync.upstream_offset, upstream) for tp, upstream, sync in asks},
            what="translating group offsets: source",
        )
        targets = _nth_offsets(
            settings.target_consumer,
            {
                _remote(settings, tp): (sync.downstream_offset, target_ends[tp], counts.get(tp, 0))
                for tp, _, sync in asks
            },
            what="translating group offsets: target",
        )
        for tp, upstream, _ in asks:
            offset = targets.get(_remote(settings, tp))
            found[(tp, upstream)] = (
                offset if offset is not None else "the target holds fewer records than the source"
            )
    return found


def _count_committed(
    properties: Mapping[str, str], ranges: Mapping[Partition, tuple[int, int]], *, what: str
) -> dict[Partition, int]:
    counts: dict[Partition, int] = defaultdict(int)
    for batch in read_ranges(properties, ranges, what=what):
        for message in batch:
            counts[(message.topic(), message.partition())] += 1
    return counts


def _nth_offsets(
    properties: Mapping[str, str], asks: Mapping[Partition, tuple[int, int, int]], *, what: str
) -> dict[Partition, int]:
    """Per partition asked (start, end, n): the offset of the (n+1)-th committed record in [start, end);
    `end` if the range holds exactly n (the group consumed all that was copied); absent if fewer."""
    ranges = {tp: (start, end) for tp, (start, end, _) in asks.items()}
    limits = {tp: n + 1 for tp, (_, _, n) in asks.items()}
    seen: dict[Partition, int] = defaultdict(int)
    found: dict[Partition, int] = {}
    for batch in read_ranges(properties, ranges, what=what, limits=limits):
        for message in batch:
            tp = (message.topic(), message.partition())
            seen[tp] += 1
            if seen[tp] == limits[tp]:
                found[tp] = message.offset()
    for tp, (_, end, n) in asks.items():
        if tp not in found and seen[tp] == n:
            found[tp] = end
    return found


def _remote(settings: FlowSettings, tp: Partition) -> Partition:
    return settings.remote_topic(tp[0]), tp[1]
