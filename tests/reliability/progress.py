"""What a flow copied while a fault lasted, sampled once a second from outside `mirror run`: the
flow's committed positions on the target, and the source's end offsets beside them, so that a
partition that copied nothing can be told apart from one that had nothing to copy."""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import AdminClient

from mirror.kafka.offsets import high_watermarks
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
        # in a window is stuck only if the source held records past its position. mirror's own
        # reader asks again after fresh metadata, which a leader that died or moved needs.
        self._source = AdminClient(source.properties())
        self._ends: list[tuple[float, dict[Partition, int]]] = []
        self.ends_failed = 0  # samples of the source's ends that did not answer for every partition
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
        while not self._stop.wait(1.0):
            try:
                ends = high_watermarks(self._source, self.partitions)  # the load is not transactional
            except Exception:  # noqa: BLE001 - a leader down for longer than its retries: asked again
                self.ends_failed += 1
                continue
            self._ends.append((time.monotonic(), ends))

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

    def stuck_between(self, start: float, end: float) -> list[Partition]:
        """The idle partitions of `idle_between` that had records to copy: the source held records
        past their position at `start` by `end` less 10 s (time enough to copy a record). The
        partitions the load itself left alone are not stuck."""
        before = [positions for at, positions in self._positions if at <= start]
        ends = [sample for at, sample in self._ends if start < at <= end - 10]
        if not ends:  # a check that saw nothing must not pass, nor blame mirror
            raise NoSourceEndsError(
                f"no sample of the source's ends in the window ({self.ends_failed} samples failed)"
            )
        if not before:
            return self.partitions
        highest = {part: max(sample[part] for sample in ends) for part in self.partitions}
        return [part for part in self.idle_between(start, end) if highest[part] > before[-1][part]]

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
