"""Idle partitions a copy task of thousands of partitions stops fetching until their source has
records for them again: the fetch sessions (KIP-227) librdkafka lacks, kept by the task.

Every fetch a librdkafka consumer sends names every partition it reads from that broker, records or
not, and the broker's cost is per partition named. Java's consumer, and so MM2, names only the
partitions that changed since its last fetch. In the 10,000-partition bench, half of them idle,
the source broker spent 94 CPU-s per million records copied by `mirror` against 60 for MM2, on a
machine the steady load saturates: latency there is queueing for CPU.

So a partition whose read position has not moved for IDLE_SECONDS (the flow's
`pause_idle_partitions_after_seconds`; null turns this off) is paused: librdkafka leaves it out
of its fetches, drops what it had fetched of it and not handed over, and when it is resumed
fetches it from the position the task consumed up to. Every ASK_SECONDS a thread asks the source
for the paused partitions' read_committed ends (one ListOffsets request per leader, through a
consumer of its own that reads nothing), and the task resumes every one whose end passed the
position it was paused at. A record in a paused partition thus waits up to ASK_SECONDS, plus an
answer and the task's next look, more; only partitions quiet for IDLE_SECONDS pay that, and only
in tasks of more than PARTITIONS_PER_CONSUMER partitions, where these fetches are the source
broker's main load (mirror.source.split_reader). Under that bench's load the source broker's CPU
per million records fell from 94 to 78 s.

A partition resumed because its end grew is not paused again until its position moves: one its
consumer then fails to fetch stays in sight of the fetch watch (mirror.source.fetch_watch), which
never judges a paused one. It fails open: a partition the source has not answered for within
ANSWER_SECONDS (a leader gone, an authorisation lost) is resumed and fetched as before.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition

from mirror.kafka.offsets import Partition
from mirror.source.partition_copy import PartitionCopy
from mirror.source.split_reader import PARTITIONS_PER_CONSUMER

log = logging.getLogger(__name__)

IDLE_SECONDS = 30.0
ASK_SECONDS = 1.0
ANSWER_SECONDS = 5.0
# How often read positions are compared: a look at 5,000 partitions costs a few ms of the copy loop.
IDLE_CHECK_SECONDS = 5.0


class Pausable(Protocol):
    """The task's source reads (mirror.source.split_reader.SplitReader)."""

    def pause(self, partitions: Sequence[Partition]) -> None: ...

    def resume(self, partitions: Sequence[Partition]) -> None: ...


class IdlePause:
    def __init__(
        self,
        new_asker: Callable[[], Consumer],
        *,
        idle_seconds: float = IDLE_SECONDS,
        ask_seconds: float = ASK_SECONDS,
        answer_seconds: float = ANSWER_SECONDS,
        check_seconds: float = IDLE_CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`new_asker()`: a read_committed consumer, never assigned, owned by the asking thread."""
        self._new_asker = new_asker
        self._idle, self._ask_every, self._answer_within = idle_seconds, ask_seconds, answer_seconds
        self._check_every, self._clock = check_seconds, clock
        self._next_check = clock() + check_seconds
        self._since: dict[Partition, tuple[int, float]] = {}  # read position, and since when
        self._paused: dict[Partition, tuple[int, float]] = {}  # position when paused, and when
        # What the thread asks next (the main loop replaces it whole) and the last answer it got:
        # when it was asked, and the ends. Plain references: each swap is atomic under the GIL.
        self._asking: list[TopicPartition] = []
        self._answer: tuple[float, dict[Partition, int]] = (-1.0, {})
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._said = False  # the first pause is logged at INFO, the rest at DEBUG

    @staticmethod
    def wanted(partitions: int) -> bool:
        """Whether a task of `partitions` partitions pauses idle ones: only where a consumer's
        fetches would name more than one consumer's share."""
        return partitions > PARTITIONS_PER_CONSUMER

    @property
    def paused(self) -> Collection[Partition]:
        return self._paused.keys()

    def look(self, parts: Sequence[PartitionCopy], source: Pausable) -> None:
        """Resume the paused partitions the source holds more of (or has not answered for), then,
        every IDLE_CHECK_SECONDS, pause those idle for IDLE_SECONDS."""
        now = self._clock()
        if self._paused:
            self._wake_answered(now, source)
        if now < self._next_check:
            return
        self._next_check = now + self._check_every
        idle: list[Partition] = []
        since = self._since
        for part in parts:
            key = (part.topic, part.partition)
            if key in self._paused:
                continue
            position = part.read_position()
            seen = since.get(key)
            if seen is None or seen[0] != position:
                since[key] = (position, now)
            elif now - seen[1] >= self._idle and not part.upstream and position >= 0:
                idle.append(key)
        if idle:
            source.pause(idle)
            for key in idle:
                self._paused[key] = (since[key][0], now)
            self._ask_for_paused()
            # Paused as of now, after the list is out: an ask begun before (its time read first)
            # may lack them, and must not count as an answer for them.
            paused_at = self._clock()
            for key in idle:
                self._paused[key] = (since[key][0], paused_at)
            log.log(
                logging.DEBUG if self._said else logging.INFO,
                "not fetching %d partitions idle for %g s, until the source holds more of them "
                "(%d such in all; e.g. %s-%d)",
                len(idle),
                self._idle,
                len(self._paused),
                *idle[0],
            )
            self._said = True

    def wake(self, keys: Collection[Partition], source: Pausable) -> None:
        """Resume `keys` now (those paused): a check against the leader's log must fetch them."""
        woken = [key for key in keys if key in self._paused]
        if woken:
            self._resume(woken, source)

    def restart(self) -> None:
        """New consumers: nothing is paused, and every position is new."""
        self._since, self._paused = {}, {}
        self._ask_for_paused()
        self._next_check = self._clock() + self._check_every

    def close(self) -> None:
        self._closed.set()

    def _wake_answered(self, now: float, source: Pausable) -> None:
        asked_at, ends = self._answer
        moved, unanswered = [], []
        for key, (position, paused_at) in self._paused.items():
            end = ends.get(key) if asked_at >= paused_at else None
            if end is not None and end != position:
                # Grown; or shorter (the topic re-created, its log cut): fetching finds out what.
                moved.append(key)
            elif now - max(paused_at, asked_at) >= self._answer_within:
                # No answer for it since it was paused, or none at all lately (offsets_for_times
                # fails whole if one leader does not answer): fail open.
                unanswered.append(key)
            elif end is None and asked_at >= paused_at:
                unanswered.append(key)  # an error for it in an answer
        if moved:
            self._resume(moved, source, until_moved=True)
            log.debug("fetching %d paused partitions again: the source holds more of them", len(moved))
        if unanswered:
            self._resume(unanswered, source)
            log.debug(
                "fetching %d paused partitions again: the source did not say their ends", len(unanswered)
            )

    def _resume(self, keys: list[Partition], source: Pausable, *, until_moved: bool = False) -> None:
        source.resume(keys)
        since = math.inf if until_moved else self._clock()  # idle again IDLE_SECONDS from now
        for key in keys:
            position, _ = self._paused.pop(key)
            self._since[key] = (position, since)
        self._ask_for_paused()

    def _ask_for_paused(self) -> None:
        self._asking = [TopicPartition(topic, partition, OFFSET_END) for topic, partition in self._paused]
        if self._asking and self._thread is None:
            self._thread = threading.Thread(target=self._ask_loop, name="idle-ends", daemon=True)
            self._thread.start()

    def _ask_loop(self) -> None:
        """The asking thread: it alone uses the asker, and closes it when the task closes."""
        asker = self._new_asker()
        try:
            while not self._closed.wait(self._ask_every):
                asked_at = self._clock()  # before the list is read: it holds all paused by then
                asking = self._asking
                if not asking:
                    continue
                try:
                    answered = asker.offsets_for_times(asking, timeout=self._answer_within)
                except KafkaException:
                    continue  # a leader away, a timeout: unanswered, the paused partitions wake
                ends = {(tp.topic, tp.partition): tp.offset for tp in answered if tp.error is None}
                self._answer = (asked_at, {key: end for key, end in ends.items() if end >= 0})
        finally:
            with contextlib.suppress(KafkaException, RuntimeError):
                asker.close()
