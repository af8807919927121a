"""Verify one flow: anchor each partition, digest both sides in parallel, walk the ones that differ.

Pass 1 reads every range once on each side (in worker processes) and keeps a count and a chained
digest per partition. Only partitions whose digests differ are read again, one at a time, side by
side (pass 2), to find the first difference and count missing, extra and changed records. A flow
that is running meanwhile does not matter: the ranges are fixed by the anchors read at the start.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Collection, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.clients import admin_client
from mirror.kafka.offsets import earliest_offsets, last_stable_offsets
from mirror.source.offsets_admin import positions_and_landings
from mirror.topics.sync import TopicSync
from mirror.verify.compare import WINDOW, PartitionDiff, compare_streams
from mirror.verify.offset_syncs import read_offset_syncs
from mirror.verify.ranges import NEVER_COPIED, CopyRange, Extent, StartAnchors, copy_range
from mirror.verify.scan import chain_digests, first_and_count, record_digests

log = logging.getLogger(__name__)

Partition = tuple[str, int]


@dataclass
class PartitionReport:
    topic: str
    partition: int
    remote_topic: str
    skipped: str | None = None  # why nothing was compared
    records: int = 0  # source records compared
    diff: PartitionDiff = field(default_factory=PartitionDiff)
    extra_after: int = 0  # committed target records past the flow's last copy, not written by it
    first_extra_after: int | None = None
    heartbeats: bool = False  # a heartbeats topic: mirror's own records, written on and on
    unverified: int = 0
    not_yet_copied: int = 0
    anchor: str = ""

    @property
    def differs(self) -> bool:
        return self.diff.differs or self.extra_after > 0

    @property
    def uncompared(self) -> bool:
        """Copied, but nothing anchors the comparison: verify cannot vouch for it."""
        return self.skipped is not None and self.skipped != NEVER_COPIED


@dataclass
class FlowReport:
    flow: str
    partitions: list[PartitionReport]

    @property
    def differs(self) -> bool:
        return any(p.differs for p in self.partitions)

    @property
    def uncompared(self) -> int:
        return sum(1 for p in self.partitions if p.uncompared)

    def waiting(self) -> int:
        """Source records not copied yet, heartbeats aside (mirror writes those all the time)."""
        return sum(p.not_yet_copied for p in self.partitions if not p.heartbeats)

    def total(self, attribute: str) -> int:
        return sum(int(getattr(p, attribute)) for p in self.partitions)

    def diff_total(self, attribute: str) -> int:
        return sum(int(getattr(p.diff, attribute)) for p in self.partitions)


def verify_flow(
    settings: FlowSettings, topics: Collection[str] = (), *, workers: int | None = None, window: int = WINDOW
) -> FlowReport:
    partitions = [(t, p) for t, p in TopicSync(settings).replicated_partitions() if not topics or t in topics]
    remote = {tp: (settings.remote_topic(tp[0]), tp[1]) for tp in partitions}
    # Positions first: ends read after them are at or past them, even while the flow copies.
    positions = positions_and_landings(settings, partitions)
    source_extents = _extents(settings.source_admin, partitions)
    target_by_remote = _extents(settings.target_admin, remote.values())
    target_extents = {tp: target_by_remote[remote[tp]] for tp in partitions}
    policy = settings.policy()
    anchors = _start_anchors(settings, source_extents, target_extents)

    reports: dict[Partition, PartitionReport] = {}
    ranges: dict[Partition, CopyRange] = {}
    for tp in sorted(partitions):
        planned = copy_range(
            tp,
            remote_topic=remote[tp][0],
            source=source_extents[tp],
            target=target_extents[tp],
            position=positions.get(tp),
            start=anchors.get(tp),
        )
        report = PartitionReport(tp[0], tp[1], remote[tp][0], heartbeats=policy.is_heartbeats_topic(tp[0]))
        if isinstance(planned, str):
            report.skipped = planned
            extent, position = source_extents[tp], positions.get(tp)
            report.not_yet_copied = max(0, extent.end - max(extent.low, position[0] if position else 0))
        else:
            ranges[tp] = planned
            report.unverified, report.not_yet_copied, report.anchor = (
                planned.unverified,
                planned.not_yet_copied,
                planned.anchor,
            )
        reports[tp] = report

    source_sums, target_sums, after = _pass_one(settings, ranges, remote, workers)
    # Records past the flow's last copy are extra only if the flow has not copied since the start.
    moved = positions_and_landings(settings, list(after))
    for tp, (count, first) in after.items():
        if moved.get(tp) == positions.get(tp):
            reports[tp].extra_after, reports[tp].first_extra_after = count, first
    for tp, copy in ranges.items():
        report = reports[tp]
        report.records = source_sums[tp][0]
        if source_sums[tp] == target_sums.get(remote[tp]):
            report.diff.compared = report.records
            continue
        log.info("verify %s: %s-%d differs, comparing record by record", settings.name, *tp)
        report.diff = compare_streams(
            record_digests(settings.source_consumer, tp, copy.source_start, copy.source_end, "verify source"),
            record_digests(
                settings.target_consumer, remote[tp], copy.target_start, copy.target_end, "verify target"
            ),
            window=window,
        )
    return FlowReport(settings.name, [reports[tp] for tp in sorted(reports)])


def _extents(properties: Mapping[str, str], partitions: Collection[Partition]) -> dict[Partition, Extent]:
    admin = admin_client(properties)
    lows = earliest_offsets(admin, partitions)
    ends = last_stable_offsets(admin, partitions)
    return {tp: Extent(lows[tp], ends[tp]) for tp in partitions}


def _start_anchors(
    settings: FlowSettings, source: dict[Partition, Extent], target: dict[Partition, Extent]
) -> StartAnchors:
    anchors = StartAnchors(source, target)
    for sync in read_offset_syncs(settings):
        anchors.add(sync)
    return anchors


def _pass_one(
    settings: FlowSettings,
    ranges: Mapping[Partition, CopyRange],
    remote: Mapping[Partition, Partition],
    workers: int | None,
) -> tuple[
    dict[Partition, tuple[int, str]], dict[Partition, tuple[int, str]], dict[Partition, tuple[int, int]]
]:
    source = {tp: (r.source_start, r.source_end) for tp, r in ranges.items()}
    target = {remote[tp]: (r.target_start, r.target_end) for tp, r in ranges.items()}
    after = {
        remote[tp]: (r.target_end, r.target_lso) for tp, r in ranges.items() if r.target_lso > r.target_end
    }
    shards = max(1, workers or os.cpu_count() or 1)
    # spawn: librdkafka's threads in this process must not be forked into the workers.
    with ProcessPoolExecutor(max_workers=shards * 2, mp_context=multiprocessing.get_context("spawn")) as pool:
        source_jobs = _sharded(
            pool, settings.source_consumer, source, shards, f"verify {settings.name} source"
        )
        target_jobs = _sharded(
            pool, settings.target_consumer, target, shards, f"verify {settings.name} target"
        )
        after_job = pool.submit(first_and_count, dict(settings.target_consumer), after, "verify target tail")
        source_sums = {tp: v for job in source_jobs for tp, v in job.result().items()}
        target_sums = {tp: v for job in target_jobs for tp, v in job.result().items()}
        by_remote = {r: tp for tp, r in remote.items()}
        after_found = {by_remote[r]: found for r, found in after_job.result().items() if found[0]}
    return source_sums, target_sums, after_found


def _sharded(
    pool: ProcessPoolExecutor,
    properties: Mapping[str, str],
    ranges: Mapping[Partition, tuple[int, int]],
    shards: int,
    what: str,
) -> list[Future[dict[Partition, tuple[int, str]]]]:
    ordered = sorted(ranges)
    return [
        pool.submit(chain_digests, dict(properties), {tp: ranges[tp] for tp in ordered[i::shards]}, what)
        for i in range(shards)
        if ordered[i::shards]
    ]
