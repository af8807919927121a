"""What every transactional writer on the executors shares: error classes, commit, the owner read.

librdkafka reports transaction trouble in four flavours, and each has one remedy:
fenced/fatal -> drop the producer and make a new one (after checking this run still owns the
flow); abortable -> abort and retry; retriable -> retry; anything else -> a KafkaClientError.
Whether this run still owns the flow is mirror.flow.ownership's question; it reads the answer
with committed_metadata.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirror.errors import KafkaClientError, ProducerFencedError, ProducerStuckError
from mirror.kafka.clients import AUTHORIZATION_CODES, not_authorized
from mirror.kafka.clients import producer as new_producer
from mirror.kafka.packing_producer import CopyProducer, PackingProducer

_FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
# A commit's tries together: a copy task has flushed its records before, so what is left is the
# EndTxn round trip (milliseconds); checkpoint and heartbeat rounds flush a few small records in it.
# A retriable timeout is tried again until this passes; past it the outcome is unknown.
COMMIT_SECONDS = 30.0
# send_offsets_to_transaction asks two coordinators and takes milliseconds, but librdkafka ignores
# its timeout (librdkafka #5456): while the group coordinator it cached is down it waits for that
# broker's next state change (#5511), which reconnect backoff puts up to 10 s apart. A rolling
# restart of the target stopped the copy 13-40 s that way with a 10 + 5 s bound, and after a SIGKILL
# it blocked until bounded() gave up (tests/reliability/test_cluster_faults.py). Giving up costs a
# new producer, which asks for the coordinator afresh, and one re-copied batch; a healthy
# coordinator slower than this bound would pay that too, and nothing else. The lease, renewed
# every 2 s and counted late only after four misses, keeps the longer bound: on a starved machine a
# renewal slower than 5 s replaced its producer again and again.
SEND_OFFSETS_SECONDS = 4.0
SEND_OFFSETS_GRACE_SECONDS = 1.0
SLOW_SEND_OFFSETS_SECONDS = 10.0
# aiokafka has neither bug: after a failed TxnOffsetCommit it looks the group coordinator up again,
# every retry_backoff_ms, and sends to the one found. So its producer waits a coordinator's move
# out (7-16 s after a SIGKILL on the replicated test clusters) as a commit does. Bounded at 4 s, it
# was replaced while the group moved, and the new one waited for the old transaction's abort and
# then for the positions read from the group: one task stood still 21 s of a drill where the other
# stood 11 (tests/reliability/test_replicated_faults.py).
AIOKAFKA_SEND_OFFSETS_SECONDS = COMMIT_SECONDS


class AbortableError(Exception):
    """The transaction must be aborted, then the work retried."""


class RetriableError(Exception):
    """Try the work again with the same producer."""


def classify(exc: KafkaException, doing: str) -> Exception:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is None:
        return KafkaClientError(f"{doing}: {exc}")
    if error.code() in AUTHORIZATION_CODES:
        return not_authorized(doing, error.str())  # before fatal(): a missing ACL is no fencing
    if error.code() in _FENCED_CODES or error.fatal():
        # librdkafka folds PRODUCER_FENCED and INVALID_PRODUCER_EPOCH into one code, so which of the
        # two it was cannot be told: another producer initialised the id (often this run's own, in
        # another Spark worker, as rounds move between workers), or the coordinator aborted a
        # transaction older than transaction.timeout.ms (a broker lost mid-transaction).
        why = (
            "its transactional id was initialised again (another producer, possibly this run's own) or "
            "its transaction outlived transaction.timeout.ms"
            if error.code() in _FENCED_CODES
            else "a fatal producer error"
        )
        return ProducerFencedError(f"{doing}: producer fenced: {why} ({error.str()})")
    if error.txn_requires_abort():
        return AbortableError(f"{doing}: {error.str()}")
    if error.retriable():
        return RetriableError(f"{doing}: {error.str()}")
    return KafkaClientError(f"{doing}: {error.str()}")


def call(action: Callable[[], Any], doing: str) -> Any:
    try:
        return action()
    except KafkaException as exc:
        raise classify(exc, doing) from exc


T = TypeVar("T")
# How long past its own timeout a transactional call may block before the producer is given up:
# librdkafka returns at the timeout given to init/commit/abort, unless a request to a coordinator
# that died mid-call is still in flight.
STUCK_GRACE_SECONDS = 5.0


def bounded(
    action: Callable[[], T], timeout_seconds: float, doing: str, *, grace_seconds: float | None = None
) -> T:
    """Run a blocking transactional call of librdkafka, but give up on it `grace_seconds`
    (STUCK_GRACE_SECONDS unless given) after its own timeout.

    After the broker holding the transaction coordinator was SIGKILLed and restarted, producers
    that had a transaction open blocked in send_offsets_to_transaction for minutes, far past its
    timeout, while fresh producers worked at once (tests/reliability/test_cluster_faults.py). The
    call runs on a helper thread; if it is still blocked, ProducerStuckError tells the caller to
    drop the producer and make a new one, whose initialisation fences the stuck one. The helper
    thread stays blocked with the abandoned producer.
    """
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, action()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="librdkafka-call", daemon=True).start()
    bound = timeout_seconds + (STUCK_GRACE_SECONDS if grace_seconds is None else grace_seconds)
    if not done.wait(bound):
        raise ProducerStuckError(
            f"{doing}: librdkafka did not return {bound:g}s after the call; replacing the producer"
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def send_offsets(
    producer: CopyProducer, offsets: list[TopicPartition], group: Any, doing: str, *, patient: bool = False
) -> None:
    """Add `offsets` of `group` (its consumer_group_metadata) to the open transaction, bounded
    (`patient`: the longer bound; aiokafka's producer: a commit's); librdkafka's KafkaException as
    it is (callers classify it), ProducerStuckError past the bound."""
    seconds, grace = send_offsets_bound(producer, patient=patient)
    bounded(
        lambda: producer.send_offsets_to_transaction(offsets, group, seconds),
        seconds,
        doing,
        grace_seconds=grace,
    )


def send_offsets_bound(producer: CopyProducer, *, patient: bool = False) -> tuple[float, float | None]:
    """How long send_offsets waits for `producer`, and the grace past it (None: the usual)."""
    if isinstance(producer, PackingProducer):
        return AIOKAFKA_SEND_OFFSETS_SECONDS, None
    if patient:
        return SLOW_SEND_OFFSETS_SECONDS, None
    return SEND_OFFSETS_SECONDS, SEND_OFFSETS_GRACE_SECONDS


def commit(producer: Producer, where: str, *, timeout_seconds: float = COMMIT_SECONDS) -> None:
    """Commit the open transaction, trying again on retriable errors until `timeout_seconds` pass."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        remaining = max(1.0, deadline - time.monotonic())
        try:
            bounded(
                functools.partial(producer.commit_transaction, remaining), remaining, f"{where}: committing"
            )
            return
        except KafkaException as exc:
            classified = classify(exc, f"{where}: committing")
            if not isinstance(classified, RetriableError):
                raise classified from exc
        if time.monotonic() >= deadline:
            # It may still land (librdkafka goes on with the EndTxn), so no abort: a new producer
            # fences this one, and the task re-reads what the target says was committed.
            raise ProducerStuckError(
                f"{where}: commit did not complete within {timeout_seconds:g}s; replacing the producer"
            )
        time.sleep(0.1)


def init_transactions(producer: Producer, doing: str) -> None:
    """Fence every older producer with this transactional id and end its open transaction.

    A metadata request goes first: librdkafka's first coordinator lookup otherwise races the swap
    from the bootstrap connection to the broker it learns from metadata, loses, and waits for its
    500 ms coordinator timer. Measured on local brokers: half the initialisations took 510 ms
    instead of 5 ms, and Spark hands a partition's next range to another Python worker often, so
    every range paid it.
    """
    call(lambda: producer.list_topics(timeout=30), f"{doing} (reading metadata)")
    call(lambda: bounded(lambda: producer.init_transactions(60), 60, doing), doing)


def small_writer(
    properties: dict[str, str], transactional_id: str | None, *, timeout_ms: str, doing: str
) -> Producer:
    """A producer for small records of internal topics: transactional (initialised, so any older
    writer with the id is fenced and its open transaction ended) or, without an id, idempotent."""
    config = {**properties}
    if transactional_id is None:
        config["enable.idempotence"] = "true"
        return new_producer(config)
    config["transactional.id"] = transactional_id
    config.setdefault("transaction.timeout.ms", timeout_ms)
    writer = new_producer(config)
    init_transactions(writer, doing)
    return writer


def abort(producer: Producer, doing: str) -> bool:
    """Abort the open transaction, bounded; False if the producer is unusable and must be dropped."""
    try:
        bounded(lambda: producer.abort_transaction(30), 30, doing)
    except (KafkaException, ProducerStuckError):
        return False
    return True


def abort_quietly(producer: Producer) -> bool:
    """Abort the open transaction; False if the producer is unusable and must be dropped."""
    try:
        producer.abort_transaction(30)
    except KafkaException:
        return False
    return True


def committed_metadata(
    reader: Consumer, topic: str, partition: int, doing: str, *, timeout_seconds: float = 30.0
) -> str | None:
    """The metadata `reader`'s group committed with its offset of `topic`-`partition`; errors classified.

    `reader` reads read_committed where the metadata is written in transactions (the flow mark):
    while a transaction holding offsets of the group is open, the read waits for it to end.
    """
    (committed,) = call(
        lambda: reader.committed([TopicPartition(topic, partition)], timeout=timeout_seconds), doing
    )
    if committed.error is not None:
        # An offset that could not be read (a renewal not decided yet, a coordinator loading) is
        # no "nothing committed": that would read as a flow no one owns.
        raise classify(KafkaException(committed.error), doing)
    metadata: str | None = committed.metadata
    return metadata
