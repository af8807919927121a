"""The source connector on the driver (MM2's MirrorSourceConnector): who owns the flow, which
copy task copies which partitions, and the fencing round before a new assignment copies.

Order, at start (steps 1 and 2 before the remote topics are made) and whenever the replicated
partitions change:
  1. commit the flow mark naming the new generation (mirror.flow.mark) through the lease;
     from then on a task of an older generation that re-opens sees it and ends;
  2. fence every copy-task transactional id that may exist (ids 0..task_ids-1, counting each
     task's producers): whatever a task
     of an older generation still holds open is aborted, and its next call fails as fenced;
  3. publish the assignment for the planner, which starts the generation's tasks in the next epoch.
A zombie task can therefore never commit a partition another task now owns (KIP-618's rule).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

from mirror.config.flow_settings import FlowSettings
from mirror.flow.mark import FlowMark
from mirror.kafka.fencing import fence_transactional_ids
from mirror.source.assignment import Assignment, SourcePartition, assign, moved
from mirror.source.job import PublishedAssignment
from mirror.source.lease import FlowLease
from mirror.source.positions import reconcile_positions
from mirror.topics.sync import TopicSync

log = logging.getLogger(__name__)


class SourceConnector:
    def __init__(
        self, settings: FlowSettings, topic_sync: TopicSync, state_dir: Path, out: Callable[[str], None]
    ) -> None:
        self._settings = settings
        self._topic_sync = topic_sync
        self._out = out
        self.assignment_file = state_dir / "assignment.json"
        self.lease: FlowLease | None = None
        self.published: PublishedAssignment | None = None
        self._previous: FlowMark | None = None  # the mark the lease's last holder committed
        self._generation_lock = threading.Lock()
        self._stopping = False

    def take(self) -> None:
        """Take the flow from whoever had it and fence their copy tasks; before the remote topics
        are made. On a fresh target the first transactional request makes and loads the
        transaction coordinator's topic, and a broker busy creating thousands of remote partitions
        loads it only after them: 13 s of a 10,000-partition start-up, taken the other way round."""
        settings = self._settings
        self.lease = FlowLease(settings)
        previous = self._previous = self.lease.take()
        task_ids = max(previous.task_ids if previous else 0, settings.copy_task_ids())
        generation = (previous.generation if previous else 0) + 1
        self.lease.acquire(
            FlowMark(settings.instance_id, generation, task_ids, started_ms=int(time.time() * 1000))
        )
        self._fence()

    def start(self) -> None:
        """After take() and the topic sync: publish the first assignment of what the target holds."""
        settings = self._settings
        assert self.lease is not None, "take() comes first"  # noqa: S101
        replicated = self._topic_sync.replicated_partitions()
        if self._previous is not None and self._previous.legacy:
            # A mirror from before copy tasks wrote per-partition transactions; end those too.
            self._fence(tasks=False, legacy=replicated)
        reconcile_positions(settings, set(replicated))
        self._publish(replicated, self.lease.mark.generation, PublishedAssignment.read(self.assignment_file))

    def refresh(self) -> None:
        """After a topic refresh: a new generation if partitions were added or removed."""
        if self.published is None or self.lease is None:
            return
        replicated = self._topic_sync.replicated_partitions()  # may wait on a source that is away
        # A refresh still running when shutdown begins must not fence the tasks while they commit
        # what they hold: the new generation, its fence and its assignment happen before
        # stop_tasks, or not at all.
        with self._generation_lock:
            if self._stopping or set(replicated) == self.published.assignment.partitions:
                return
            generation = self.published.assignment.generation + 1
            self.lease.update(lambda mark: replace(mark, generation=generation))
            self._fence()
            self._publish(replicated, generation, self.published)

    def stop_tasks(self) -> None:
        """Tell every copy task to commit what it holds and return (they read the mark twice a second)."""
        with self._generation_lock:
            self._stopping = True
            if self.lease is not None:
                self.lease.update(lambda mark: replace(mark, stopping=True))

    def _fence(self, *, tasks: bool = True, legacy: Collection[SourcePartition] = ()) -> None:
        """Fence every copy task's transactional id (`tasks`), and those of `legacy` partitions."""
        settings = self._settings
        if not settings.exactly_once or self.lease is None:
            return
        ids = (
            [settings.copy_task_transactional_id(i) for i in range(self.lease.mark.task_ids)] if tasks else []
        )
        ids += [settings.legacy_transactional_id(t, p) for t, p in legacy]
        fence_transactional_ids(settings.target_producer, ids, doing=f"flow {settings.name}: fencing")

    def _publish(
        self, replicated: Collection[SourcePartition], generation: int, previous: PublishedAssignment | None
    ) -> None:
        settings = self._settings
        before = previous.assignment.tasks if previous is not None else None
        tasks = assign(replicated, settings.tasks_max, before)
        known = previous.assignment.partitions if previous is not None else set()
        published = PublishedAssignment(Assignment(generation, tasks), frozenset(set(replicated) - known))
        published.write(self.assignment_file)
        if previous is not None and self.published is not None:
            self._out(
                f"flow {settings.name}: {len(replicated):,} partitions to copy "
                f"({len(published.new):,} new, {moved(before or (), tasks)} moved between tasks), "
                f"{sum(1 for t in tasks if t)} copy tasks, generation {generation}"
            )
        self.published = published
        log.info("flow %s: assignment generation %d published", settings.name, generation)
