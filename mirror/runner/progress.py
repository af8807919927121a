"""What the progress line and the source metrics say about a flow, fed by its copy tasks' stats.

Copy tasks send a stats message about once a second (mirror.source.stats); this turns them into
Prometheus metrics and the counters the supervisor prints every few seconds. Lag comes from Kafka
itself: the source's last stable offsets against the positions the flow committed on the target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mirror.config.flow_settings import FlowSettings
from mirror.errors import MirrorError
from mirror.kafka.clients import ADMIN_CONNECTIONS, committed_reader
from mirror.kafka.offsets import committed_positions, stable_ends
from mirror.metrics import SourceMetrics

log = logging.getLogger(__name__)


@dataclass
class FlowProgress:
    """Counters the stats messages update and the progress line reads."""

    records: int = 0
    bytes: int = 0
    fenced: int = 0
    truncated: int = 0
    window_records: int = 0
    window_bytes: int = 0
    window_latencies: list[float] = field(default_factory=list)
    window_started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The epoch gap: from the last copy task of one epoch ending to the first of the next starting.
    epoch: float = 0.0
    last_closed: float = 0.0
    gaps: list[float] = field(default_factory=list)

    def epoch_gap(self, message: dict[str, Any]) -> float | None:
        """The gap before this message's epoch, the first time a task of a new epoch reports."""
        with self.lock:
            gap = None
            if message["opened"] and message["epoch"] != self.epoch:
                if self.epoch and self.last_closed:
                    gap = max(0.0, message["opened"] - self.last_closed)
                    self.gaps.append(gap)
                self.epoch = message["epoch"]
            if message["closed"] and message["epoch"] == self.epoch:
                self.last_closed = max(self.last_closed, message["closed"])
            return gap

    def add(self, message: dict[str, Any]) -> None:
        with self.lock:
            for records, size in message["records"].values():
                self.records += records
                self.bytes += size
                self.window_records += records
                self.window_bytes += size
            self.fenced += message["fenced"]
            self.truncated += sum(message["truncated"].values())
            self.window_latencies.extend(message["latencies"])

    def take_window(self) -> tuple[float, float, list[float]]:
        """(records/s, bytes/s, transaction latencies) since the last call."""
        with self.lock:
            elapsed = max(time.monotonic() - self.window_started, 1e-6)
            window = self.window_records / elapsed, self.window_bytes / elapsed, sorted(self.window_latencies)
            self.window_records = self.window_bytes = 0
            self.window_latencies = []
            self.window_started = time.monotonic()
            return window


def stats_handler(
    progress: FlowProgress, metrics: SourceMetrics, out: Callable[[str], None]
) -> Callable[[dict[str, Any]], None]:
    """Applies one copy task's stats message: metrics, progress counters, and its events' lines."""

    def handle(message: dict[str, Any]) -> None:
        progress.add(message)
        metrics.record_task_stats(message)
        if message["opened"] and not progress.epoch:
            log.info("flow %s: copy task %d copying", message["flow"], message["task"])
        gap = progress.epoch_gap(message)
        if gap is not None:
            metrics.epoch_gap.labels(message["flow"]).observe(gap)
        for _kind, line in message["events"]:
            out(line)

    return handle


T = TypeVar("T")

# A lag read older than this is no longer the lag: shown as unknown, its series dropped.
LAG_STALE_SECONDS = 30.0


class LagReader:
    """Per source partition, records the source has that the flow has not committed yet.

    Every partition the flow selects counts, not only those it copies now: one whose remote topic
    could not be created is lagging by all its records, not absent. A read that keeps failing (or
    blocks: a busy source cluster answers slowly) makes the lag unknown after LAG_STALE_SECONDS,
    never a stale number."""

    def __init__(self, settings: FlowSettings) -> None:
        self._settings = settings
        # The source's ends through a read_committed consumer, which never joins or commits to its
        # group (stable_ends: no future per partition, unlike the admin client's). It keeps a
        # connection to every broker as the admin clients do (ADMIN_CONNECTIONS): the read waits on
        # a lost leader's partitions, and must not spin meanwhile.
        self._source_ends = committed_reader(
            {**ADMIN_CONNECTIONS, **settings.source_consumer}, settings.positions_group()
        )
        self._positions = committed_reader(settings.target_consumer, settings.positions_group())
        self._latest: dict[tuple[str, int], int] | None = None
        self._read_at: float | None = None
        # Since when a request to the source waits or has failed with no answer since (None while
        # it answers), and what the last one that failed ran into: cluster_answers reports it.
        self.source_unanswered_since: float | None = None
        self.source_problem: str | None = None
        # Whether the read waiting (or failed) had its topic listing answered: then only some
        # partitions' leaders are away (a broker down, its leaders not moved yet), not the cluster.
        self.source_answers_in_part = False

    @property
    def latest(self) -> dict[tuple[str, int], int] | None:
        """The last lag read, or None if there is none from the last LAG_STALE_SECONDS."""
        age = self.age_seconds
        return self._latest if age is not None and age <= LAG_STALE_SECONDS else None

    @property
    def age_seconds(self) -> float | None:
        return None if self._read_at is None else time.monotonic() - self._read_at

    def refresh(
        self, selected: Callable[[], Collection[tuple[str, int]]], copied: Collection[tuple[str, int]]
    ) -> None:
        """Read the lag now (on the scheduler: it blocks while a cluster is away). `selected` lists
        the source partitions the flow selects; `copied` are those it copies now."""
        try:
            # The listing alone is no answer: the ends are what wait on a lost broker's partitions,
            # and a silence ended by each listing would be said over again every read.
            self._latest = self.read(self._ask_source(selected, completes=False), copied)
            self._read_at = time.monotonic()
        except MirrorError as exc:
            log.debug("flow %s: lag not read: %s", self._settings.name, exc)

    def read(
        self, selected: Collection[tuple[str, int]], copied: Collection[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        s = self._settings
        ends = self._ask_source(lambda: stable_ends(self._source_ends, selected))
        # Only partitions being copied have a position; the others have copied nothing yet.
        remote = [(s.remote_topic(t), p) for t, p in copied if (t, p) in ends]
        positions = committed_positions(self._positions, remote)
        return {
            (t, p): max(0, end - positions.get((s.remote_topic(t), p), 0)) for (t, p), end in ends.items()
        }

    def _ask_source(self, ask: Callable[[], T], *, completes: bool = True) -> T:
        """`ask()` of the source, noting whether it answered; the target's part of a read (the
        positions) is not the source's, and a target away must not look like a silent source.
        A read begins with the topic listing (`completes=False`): once it answered, the cluster
        answers, and ends still waiting wait on some partitions' leaders (a dead leader's answer
        can take longer than the silence reported, SOURCE_LATE_SECONDS). No metadata request of its
        own: one made after the listing can meet a stall of its own (a machine stalled for 10 s as
        a broker was killed), and then one lost broker reads as a silent cluster."""
        if self.source_unanswered_since is None:
            self.source_unanswered_since = time.monotonic()
        try:
            answer = ask()
        except MirrorError as exc:
            self.source_problem = str(exc)
            if not completes:  # the listing: the cluster itself did not answer
                self.source_answers_in_part = False
            raise
        if completes:  # the read's last ask of the source: it answered
            self.source_unanswered_since, self.source_problem = None, None
            self.source_answers_in_part = False
        else:
            self.source_answers_in_part = True  # what waits now, waits on some leaders
        return answer

    def close(self) -> None:
        self._source_ends.close()
        self._positions.close()


def percentile(ordered: list[float], percent: float) -> float:
    index = min(len(ordered) - 1, max(0, round(percent / 100 * len(ordered)) - 1))
    return ordered[index]
