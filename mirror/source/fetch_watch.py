"""Partitions a copy task's consumer stopped fetching, though their source leaders hold records.

librdkafka (2.16) moves a partition to its new leader when the old one dies. Once in a while it
does not: in a CI run of the brokers-lost drill, 3 of the ~35 partitions one task read from a
SIGKILLed source leader copied nothing for the 45 s that broker stayed down, while the task
copied its other partitions, and the task whose clients were made again after a failure had
none stuck. So the task looks, every WATCH_SECONDS, for partitions whose read position has not
moved since the look before, and asks the source for their read_committed ends then (without
waiting: a dead leader answers only at its timeout). One still at that position at the next
look, with that end past it, has had records waiting and none read for two looks.

That alone also fits a partition fetched but starved: in a catch-up, a capped fetch answer holds
records of the request's first partitions only, and librdkafka rotates that order slowly. But
every fetch answer tells the end of every partition asked, records or not, and the consumer
keeps the last one told: a partition is stuck only if that end is still below the one the source
gave at the previous look, so no fetch answer for it came since. The task then reads it again
through new consumers (its rewind), at most once per REBUILD_SECONDS.

Each answer also says the source leader's epoch. librdkafka checks a partition's position against
a new leader's log (KIP-320) only when its metadata shows the epoch rise, and skips the check if
the leader is unknown at that moment; assign() does not check at all. A replica elected uncleanly
then looks, to a consumer idle at the old end, like a log that just has not grown: the records it
takes next, at the offsets lost, would never be read (2 of 4 partitions, in a local run of the
unclean-election test). So an idle partition whose source epoch rose since the watch last saw it
is named for a check (the task seeks it with the epoch it read at, which makes librdkafka check).
One check can come to nothing: librdkafka (2.15's source) skips it while an older check is in
flight and judges the new position by that one's answer, and a seek made while the leader is
unknown waits for metadata. So a partition whose copy is of an older epoch than its source
leader's is named again at the next looks, CHECKS_PER_EPOCH times in all: a check that finds
nothing costs one OffsetForLeaderEpoch request. (A CI run left 2 of 4 partitions at the old end
with one check each; why was not found, and a check come to nothing is one way it can happen.)

The cached end also goes stale while librdkafka fetches nothing at all because the task is behind
on what it fetched (its queue full: a throttled task, a slow target). So a look judges only if a
read came back empty since the one before: everything fetched had been taken, and librdkafka
fetches every partition it can.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence

from confluent_kafka.admin import AdminClient

from mirror.kafka.offsets import Partition, PendingOffsets, ask_last_stable_offsets
from mirror.source.partition_copy import PartitionCopy
from mirror.source.partition_reads import seek
from mirror.source.record_copy import consumer_positions
from mirror.source.split_reader import SplitReader

WATCH_SECONDS = 10.0
REBUILD_SECONDS = 60.0
CHECKS_PER_EPOCH = 3


class FetchWatch:
    def __init__(
        self,
        new_admin: Callable[[], AdminClient],
        fetched_end: Callable[[str, int], int],
        *,
        every: float = WATCH_SECONDS,
        rebuild_every: float = REBUILD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`fetched_end(topic, partition)`: the end its consumer's last fetch answer told, -1 if none."""
        self._new_admin, self._fetched_end = new_admin, fetched_end
        self._admin: AdminClient | None = None
        self._every, self._rebuild_every, self._clock = every, rebuild_every, clock
        self._next_look = clock() + every
        self._rebuilt_at = -rebuild_every
        self._drained = False  # a read came back empty since the last look
        self._seen: dict[Partition, int] = {}  # read positions at the last look
        # The partitions idle at the last look, with their positions then, and their ends as asked then.
        self._asked: tuple[dict[Partition, int], PendingOffsets] | None = None
        self._epochs: dict[Partition, int] = {}  # the source epoch each idle partition was seen at
        self._checks: dict[Partition, int] = {}  # how many times it was named at that epoch
        self._to_check: list[tuple[PartitionCopy, int]] = []

    def read(self, records: int) -> None:
        """The task read `records` records (0: nothing was fetched and waiting)."""
        if records == 0:
            self._drained = True

    def describe(self, flow: str, stuck: Sequence[tuple[PartitionCopy, int]]) -> str:
        """The console line for partitions `stuck` returned."""
        part, end = stuck[0]
        return (
            f"flow {flow}: {len(stuck)} partitions had records on the source but none read for "
            f"{2 * self._every:g}s or more (e.g. {part.topic}-{part.partition} at "
            f"{part.read_position()}, end {end}); reading them through new consumers"
        )

    def restart(self) -> None:
        """New consumers: what the old ones did (or did not) fetch says nothing of them, and
        assign() checked none of their positions against the leaders' epochs."""
        self._seen, self._asked, self._epochs, self._checks, self._to_check = {}, None, {}, {}, []
        self._next_look = self._clock() + self._every

    def stuck(
        self, parts: Sequence[PartitionCopy], paused: Collection[Partition] = ()
    ) -> list[tuple[PartitionCopy, int]]:
        """The partitions to read through new consumers, each with its source end; [] but at a
        look, and between rebuilds. A partition `paused` (mirror.source.idle_pause) is fetched by
        no one on purpose: never stuck, though its epoch is still watched."""
        now = self._clock()
        if now < self._next_look:
            return []
        self._next_look = now + self._every
        reads = {(part.topic, part.partition): part.read_position() for part in parts}
        found: list[tuple[PartitionCopy, int]] = []
        drained, self._drained = self._drained, False
        if self._asked is not None:
            idle, pending = self._asked
            if pending.failed() and self._admin is not None:
                # It may be asking a leader that died, or with a stale epoch: a new client asks anew.
                _drop_elsewhere(self._admin)
                self._admin = None
            ends = pending.answered()
            self._note_epochs(parts, idle, reads, pending.answered_epochs())
            found = [
                (part, ends[key])
                for part in parts
                if drained
                and (key := (part.topic, part.partition)) in idle
                and key not in paused
                and reads[key] == idle[key]
                and ends.get(key, -1) > reads[key]
                and self._fetched_end(*key) < ends[key]
            ]
        idle = {key: read for key, read in reads.items() if self._seen.get(key) == read}
        self._seen = reads
        self._asked = None
        if idle:
            if self._admin is None:
                self._admin = self._new_admin()
            self._asked = (idle, ask_last_stable_offsets(self._admin, idle))
        if not found or now - self._rebuilt_at < self._rebuild_every:
            return []
        self._rebuilt_at = now
        return found

    def to_check(self) -> list[tuple[PartitionCopy, int]]:
        """Idle partitions whose source leader epoch rose since the last look that saw them (or
        since new consumers took them), each with that epoch; named at the looks that find it idle
        CHECKS_PER_EPOCH times in all while what was copied from it is of an older (or unknown)
        epoch, else once."""
        found, self._to_check = self._to_check, []
        return found

    def _note_epochs(
        self,
        parts: Sequence[PartitionCopy],
        idle: dict[Partition, int],
        reads: dict[Partition, int],
        epochs: dict[Partition, int],
    ) -> None:
        for part in parts:
            key = (part.topic, part.partition)
            epoch = epochs.get(key)
            if epoch is None or key not in idle or reads[key] != idle[key] or part.upstream:
                continue
            if epoch > self._epochs.get(key, -1):
                self._epochs[key], self._checks[key] = epoch, 0
            elif epoch < self._epochs[key] or part.epoch >= epoch:
                continue  # an answer from before the rise, or copied at the leader's epoch: checked
            if self._checks[key] < CHECKS_PER_EPOCH:
                self._checks[key] += 1
                self._to_check.append((part, epoch))


def check_against_leaders(
    source: SplitReader, checks: Sequence[tuple[PartitionCopy, int]]
) -> list[tuple[PartitionCopy, int, int]]:
    """Seek each partition FetchWatch.to_check named to where it is, with the epoch of what was
    copied from it, if its source leader's epoch is past that: librdkafka then checks the new
    leader's log still holds it, and a log cut shorter comes back as a consume error, handled as
    any truncation found. Returns those sought, each with the epoch it was sought with and its
    leader's."""
    if not checks:
        return []
    read = consumer_positions(source, [part for part, _ in checks])
    sought = []
    for (part, source_epoch), (_, read_epoch) in zip(checks, read, strict=True):
        # The committed epoch is that of the last record copied: the one the check must be of (the
        # consumer's may already name the new leader's). The consumer's when none was committed.
        epoch = part.epoch if part.epoch >= 0 else read_epoch
        position = part.read_position()
        if 0 <= epoch < source_epoch and position > 0 and not part.upstream:
            seek(source.reader_of(part.topic, part.partition), part.topic, part.partition, position, epoch)
            part.sought = True
            sought.append((part, epoch, source_epoch))
    return sought


def describe_checks(sought: Sequence[tuple[PartitionCopy, int, int]]) -> str:
    """The log line for the checks check_against_leaders made."""
    part, epoch, leader_epoch = sought[0]
    return (
        f"checking {len(sought)} idle partitions against their new source leaders' logs (KIP-320), "
        f"e.g. {part.topic}-{part.partition} at {part.read_position()}, copied at epoch {epoch}, its "
        f"leader at {leader_epoch}"
    )


def _drop_elsewhere(client: AdminClient) -> None:
    """Let go of `client` on a thread of its own: the last reference going destroys the librdkafka
    client where it goes, which waits for its broker threads, and the copy loop must not wait."""
    threading.Thread(target=lambda _: None, args=(client,), name="drop-admin", daemon=True).start()
