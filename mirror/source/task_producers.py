"""A copy task's producers on the target: one or more (FlowSettings.task_producers), each writing
a share of the task's partitions in a transaction of its own.

librdkafka sends one partition per produce request, with at most five in flight per connection,
and a commit waits for all of them: a task of hundreds of partitions sends its commit's requests
through several producers (a connection each) at once. All are opened, begun, and aborted
together; each commits on its own (mirror.source.transaction), so after a failed commit some
may be committed and others still open, which `open` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Consumer, Producer

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.packing_producer import CopyProducer, PackingProducer
from mirror.kafka.transactions import abort, call
from mirror.source.clients import task_writer
from mirror.source.partition_copy import PartitionCopy
from mirror.source.transaction import Writers

# How long an abort waits for the reports of records still in flight before it drops the
# producers instead: a bound on the wait, not a promise that a loaded target answers within it.
# Past it, new producers carry on; at-least-once, the dropped ones' records may still land
# (duplicates, which that mode allows).
REPORTS_SECONDS = 5.0


class TaskProducers:
    def __init__(self, settings: FlowSettings, index: int, parts: Sequence[PartitionCopy]) -> None:
        self._settings = settings
        self._parts = parts
        count = settings.task_producers(len(parts))
        # Dealt in the task's partition order: the same partition has the same producer (and so
        # the same transactional id) every epoch of the generation.
        for position, part in enumerate(parts):
            part.producer = position % count
        self.ids = [
            settings.copy_task_transactional_id(index, producer) if settings.exactly_once else None
            for producer in range(count)
        ]
        # Opens and commits the producers' transactions at once.
        self._pool = ThreadPoolExecutor(count, thread_name_prefix="commit") if count > 1 else None
        self.producers: list[CopyProducer] | None = None
        self.open = [False] * count  # per producer: a transaction begun, not committed or aborted

    @property
    def ready(self) -> bool:
        return self.producers is not None

    @property
    def in_transaction(self) -> bool:
        return any(self.open)

    def describe(self) -> str:
        """The ids, for the line that says the task took its partitions."""
        ids = [i for i in self.ids if i is not None]
        if not ids:
            return "transactional id none: at-least-once"
        return f"transactional id{'s' if len(ids) > 1 else ''} {', '.join(ids)}"

    def make(self) -> None:
        """One producer per id, each initialised: that fences every older holder of the id and
        settles a commit whose outcome was unknown, so none of ours is open when positions are read."""

        settings = self._settings
        topics = {part.remote_topic for part in self._parts} | {settings.offsets_topic}
        if settings.emit_offset_syncs and settings.offset_syncs_location == "target":
            topics.add(settings.offset_syncs_topic())

        def make(transactional_id: str | None) -> CopyProducer:
            return task_writer(settings, transactional_id, topics)

        self.open = [False] * len(self.ids)
        if self._pool is None:
            self.producers = [make(self.ids[0])]
        else:
            self.producers = list(self._pool.map(make, self.ids))

    def drop(self) -> None:
        """Forget every producer. Exactly-once, making them again fences the dropped ones and aborts
        what they held; at-least-once, what they still held may land meanwhile."""
        self._release()
        self.producers = None
        self.open = [False] * len(self.ids)

    def begin(self) -> None:
        """Every producer's transaction (a local step in librdkafka; an empty one commits without
        a request)."""
        if not self._settings.exactly_once or self.producers is None:
            return
        for index, producer in enumerate(self.producers):
            if not self.open[index]:
                call(producer.begin_transaction, f"flow {self._settings.name}: beginning a transaction")
                self.open[index] = True

    def writers(self, positions: Consumer, sync_producer: Producer | None) -> Writers:
        assert self.producers is not None  # noqa: S101 - made before copying
        return Writers(self.producers, positions, sync_producer, self._pool, [False] * len(self.producers))

    def sent(self) -> None:
        """After a batch of records was produced: delivery reports served (librdkafka's), or the
        records sent on (aiokafka's, at-least-once: mirror.kafka.packing_producer)."""
        for producer in self.producers or ():
            producer.poll(0)

    def committed(self, writers: Writers) -> None:
        """After a commit, whole or not: the producers that committed have no transaction open."""
        done = writers.committed or []
        self.open = [is_open and not d for is_open, d in zip(self.open, done, strict=True)]

    def abort(self) -> None:
        """Abort every open transaction and serve every record's delivery report; drop all the
        producers if one is unusable (aiokafka's is after any failed delivery, with or without a
        transaction open) or still has records unreported.

        The task forgets what it read since its last commit next. A report served after that
        would land in the next round's target offsets, one more than its source offsets (and
        the round stops on the mismatch): at-least-once, with no transaction to abort, the
        failed round's records may still be in flight here."""
        try:
            if self.producers is not None and not self._settled(self.producers):
                self.drop()  # never polled again, so their reports are never served
        finally:
            self.open = [False] * len(self.ids)

    def _settled(self, producers: Sequence[CopyProducer]) -> bool:
        """Every open transaction aborted and every report served, by producers still usable (a
        delivery that failed during the wait makes aiokafka's unusable too)."""
        usable = all(p.usable for p in producers if isinstance(p, PackingProducer))
        for index, producer in enumerate(producers):
            if self.open[index]:
                usable = abort(producer, f"flow {self._settings.name}: aborting") and usable
        if not usable or any(producer.flush(REPORTS_SECONDS) > 0 for producer in producers):
            return False
        return all(p.usable for p in producers if isinstance(p, PackingProducer))

    def close(self) -> None:
        self._release()
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def _release(self) -> None:
        """aiokafka's producers hold connections and tasks on their loop until stopped; librdkafka's
        go with their last reference."""
        for producer in self.producers or ():
            if isinstance(producer, PackingProducer):
                producer.close()
