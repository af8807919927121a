"""Which `mirror run` instance owns a flow: the holder of the flow's lease transactional id.

Starting an instance initialises the lease id, which fences the previous holder (KIP-98 epoch
bump). Each holder proves it still owns the flow by committing a tiny transaction; once fenced,
it must stop. The data path fences zombies on its own; the lease turns that into a clear exit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from mirror.config.flow_settings import FlowSettings
from mirror.errors import FlowTakenOverError, KafkaClientError, ProducerStuckError
from mirror.flow.mark import FlowMark
from mirror.flow.ownership import flow_mark_reader, read_flow_mark, stop_if_flow_taken_over
from mirror.kafka.clients import consumer, producer, translate
from mirror.kafka.transactions import AbortableError, RetriableError, bounded, send_offsets

log = logging.getLogger(__name__)

STUCK_RENEWALS = 5  # consecutive failed renewals before the producer is replaced
MARK_READ_SECONDS = 30.0
# How long take() waits for open transactions holding the lease group's offsets to end (fencing
# ended the lease's own at once) before it reads the mark committed last without them.
STABLE_READ_SECONDS = 10.0
# How long taking the lease may keep retrying a target that answers slowly: right after it created
# 10,000 remote partitions, a bench target took more than init_transactions' 60 s once.
TAKE_SECONDS = 300.0
# How often `mirror run` renews the lease: the flow's heartbeat with its target.
RENEW_SECONDS = 2.0


class FlowLease:
    """The flow's lease: take() fences the previous owner and reads its mark; acquire() records ours."""

    def __init__(self, settings: FlowSettings) -> None:
        self._settings = settings
        # What every renewal commits: owner, copy generation, task ids, stopping (mirror.flow.mark).
        self.mark = FlowMark(settings.instance_id, 0, 0)
        self._lock = threading.Lock()
        self._producer = self._new_producer()
        self._group = consumer({**settings.target_consumer, "group.id": settings.lease_group()})
        self._owner_reader = flow_mark_reader(settings)
        # When the target last answered; renewals are the flow's heartbeat with its target.
        self.last_renewed = time.monotonic()
        self.problem: str | None = None  # what the last renewal that failed ran into
        self._unfinished = False
        self._needs_init = False
        self._failures = 0

    def take(self) -> FlowMark | None:
        """Fence the lease's previous holder, then return the mark it committed last (None if none).

        Fencing first: an instance killed while renewing left a transaction open on the lease
        group, and a read_committed read of the mark waits for it (UNSTABLE_OFFSET_COMMIT) until it
        times out; initialising the lease's transactional id aborts it at once.
        """
        doing = f"flow {self._settings.name}: taking the flow's lease"
        give_up = time.monotonic() + TAKE_SECONDS
        while True:
            try:
                self._producer.init_transactions(max(1.0, min(60.0, give_up - time.monotonic())))
                break
            except KafkaException as exc:
                # A timeout is retriable: librdkafka resumes the same initialisation on the next call.
                error = exc.args[0]
                retriable = isinstance(error, KafkaError) and error.retriable()
                if not retriable or time.monotonic() >= give_up:
                    raise translate(exc, doing) from exc
                log.warning("%s: %s; trying again", doing, error.str())
                time.sleep(1.0)
        return self._previous_mark()

    def _previous_mark(self) -> FlowMark | None:
        """The mark the lease's last holder committed, read once take() has fenced it.

        The read_committed read waits while any transaction holding offsets of the lease group is
        open. Fencing ended the lease's own, so one still open after STABLE_READ_SECONDS is some
        other: one the target never ended. After a broker restart a CI run's target answered no
        read_committed read of the mark for minutes, and each start gave up on it. The mark
        committed last is then the previous holder's; this instance's first renewal commits over it.
        """
        now = time.monotonic()
        deadline, stable_until = now + MARK_READ_SECONDS, now + STABLE_READ_SECONDS
        while True:
            stable = time.monotonic() < stable_until
            try:
                if stable:
                    return read_flow_mark(self._settings, self._owner_reader, timeout_seconds=5.0)
                return self._mark_ignoring_open_transactions()
            except (RetriableError, AbortableError, KafkaClientError) as exc:
                # A group's coordinator may still be loading (NOT_COORDINATOR) right after start.
                if time.monotonic() >= deadline:
                    if isinstance(exc, KafkaClientError) and type(exc) is not KafkaClientError:
                        raise  # a refusal (authorization, TLS) says its own fix
                    raise KafkaClientError(
                        f"{exc}; the coordinator of group {self._settings.lease_group()} on "
                        f"{self._settings.target} did not answer for {MARK_READ_SECONDS:g} s: see its "
                        "broker's log"
                    ) from exc
            time.sleep(0.5)

    def _mark_ignoring_open_transactions(self) -> FlowMark | None:
        reader = consumer(
            {
                **self._settings.target_consumer,
                "group.id": self._settings.lease_group(),
                "isolation.level": "read_uncommitted",  # OffsetFetch without require_stable
            }
        )
        try:
            mark = read_flow_mark(self._settings, reader, timeout_seconds=5.0)
        finally:
            reader.close()
        try:
            # A coordinator that was only loading answers both reads by now: nothing to warn about.
            return read_flow_mark(self._settings, self._owner_reader, timeout_seconds=2.0)
        except (RetriableError, AbortableError, KafkaClientError):
            pass
        log.warning(
            "flow %s: a transaction %s never ended holds offsets of group %s, so read_committed "
            "reads of the flow's owner wait; going on from the mark committed last. Find and end it "
            "with kafka-transactions.sh find-hanging and abort (KIP-664)",
            self._settings.name,
            self._settings.target,
            self._settings.lease_group(),
        )
        return mark

    def acquire(self, mark: FlowMark) -> None:
        """Record this instance as the flow's owner with `mark`; after take()."""
        self.mark = mark
        # Record the new owner before any task runs, so fenced tasks of the old one stop.
        doing = f"flow {self._settings.name}: recording this instance as the flow's owner"
        try:
            self._commit_mark()
        except KafkaException as exc:
            if not exc.args[0].fatal():
                raise translate(exc, doing) from exc
            # A live previous owner, whose mark still named it, took the lease back while take()
            # read the mark. Fence it again and commit at once: it reads our mark from then on.
            self._producer = self._new_producer()
            try:
                self._producer.init_transactions(60)
                self._commit_mark()
            except KafkaException as again:
                raise translate(again, doing) from again
        self.last_renewed = time.monotonic()

    def update(self, change: Callable[[FlowMark], FlowMark]) -> None:
        """Commit `change(mark)` now (a new copy generation, or stopping), as a renewal does,
        recovering a replaced or stuck producer on the way; raises KafkaClientError if it did not
        commit. The change applies to the mark as it is under the lock, so a topic refresh's new
        generation and shutdown's stopping never undo each other."""
        with self._lock:
            self.mark = change(self.mark)
            before = self.last_renewed
            self._renew()
            if self.last_renewed == before:
                raise KafkaClientError(
                    f"flow {self._settings.name}: could not record the flow's mark on {self._settings.target}"
                )

    def renew(self) -> None:
        """Raise FlowTakenOverError if another instance acquired the lease since."""
        with self._lock:
            self._renew()

    def _renew(self) -> None:
        try:
            if self._needs_init:
                # Asked again now, not only when the fence came: an instance that had just taken
                # the lease then may not have recorded itself as the owner yet.
                if not self._owner_known_to_be_us():
                    return
                self._producer.init_transactions(60)
                self._needs_init = False
            if self._unfinished:
                # A renewal that timed out (the target not answering) left its transaction open.
                self._abort_unfinished()
            self._commit_mark()
            self.last_renewed = time.monotonic()
            self._failures, self.problem = 0, None
        except ProducerStuckError as exc:
            self._retake_unless_taken_over(str(exc))
        except KafkaException as exc:
            self._failures += 1
            self.problem = exc.args[0].str()
            log.debug("flow %s: lease renewal failed: %s", self._settings.name, exc.args[0].str())
            # Fatal: fenced. Failing again and again: a target that answers again may have expired
            # the transaction this producer still holds open, and it never recovers on its own.
            # Either way, a fresh producer is the remedy unless another instance owns the flow.
            if exc.args[0].fatal() or self._failures >= STUCK_RENEWALS:
                self._retake_unless_taken_over(exc.args[0].str())
            # Anything else (the target away for a while) is retried at the next renewal.

    def _retake_unless_taken_over(self, failure: str) -> None:
        """The lease producer was fenced or is stuck. By another instance, or by the target itself: a
        restarted transaction coordinator, or one that expired the renewal left open while away."""
        if not self._owner_known_to_be_us():
            return
        log.info(
            "flow %s: the lease's producer failed (%s) and no other instance owns the flow; taking it again",
            self._settings.name,
            failure,
        )
        self._producer = self._new_producer()
        self._unfinished = False
        self._needs_init = True  # the next renewal initialises it, and commits the mark again
        self._failures = 0

    def _owner_known_to_be_us(self) -> bool:
        """False if the target cannot say yet; FlowTakenOverError if another instance owns the flow."""
        try:
            stop_if_flow_taken_over(self._settings, self._owner_reader)
        except FlowTakenOverError:
            raise FlowTakenOverError(
                f"flow {self._settings.name}: another mirror instance took over this flow; "
                "this one stops (run one instance per flow)"
            ) from None
        except (RetriableError, AbortableError, KafkaClientError):
            return False  # the next renewal asks again
        return True

    def _new_producer(self) -> Producer:
        return producer(
            {**self._settings.target_producer, "transactional.id": self._settings.lease_transactional_id()}
        )

    def _commit_mark(self) -> None:
        # An empty transaction never reaches the coordinator; committing a group offset does.
        # Its metadata names this instance: the flow's owner, as fenced tasks check (mirror.flow.ownership).
        renewed = replace(self.mark, renewed_ms=int(time.time() * 1000))
        mark = [TopicPartition(self._settings.offsets_topic, 0, 0, metadata=renewed.encode())]
        doing = f"flow {self._settings.name}: renewing the lease"
        metadata = self._group.consumer_group_metadata()
        self._producer.begin_transaction()
        self._unfinished = True
        send_offsets(self._producer, mark, metadata, doing, patient=True)
        bounded(lambda: self._producer.commit_transaction(30), 30, doing)
        self._unfinished = False

    def _abort_unfinished(self) -> None:
        try:
            self._producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._STATE:  # _STATE: nothing was open after all
                raise
        self._unfinished = False

    def close(self) -> None:
        self._group.close()
        self._owner_reader.close()
