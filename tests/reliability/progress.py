"""What a flow copied while a fault lasted, sampled once a second from outside `mirror run`: the
flow's committed positions on the target, and the source's end offsets beside them, so that a
partition that copied nothing can be told apart from one that had nothing to copy."""

from __future__ import annotations

import threading
import time

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from mirror.kafka.clients import admin_client
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import committed_positions, source_partitions

Partition = tuple[str, int]


class NoSourceEndsError(AssertionError):
    """No sample of the source's ends fell in a window: nothing can be said of its partitions."""


class Progress:
    """Samples how many records the flow has committed, once a second, in the background: the
    longest time without progress, and what was copied in a window of time."""

    def __init__(self, source: KafkaCluster, target: KafkaCluster, topics: list[str]) -> None:
        # The partitions are listed once, now: a sample must ask only the target, or it would fail
        # (and show a stall that is not there) while a source broker is down.
        self._target = target
        self._remote = {(t, p): (f"A.{t}", p) for t, p in source_partitions(source, topics)}
        self.samples: list[tuple[float, int]] = []
        self._positions: list[tuple[float, dict[Partition, int]]] = []
        # The source's end offsets, sampled apart (a partition whose leader is down does not answer
        # until it moves, and must not hold up the target's samples): a partition that did not copy
        # in a window is stuck only if the source held records past its position.
        self._source_properties = source.properties()
        self._ends: list[tuple[float, dict[Partition, int]]] = []
        self.ends_failed = 0  # samples of the source's ends in which no partition answered
        self._ends_error = ""  # the last error a partition's end was asked with
        self.partitions = sorted(self._remote)
        self.failed = 0  # samples the target did not answer, once copying had begun
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name="progress", daemon=True),
            threading.Thread(target=self._sample_ends, name="source-ends", daemon=True),
        ]

    def __enter__(self) -> Progress:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _sample_ends(self) -> None:
        latest = OffsetSpec.latest()  # the high watermark: the load is not transactional
        while not self._stop.wait(1.0):
            # A new client each time, so each sample learns the leaders afresh. Each partition on
            # its own: one offline on the source (its only in-sync replica the broker that died)
            # answers nothing for the whole outage, and must not hide the others' ends.
            # Kept connected to every broker: see ADMIN_CONNECTIONS (its requests to a dead leader spun
            # a core each, and starved the brokers the test watches).
            admin = admin_client(self._source_properties)
            asked = admin.list_offsets(
                {TopicPartition(*part): latest for part in self.partitions},
                isolation_level=IsolationLevel.READ_UNCOMMITTED,
                request_timeout=10,
            )
            ends: dict[Partition, int] = {}
            for tp, future in asked.items():
                try:
                    offset = future.result(timeout=15).offset
                except Exception as exc:  # noqa: BLE001 - that partition's end is not known now
                    self._ends_error = str(exc)
                    continue
                if offset >= 0:  # a whole request to a dead leader answers -1001, not an error
                    ends[(tp.topic, tp.partition)] = offset
            if ends:
                self._ends.append((time.monotonic(), ends))
            else:
                self.ends_failed += 1

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                positions = committed_positions(self._target, self._remote)
            except Exception:  # noqa: BLE001 - a broker down (or no remote topic yet): asked again
                if self.samples:
                    self.failed += 1
                continue
            copied = sum(max(0, offset) for offset in positions.values())
            if copied:
                self.samples.append((time.monotonic(), copied))
                self._positions.append((time.monotonic(), positions))
            elif self.samples:  # no position at all: the target did not answer
                self.failed += 1

    def idle_between(self, start: float, end: float) -> list[Partition]:
        """Partitions whose committed position did not move after `start` and up to `end` (every
        partition if no sample shows either end)."""
        before = [positions for at, positions in self._positions if at <= start]
        inside = [positions for at, positions in self._positions if start < at <= end]
        if not before or not inside:
            return self.partitions
        return sorted(part for part, offset in inside[-1].items() if offset <= before[-1][part])

    def stuck_between(self, start: float, end: float) -> tuple[list[Partition], list[Partition]]:
        """The idle partitions of `idle_between` that had records to copy (the source held records
        past their position at `start` by `end` less 10 s, time enough to copy a record), and those
        whose end no sample knew (offline on the source: nothing could be written to them or read).
        The partitions the load itself left alone are neither."""
        before = [positions for at, positions in self._positions if at <= start]
        ends = [sample for at, sample in self._ends if start < at <= end - 10]
        if not ends:  # a check that saw nothing must not pass, nor blame mirror
            raise NoSourceEndsError(
                f"no sample of the source's ends in the window ({self.ends_failed} samples failed, "
                f"the last with: {self._ends_error})"
            )
        idle = self.idle_between(start, end)
        if not before:
            return idle, []
        known = {
            part: max(sample[part] for sample in ends if part in sample)
            for part in idle
            if any(part in sample for sample in ends)
        }
        stuck = [part for part, highest in known.items() if highest > before[-1][part]]
        return stuck, [part for part in idle if part not in known]

    def copied_between(self, start: float, end: float) -> int:
        """Records committed after `start` and up to `end` (0 if no sample shows any)."""
        before = [copied for at, copied in self.samples if at <= start]
        inside = [copied for at, copied in self.samples if start < at <= end]
        return max(inside) - max(before) if before and inside else 0

    def longest_stall(self, start: float = 0.0, end: float = float("inf")) -> float:
        """Seconds between two samples that saw progress, the longest such gap ending in
        [start, end]."""
        longest, last_at, last = 0.0, None, -1
        for at, copied in self.samples:
            if copied > last:
                if last_at is not None and start <= at <= end:
                    longest = max(longest, at - last_at)
                last_at, last = at, copied
        return longest
