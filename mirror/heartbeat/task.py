"""The heartbeat task (MM2's MirrorHeartbeatTask): emit heartbeats, and watch the remote ones that arrive.

Runs on Spark executors, one round per micro-batch of the flow's heartbeat query. Flow A->B
writes Heartbeat(A, B) into B's `heartbeats`, and, as MM2's reverse herder does, Heartbeat(B, A)
into A's `heartbeats`, which the flow then copies into B as `A.heartbeats`. Each write is one
transaction with the component's own offsets record on that cluster.

It also reads every remote heartbeats topic on the target (`A.heartbeats`, `C.A.heartbeats`...):
the newest heartbeat per replication path is how old the data arriving on that path can be.
"""

from __future__ import annotations

import contextvars
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from mirror.config.flow_settings import FlowSettings
from mirror.errors import (
    FlowTakenOverError,
    KafkaClientError,
    MirrorError,
    ProducerFencedError,
    WireFormatError,
)
from mirror.flow.ownership import flow_mark_reader, stop_if_flow_taken_over
from mirror.flow.source_offsets import FIXED_OFFSET, encode_heartbeat_key, encode_value
from mirror.flow.tail import TopicTails
from mirror.kafka.admin import list_topics
from mirror.kafka.clients import admin_client
from mirror.kafka.transactions import (
    AbortableError,
    RetriableError,
    abort_quietly,
    call,
    commit,
    small_writer,
)
from mirror.kafka.wire import Heartbeat
from mirror.policy import remote_heartbeat_topics, replication_path

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 2  # the next round, an interval later, is the real retry
ROUND_WAIT_SECONDS = 2.0
TRANSACTION_TIMEOUT_MS = "30000"
TOPICS_REFRESH_SECONDS = 10.0
# How long a round reads remote heartbeats: a round running when `mirror run` stops gets
# ROUND_STOP_GRACE_SECONDS (10 s) before it is abandoned.
WATCH_SECONDS = 8.0


@dataclass
class HeartbeatRow:
    """A heartbeat this round emitted (kind "emitted") or the newest one seen on a path ("seen")."""

    kind: str
    source: str
    target: str
    timestamp_ms: int
    # Seen rows: the remote heartbeats topic, the path it came along, when the round first saw it.
    # Failed rows: `path` holds the error. Skipped rows: `count` records of `topic` did not decode.
    topic: str = ""
    path: str = ""
    seen_ms: int = 0
    count: int = 0


@dataclass
class _Emitter:
    """Writes Heartbeat(source, target) into `target`."""

    source: str
    target: str
    properties: dict[str, str]
    producer: Producer | None = None


@dataclass
class _Watch:
    """The newest heartbeat per remote heartbeats topic on the target, and when it was first seen."""

    tail: TopicTails | None = None
    newest: dict[str, tuple[Heartbeat, int]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    topics_listed_at: float = -1e18


_EMITTERS: dict[tuple[str, str], _Emitter] = {}
# Writes in flight per pair; they outlive a round when a cluster is slow (per Python worker).
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mirror-heartbeat")
_IN_FLIGHT: dict[tuple[str, str], Future[HeartbeatRow | None]] = {}
_WATCHES: dict[str, _Watch] = {}
_ADMINS: dict[str, AdminClient] = {}
_LEASE_READERS: dict[str, Consumer] = {}


def run_heartbeat_round(settings: FlowSettings) -> list[HeartbeatRow]:
    """Emit this round's heartbeats and report the newest remote ones.

    Each pair is written on a thread of its own and the round waits at most ROUND_WAIT_SECONDS:
    with A frozen, Heartbeat(A, B) still reaches B every round while the write into A hangs.
    A pair whose write is still in flight is not started again; a failed one becomes a "failed"
    row (the driver says so once) and is retried next round.
    """
    pairs = []
    if settings.emit_heartbeats:
        pairs.append((settings.source, settings.target, settings.target_producer))
    if settings.reverse_heartbeats:
        pairs.append((settings.target, settings.source, settings.source_producer))
    round_ends = time.monotonic() + ROUND_WAIT_SECONDS
    for source, target, properties in pairs:
        if (source, target) not in _IN_FLIGHT:
            # In the round's log context: the pool's threads have none of their own.
            _IN_FLIGHT[(source, target)] = _POOL.submit(
                contextvars.copy_context().run, _emit, settings, source, target, properties, round_ends
            )
    wait(list(_IN_FLIGHT.values()), timeout=ROUND_WAIT_SECONDS)
    rows: list[HeartbeatRow] = []
    for (source, target), future in list(_IN_FLIGHT.items()):
        if not future.done():
            continue
        del _IN_FLIGHT[(source, target)]
        try:
            row = future.result()
            if row is not None:
                rows.append(row)
        except FlowTakenOverError:
            raise
        except MirrorError as exc:
            rows.append(HeartbeatRow("failed", source, target, int(time.time() * 1000), path=str(exc)[:300]))
    rows += _watch(settings)
    return rows


def _emit(
    settings: FlowSettings, source: str, target: str, properties: dict[str, str], round_ends: float
) -> HeartbeatRow | None:
    """One heartbeat written, or None if it gave way to a newer round's (fenced after its round)."""
    last: Exception | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        emitter = _EMITTERS.get((source, target))
        if emitter is None:
            emitter = _EMITTERS[(source, target)] = _Emitter(source, target, properties)
        try:
            timestamp_ms = int(time.time() * 1000)
            _write(settings, emitter, Heartbeat(source, target, timestamp_ms))
            log.debug("heartbeat %s->%s written (timestamp %d)", source, target, timestamp_ms)
            return HeartbeatRow("emitted", source, target, timestamp_ms)
        except ProducerFencedError as exc:
            _drop(emitter)
            _stop_if_flow_taken_over(settings)  # another instance: it raises
            if time.monotonic() > round_ends:
                # Rounds move between Spark's Python workers, each with a writer of its own for the
                # pair's one transactional id: a write that outlived its round (a broker lost) is
                # fenced by the next round's writer, or by the coordinator once it outlived
                # transaction.timeout.ms. Writing again would fence that newer writer in turn.
                log.info(
                    "flow %s: heartbeat %s->%s: a write still open after its round was fenced (a newer "
                    "round of this run took the transactional id, or it outlived transaction.timeout.ms); "
                    "dropped, the next round writes the next heartbeat",
                    settings.name, source, target,
                )  # fmt: skip
                return None
            last = exc
            continue
        except (AbortableError, RetriableError) as exc:
            log.warning(
                "heartbeat %s->%s: aborting its transaction (attempt %d): %s", source, target, attempt, exc
            )
            if emitter.producer is not None and not abort_quietly(emitter.producer):
                _drop(emitter)
            last = exc
        except MirrorError:
            _drop(emitter)
            raise
        time.sleep(min(0.2 * attempt, 1.0))
    raise KafkaClientError(
        f"flow {settings.name}: heartbeat {source}->{target} failed {MAX_ATTEMPTS} times; last error: {last}"
    )


def _write(settings: FlowSettings, emitter: _Emitter, heartbeat: Heartbeat) -> None:
    where = f"flow {settings.name}: heartbeat {emitter.source}->{emitter.target}"
    if emitter.producer is None:
        transactional_id = settings.heartbeat_transactional_id(emitter.source, emitter.target)
        emitter.producer = small_writer(
            emitter.properties,
            transactional_id if settings.exactly_once else None,
            timeout_ms=TRANSACTION_TIMEOUT_MS,
            doing=f"{where}: initialising its writer",
        )
    writer = emitter.producer
    if settings.exactly_once:
        call(writer.begin_transaction, f"{where}: beginning a transaction")
    try:
        call(
            lambda: writer.produce(
                settings.policy().heartbeats_topic(),
                key=heartbeat.key(),
                value=heartbeat.value(),
                partition=0,
                timestamp=heartbeat.timestamp_ms,
            ),
            f"{where}: producing",
        )
        call(
            lambda: writer.produce(
                settings.heartbeat_offsets_topic(emitter.source),
                key=encode_heartbeat_key(emitter.source, emitter.target),
                value=encode_value(FIXED_OFFSET),
            ),
            f"{where}: producing its offset",
        )
        if settings.exactly_once:
            commit(writer, where)
        elif writer.flush(30):
            raise RetriableError(f"{where}: not delivered within 30s")
    except BaseException:
        if settings.exactly_once:
            abort_quietly(writer)
        raise


def _drop(emitter: _Emitter) -> None:
    _EMITTERS.pop((emitter.source, emitter.target), None)
    if emitter.producer is not None:
        emitter.producer.purge(in_queue=True, in_flight=True)


def _stop_if_flow_taken_over(settings: FlowSettings) -> None:
    reader = _LEASE_READERS.get(settings.name)
    if reader is None:
        reader = _LEASE_READERS[settings.name] = flow_mark_reader(settings)
    stop_if_flow_taken_over(settings, reader)


def _watch(settings: FlowSettings) -> list[HeartbeatRow]:
    """The newest heartbeat of each remote heartbeats topic on the target, and when it arrived."""
    watch = _WATCHES.setdefault(settings.name, _Watch())
    policy = settings.policy()
    try:
        if watch.tail is None:
            watch.tail = TopicTails(settings.target_consumer)
        if time.monotonic() - watch.topics_listed_at >= TOPICS_REFRESH_SECONDS:
            admin = _ADMINS.get(settings.name)
            if admin is None:
                admin = _ADMINS[settings.name] = admin_client(settings.target_admin)
            topics = list_topics(admin, what=f"target cluster {settings.target}")
            for topic in remote_heartbeat_topics(topics, policy):
                watch.tail.follow(topic)
            watch.topics_listed_at = time.monotonic()
        read, behind = watch.tail.catch_up(timeout_seconds=WATCH_SECONDS)
        if behind:
            # The rest is read next round, from where this one stopped.
            log.warning(
                "flow %s: remote heartbeats on %s not read to their end in %gs: %s; a transaction "
                "may be hanging on the cluster, check it with kafka-transactions.sh",
                settings.name, settings.target, WATCH_SECONDS, ", ".join(behind[:5]),
            )  # fmt: skip
        for topic, records in read.items():
            for record in records:
                try:
                    heartbeat = Heartbeat.decode(record.key, record.value)
                except WireFormatError as exc:
                    # Counted (a metric) and logged, never fatal: one bad record must not blind
                    # the watch of a replication path.
                    watch.skipped[topic] = watch.skipped.get(topic, 0) + 1
                    log.warning(
                        "flow %s: skipping record %d of %s: %s", settings.name, record.offset, topic, exc
                    )
                    continue
                newest = watch.newest.get(topic)
                if newest is None or heartbeat.timestamp_ms > newest[0].timestamp_ms:
                    watch.newest[topic] = (heartbeat, int(time.time() * 1000))
    except MirrorError as exc:
        # Watching is reporting only; emitting heartbeats must not stop because of it.
        log.warning(
            "flow %s: reading remote heartbeats on %s failed: %s", settings.name, settings.target, exc
        )
        if watch.tail is not None:
            watch.tail.close()
        _WATCHES.pop(settings.name, None)
        return []
    skipped = [HeartbeatRow("skipped", "", "", 0, topic=topic, count=n) for topic, n in watch.skipped.items()]
    watch.skipped.clear()
    return skipped + [
        HeartbeatRow(
            "seen",
            heartbeat.source_alias,
            heartbeat.target_alias,
            heartbeat.timestamp_ms,
            topic=topic,
            path=replication_path(policy.source_chain(topic), settings.target),
            seen_ms=seen_ms,
        )
        for topic, (heartbeat, seen_ms) in sorted(watch.newest.items())
    ]
