"""A copy task: MM2's MirrorSourceTask for `mirror`. Runs on a Spark executor for one epoch.

The task owns a fixed set of source partitions for its generation. It consumes them all with
one consumer and writes through one or more producers (FlowSettings.task_producers), each owning
a share of the partitions, whose transactional ids belong to the task slot, so opening the task
fences every older holder of them (a retried Spark task, the previous epoch, a zombie). Every
`commit_interval_ms` it commits what it copied (mirror.source.transaction).

It ends when the epoch's window runs out, when the flow mark names a newer generation (the
assignment changed) or says the owner is stopping, and raises FlowTakenOverError when another
`mirror run` owns the flow. Before a generation's tasks copy, the driver fences every task slot
id of the older ones; a fenced task re-opens only after the mark shows its generation is still
current, so a zombie can never commit a partition another task now owns.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Literal

from confluent_kafka import Consumer

from mirror.config.flow_settings import FlowSettings
from mirror.errors import (
    ClusterAuthenticationError,
    FlowTakenOverError,
    KafkaClientError,
    MirrorError,
    NotAuthorizedError,
    ProducerFencedError,
    ProducerStuckError,
)
from mirror.flow.ownership import flow_mark_reader, stop_if_flow_taken_over
from mirror.kafka.transactions import AbortableError, RetriableError
from mirror.logs import log_context, partition_names
from mirror.source.clients import RareClients, positions_reader, source_reader, sync_writer
from mirror.source.losses import handle_consume_errors
from mirror.source.partition_copy import PartitionCopy
from mirror.source.position_sweep import PositionSweep
from mirror.source.record_copy import ConsumeError, consumer_positions, copy_messages, next_messages
from mirror.source.start import read_positions, start_of
from mirror.source.stats import StatsSender
from mirror.source.task_fetches import TaskFetches
from mirror.source.task_producers import TaskProducers
from mirror.source.task_reports import TaskReports
from mirror.source.task_spec import CopyTaskSpec, TaskSummary
from mirror.source.throttle import Throttle
from mirror.source.transaction import OpenTransaction, RemoteRecreatedError, commit_moved, needs_commit

log = logging.getLogger(__name__)

CONSUME_BATCH = 10_000
CHECK_SECONDS = 0.5  # how often the task reads the flow mark and sweeps positions (a slice of them)
MAX_TRANSACTION_RECORDS = 50_000
MAX_TRANSACTION_BYTES = 32 * 1024 * 1024
# A task that has committed nothing for this long, over at least MIN_FAILURES tries, fails; Spark
# retries it, and after that the supervisor restarts the query with backoff.
STALL_SECONDS = 120.0
MIN_FAILURES = 5
State = Literal["current", "stale", "stopping"]
TRANSIENT_ERRORS = (AbortableError, RetriableError, RemoteRecreatedError, KafkaClientError)
_ENDINGS = {
    "window": "the epoch's window ended",
    "stale": "a newer assignment generation owns them",
    "stopping": "the flow's owner is stopping",
}


def run_copy_task(settings: FlowSettings, spec: CopyTaskSpec) -> TaskSummary:
    with log_context(flow=settings.name, component="source", task=spec.index):
        try:
            with _CopyTask(settings, spec) as task:
                summary = task.run()
        except FlowTakenOverError as exc:
            log.warning("stopping: %s", exc, extra=_owned(spec))
            raise
        except MirrorError as exc:
            log.error("stopping: %s", exc, extra=_owned(spec))
            raise
        log.info(
            "gave up %d partitions: %s; %d records in %d transactions",
            summary.partitions,
            _ENDINGS.get(summary.ended, summary.ended),
            summary.records,
            summary.transactions,
            extra=_owned(spec),
        )
        return summary


def _owned(spec: CopyTaskSpec) -> dict[str, list[str]]:
    """The `partitions` field of a line about all the task's partitions (mirror.logs)."""
    return {"partitions": partition_names(spec.partitions)}


class _CopyTask:
    def __init__(self, settings: FlowSettings, spec: CopyTaskSpec) -> None:
        self.settings, self.spec = settings, spec
        policy = settings.policy()
        self.parts = [
            PartitionCopy(
                settings.name, t, p, policy.remote_topic(settings.source, t), settings.offset_lag_max
            )
            for t, p in spec.partitions
        ]
        self.writers = TaskProducers(settings, spec.index, self.parts)
        self.sinks = {(part.topic, part.partition): part for part in self.parts}
        self.summary = TaskSummary(spec.index, spec.generation, len(self.parts))
        self.stats = StatsSender(spec.stats_address, settings.name, spec.index, spec.deadline)
        self.source = source_reader(settings, [(part.topic, part.partition) for part in self.parts])
        self.positions: Consumer = positions_reader(settings)
        self.mark_reader: Consumer = flow_mark_reader(settings)
        self.rare = RareClients(settings)
        self.sync_producer = (
            sync_writer(settings)
            if settings.emit_offset_syncs and settings.offset_syncs_location == "source"
            else None
        )
        rate = spec.throttle_bytes_per_second
        self.throttle = Throttle(rate) if rate is not None else None
        self._began = time.monotonic()  # when the open transaction began
        self.reports = TaskReports(self.stats)
        self.fetches = TaskFetches(settings, len(self.parts), self.source, self.stats)
        self.sweeper = PositionSweep(self.parts)
        self._batch = OpenTransaction()

    def __enter__(self) -> _CopyTask:
        return self

    def __exit__(self, *_: object) -> None:
        self.fetches.close()  # first: its thread must stop whatever fails below
        if self.in_transaction:
            self._abort()  # whatever stops the task must not leave its transaction open
        self.stats.current.closed = time.time()
        self.stats.send()
        self.stats.close()
        for client in (self.source, self.positions, self.mark_reader, self.rare):
            client.close()
        if self.sync_producer is not None:
            self.sync_producer.flush(30)
        self.writers.close()

    @property
    def in_transaction(self) -> bool:
        return self.writers.in_transaction

    def run(self) -> TaskSummary:
        failures, committed, last_progress = 0, 0, time.monotonic()
        rewind = False
        while True:
            try:
                if not self.writers.ready:
                    state = self._open()
                    if state != "current":
                        self.summary.ended = state
                        return self.summary
                elif rewind:
                    self._rewind()
                rewind = False
                self.summary.ended = self._copy()
                return self.summary
            except (NotAuthorizedError, ClusterAuthenticationError):
                raise  # a missing ACL or refused credentials: only the user can fix it
            except ProducerFencedError as exc:
                # Stuck in librdkafka, or fenced: by a zombie of an older generation re-opening, or
                # by a fencing round. Which one, the mark says when the task opens again; a task of
                # an older generation just ends.
                log.info("fenced (%s); opening again if the flow mark still names this generation", exc)
                if isinstance(exc, ProducerStuckError):
                    # Replaced, not fenced (mirror_source_producers_fenced_total stays for fences):
                    # its transaction counts as aborted.
                    self.stats.current.aborted += 1
                else:
                    self.stats.current.fenced += 1
                self.writers.drop()
            except TRANSIENT_ERRORS as exc:
                self._back_to_committed(exc)
                rewind = True
            failures += 1
            if self.summary.transactions > committed:
                failures, committed, last_progress = 1, self.summary.transactions, time.monotonic()
            if time.monotonic() - last_progress > STALL_SECONDS and failures >= MIN_FAILURES:
                raise KafkaClientError(
                    f"flow {self.settings.name}: copy task {self.spec.index} committed nothing for "
                    f"{STALL_SECONDS:g}s ({failures} failed attempts)"
                )
            time.sleep(min(0.2 * failures, 2.0))

    def _open(self) -> State:
        """New producer (fencing older holders of the id), then the mark, then the positions;
        "current" once open. A task whose flow is stopping does not open (again): after a fence,
        what it held was aborted, and opening would fence the tasks of whoever took over."""
        began = time.monotonic()
        state = self._state()
        if state != "current":
            return state  # asked first too: a zombie of an older generation fences no one
        self.writers.make()
        made = time.monotonic()
        state = self._state()
        if state != "current":
            return state
        self._rewind()
        if not self.stats.current.opened:
            self.stats.current.opened = time.time()
            # How long each step took: after a fault, the time to open again is part of the stall.
            opened = time.monotonic()
            log.info(
                "took %d partitions in %.1f s (producers %.1f s, mark and positions %.1f s) "
                "(generation %d, %s)",
                len(self.parts),
                opened - began,
                made - began,
                opened - made,
                self.spec.generation,
                self.writers.describe(),
                extra=_owned(self.spec),
            )
        return "current"

    def _rewind(self) -> None:
        """Back to what the target says was committed: after an abort, or on opening."""
        self._forget_reads()
        read_positions(
            self.settings,
            self.parts,
            positions=self.positions,
            source_admin=self.rare.source_admin,
            remote=self.rare.remote_reader,
            target_admin=self.rare.target_admin,
            report=self.reports.report,
        )
        # Through new consumers (SplitReader.assign): the old ones could name positions past the abort.
        self.source.assign([start_of(part) for part in self.parts])
        self.fetches.restart()

    def _copy(self) -> str:
        interval = self.settings.commit_interval_ms / 1000
        self._batch = OpenTransaction()
        next_check = held_until = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_check:
                next_check = now + CHECK_SECONDS
                ended = self._look()
                if ended is not None:
                    return ended
            if now < held_until:
                # Throttled: what was copied is committed now rather than held back while the
                # task waits, and the flow mark is still read every CHECK_SECONDS.
                if self._batch.opened_at is not None:
                    self._commit()
                pause = max(0.0, min(held_until, next_check) - time.monotonic())
                time.sleep(pause)
                self.stats.current.throttled += pause
                self.stats.maybe_send()  # a long hold must not hold back the task's metrics
                continue
            batch = self._batch
            wait = next_check if batch.opened_at is None else min(next_check, batch.opened_at + interval)
            most = CONSUME_BATCH if self.throttle is None else self.throttle.batch(CONSUME_BATCH)
            messages = next_messages(self.source, most, max(0.0, wait - time.monotonic()))
            self.fetches.read(len(messages))
            if messages:
                if batch.opened_at is None:
                    batch.opened_at = self._began = time.monotonic()
                    self.writers.begin()
                errors, copied_bytes = copy_messages(messages, self.writers.producers or (), self.sinks)
                self.writers.sent()
                self._handle(errors)
                batch.records += len(messages)
                batch.size += copied_bytes
                if self.throttle is not None:
                    held_until = self.throttle.charge(copied_bytes, len(messages))
            if batch.opened_at is not None and (
                time.monotonic() - batch.opened_at >= interval
                or batch.records >= MAX_TRANSACTION_RECORDS
                or batch.size >= MAX_TRANSACTION_BYTES
            ):
                self._commit()
            self.stats.maybe_send()

    def _look(self) -> str | None:
        """Every CHECK_SECONDS: the flow mark, the window, swept positions, stuck fetches; how the
        task ended if it did."""
        state = self._state()
        ending = state != "current" or time.time() >= self.spec.deadline
        self.sweeper.sweep(self.source, every=ending)
        opened = self._batch.opened_at is not None
        stuck = self.fetches.look(self.parts, ending=ending)
        if opened and (ending or stuck):
            self._commit()  # before reading stuck partitions again too: new consumers start after it
        elif not opened and not stuck and needs_commit(self.parts):
            # Positions moved past markers, and quiet partitions' last syncs: they open a
            # transaction that commits within the interval, with whatever records come
            # meanwhile. Committed on their own at once, they cost a commit each time a
            # steady load over thousands of partitions left one quiet, and the copy
            # stopped reading while it ran.
            self._batch.opened_at = self._began = time.monotonic()
            self.writers.begin()
        if ending:
            if needs_commit(self.parts):
                self._commit()  # the last records' syncs: the next task will not know them
            return "window" if state == "current" else state
        if stuck:
            self._read_again(stuck)
        else:
            self.fetches.check_against_leaders()
        return None

    def _commit(self) -> None:
        self._batch = OpenTransaction()
        self.writers.begin()  # a commit may come with nothing copied (positions swept) and still writes
        touched = [part for part in self.parts if part.upstream]
        if not touched:
            self._began = time.monotonic()  # a transaction of positions and syncs only begins now
        for part, (position, epoch) in zip(touched, consumer_positions(self.source, touched), strict=True):
            part.read_up_to(position, epoch)
        writers = self.writers.writers(self.positions, self.sync_producer)
        try:
            once, stats = self.settings.exactly_once, self.stats.current
            records = commit_moved(self.settings, self.parts, writers, stats, in_transaction=once)
        finally:
            self.writers.committed(writers)
        self.summary.records += records
        self.summary.transactions += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "committed %d records of %d partitions in %.0f ms (%s)",
                records,
                len(touched),
                (time.monotonic() - self._began) * 1000,
                writers.times,
                extra={"partitions": partition_names((p.topic, p.partition) for p in touched)},
            )

    def _read_again(self, stuck: list[tuple[PartitionCopy, int]]) -> None:
        """Partitions whose consumer stopped fetching them (mirror.source.fetch_watch): every
        partition is read again from its committed position, through new consumers."""
        message = self.fetches.describe(self.settings.name, stuck)
        log.warning(message, extra=_owned(self.spec))
        self.reports.report("rebuilt", message)
        self._rewind()

    def _handle(self, errors: list[ConsumeError]) -> None:
        handle_consume_errors(
            self.settings,
            errors,
            self.sinks,
            self.source.reader_of,
            self.rare.source_admin,
            stats=lambda: self.stats.current,
            report=self.reports.report,
        )

    def _state(self) -> State:
        """What the flow mark says of this task: FlowTakenOverError if another instance owns the flow."""
        if self.spec.stop_file and os.path.exists(self.spec.stop_file):  # noqa: PTH110 - twice a second
            return "stopping"
        try:
            mark = stop_if_flow_taken_over(self.settings, self.mark_reader)
        except (RetriableError, AbortableError, KafkaClientError):
            return "current"  # the target cannot say now; the next check asks again
        if mark is None or mark.legacy:
            return "current"
        if mark.generation != self.spec.generation:
            return "stale"
        return "stopping" if mark.stopping else "current"

    def _back_to_committed(self, error: Exception) -> None:
        """Nothing uncommitted counts; only an open transaction counts as aborted, not a wait without one."""
        self._warn_once(error)
        if isinstance(error, RetriableError):
            self.reports.say_once(str(error))
        if self.in_transaction:
            self.stats.current.aborted += 1
        self._abort()

    def _abort(self) -> None:
        self.writers.abort()
        self._forget_reads()

    def _forget_reads(self) -> None:
        """What was read since the last commit is dropped: new consumers, at the positions read next."""
        for part in self.parts:
            part.discard()
            part.sought = False  # new consumers, at the positions read next

    def _warn_once(self, error: Exception) -> None:
        """An abort's reason, logged once per task and kind of reason: an outage repeats it every
        try, up to every two seconds."""
        doing = "aborting the open transaction" if self.in_transaction else "no transaction open"
        if self.reports.first_time(f"{doing}: {error}"):
            log.warning(
                "%s: %s; going back to the committed positions", doing, error, extra=_owned(self.spec)
            )
