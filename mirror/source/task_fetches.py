"""A copy task's watch over its consumers' fetches, looked at every CHECK_SECONDS of its loop:
partitions they stopped fetching though the source holds records (mirror.source.fetch_watch),
idle partitions paused on purpose in tasks of thousands of partitions (mirror.source.idle_pause),
and idle partitions to check against a new source leader's log (KIP-320).

The two must agree on one thing: a paused partition is fetched by no one on purpose, so the watch
never calls it stuck, and one to be checked against its leader is resumed first (a check is made
by fetching).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mirror.config.flow_settings import FlowSettings
from mirror.source.clients import end_asker, source_admin
from mirror.source.fetch_watch import (
    REBUILD_SECONDS,
    WATCH_SECONDS,
    FetchWatch,
    check_against_leaders,
    describe_checks,
)
from mirror.source.idle_pause import IdlePause
from mirror.source.partition_copy import PartitionCopy
from mirror.source.split_reader import SplitReader
from mirror.source.stats import StatsSender

log = logging.getLogger(__name__)


class TaskFetches:
    def __init__(
        self,
        settings: FlowSettings,
        partitions: int,
        source: SplitReader,
        stats: StatsSender,
        *,
        watch_every: float = WATCH_SECONDS,
        rebuild_every: float = REBUILD_SECONDS,
    ) -> None:
        self._source, self._stats = source, stats
        self._watch = FetchWatch(
            lambda: source_admin(settings), source.fetched_end, every=watch_every, rebuild_every=rebuild_every
        )
        idle_after = settings.pause_idle_partitions_after_seconds
        self._idle = (
            IdlePause(lambda: end_asker(settings), idle_seconds=idle_after)
            if idle_after is not None and IdlePause.wanted(partitions)
            else None
        )
        self._paused_reported = 0  # the idle partitions paused, as the stats last said

    def read(self, records: int) -> None:
        """The task read `records` records from its consumers (0: nothing fetched was waiting)."""
        self._watch.read(records)

    def look(self, parts: Sequence[PartitionCopy], *, ending: bool) -> list[tuple[PartitionCopy, int]]:
        """Idle partitions paused or woken, and the partitions to read again through new consumers
        (FetchWatch.stuck); none in a task that is ending."""
        if ending:
            self._report_paused(len(self._idle.paused) if self._idle is not None else 0)
            return []
        if self._idle is None:
            return self._watch.stuck(parts)
        self._idle.look(parts, self._source)
        self._report_paused(len(self._idle.paused))
        return self._watch.stuck(parts, self._idle.paused)

    def check_against_leaders(self) -> None:
        """Seek the idle partitions whose source leader's epoch rose (FetchWatch.to_check), each
        resumed first if paused."""
        checks = self._watch.to_check()
        if not checks:
            return
        if self._idle is not None:
            self._idle.wake([(part.topic, part.partition) for part, _ in checks], self._source)
        if sought := check_against_leaders(self._source, checks):
            log.info("%s", describe_checks(sought))

    def describe(self, flow: str, stuck: Sequence[tuple[PartitionCopy, int]]) -> str:
        return self._watch.describe(flow, stuck)

    def restart(self) -> None:
        """New consumers: they fetch every partition, and nothing they did is known yet."""
        self._watch.restart()
        if self._idle is not None:
            self._idle.restart()

    def close(self) -> None:
        """First when the task closes: the asking thread must stop whatever fails after."""
        if self._idle is not None:
            self._idle.close()
        self._report_paused(0)

    def _report_paused(self, count: int) -> None:
        if count != self._paused_reported:
            self._paused_reported = self._stats.current.paused = count
