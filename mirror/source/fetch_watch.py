"""Partitions a copy task's consumer stopped fetching, though their source leaders hold records.

librdkafka (2.16) moves a partition to its new leader when the old one dies. Once in a while it
does not: in a CI run of the brokers-lost drill, 3 of the ~35 partitions one task read from a
SIGKILLed source leader copied nothing for the 45 s that broker stayed down, while the task
copied its other partitions, and the task whose clients were made again after a failure had
none stuck. So the task looks, every WATCH_SECONDS, for partitions whose read position has not
moved since the look before while the source's read_committed end lies past it, asked then
(without waiting: a dead leader answers only at its timeout). One still there at the next look
has had records waiting, and none read, for two looks: the task reads it again through new
consumers (its rewind), at most once per REBUILD_SECONDS.

A consumer behind on what it fetched (catch-up) may leave a partition unread for as long: each
fetch answer is capped, and the partitions in it are rotated only slowly. So a look counts only
if the task ran out of fetched records since the one before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from confluent_kafka.admin import AdminClient

from mirror.kafka.offsets import Partition, PendingOffsets, ask_last_stable_offsets
from mirror.source.partition_copy import PartitionCopy

WATCH_SECONDS = 10.0
REBUILD_SECONDS = 60.0


class FetchWatch:
    def __init__(
        self,
        new_admin: Callable[[], AdminClient],
        *,
        every: float = WATCH_SECONDS,
        rebuild_every: float = REBUILD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._new_admin = new_admin
        self._admin: AdminClient | None = None
        self._every, self._rebuild_every, self._clock = every, rebuild_every, clock
        self._next_look = clock() + every
        self._rebuilt_at = -rebuild_every
        self._ran_dry = False  # since the last look, the task took every record its consumers held
        self._seen: dict[Partition, int] = {}  # read positions at the last look
        # The partitions idle at the last look, with their positions then, and their ends as asked then.
        self._asked: tuple[dict[Partition, int], PendingOffsets] | None = None

    def took(self, records: int, asked: int) -> None:
        """The task asked its consumers for `asked` records and got `records`: fewer, and it has
        taken everything they had fetched."""
        if records < asked:
            self._ran_dry = True

    def restart(self) -> None:
        """New consumers: what the old ones did (or did not) fetch says nothing of them."""
        self._seen, self._asked, self._ran_dry = {}, None, False
        self._next_look = self._clock() + self._every

    def stuck(self, parts: Sequence[PartitionCopy]) -> list[tuple[PartitionCopy, int]]:
        """The partitions to read through new consumers, each with its source end; [] but at a
        look, and between rebuilds."""
        now = self._clock()
        if now < self._next_look:
            return []
        self._next_look = now + self._every
        reads = {(part.topic, part.partition): part.read_position() for part in parts}
        found: list[tuple[PartitionCopy, int]] = []
        if self._asked is not None and self._ran_dry:
            idle, pending = self._asked
            ends = pending.answered()
            if pending.failed():
                self._admin = None  # its cached leaders or epochs may be stale: a new client asks anew
            found = [
                (part, ends[key])
                for part in parts
                if (key := (part.topic, part.partition)) in idle
                and reads[key] == idle[key]
                and ends.get(key, -1) > reads[key]
            ]
        idle = {key: read for key, read in reads.items() if self._seen.get(key) == read}
        self._seen = reads
        self._asked = None
        if idle and self._ran_dry:
            if self._admin is None:
                self._admin = self._new_admin()
            self._asked = (idle, ask_last_stable_offsets(self._admin, idle))
        self._ran_dry = False
        if not found or now - self._rebuilt_at < self._rebuild_every:
            return []
        self._rebuilt_at = now
        return found
