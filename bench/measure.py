"""The three measurements of a replicating contender: catch-up, steady latency, offset translation."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from bench import processes
from bench.contenders import Clusters, Contender
from bench.workloads import PARTITIONS, CatchUp, Steady, create_topic, verify
from mirror.errors import MirrorError
from mirror.kafka.admin import last_stable_offsets

POLL_SECONDS = 0.1
STABLE_SECONDS = 2.0  # an end offset unchanged this long means the contender stopped writing
CATCH_UP_TIMEOUT_SECONDS = 1200.0
START_TIMEOUT_SECONDS = 180.0
SYNC_TIMEOUT_SECONDS = 90.0


class ContenderFailedError(RuntimeError):
    pass


def ends_of(admin: AdminClient, topic: str) -> dict[int, int]:
    """The read_committed end of every partition; zeros while the remote topic does not exist."""
    try:
        offsets = last_stable_offsets(admin, [(topic, p) for p in range(PARTITIONS)])
    except MirrorError:
        return dict.fromkeys(range(PARTITIONS), 0)
    return {partition: offset for (_, partition), offset in offsets.items()}


@dataclass
class Running:
    """A started contender: its process, the sampler of its process tree, and when it started."""

    process: subprocess.Popen[bytes]
    tree: processes.ProcessTree
    run_dir: Path
    started: float

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            log = self.run_dir / "run.log"
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
            raise ContenderFailedError(
                f"exited with {self.process.returncode}; see {self.run_dir}: {' | '.join(lines[-5:])}"
            )

    def stop(self) -> None:
        processes.stop(self.process)
        self.tree.stop()


def launch(
    contender: Contender, clusters: Clusters, topics: list[str], run_dir: Path, *, checkpoint_seconds: int
) -> Running:
    started = time.monotonic()
    process = contender.start(clusters, topics, run_dir, checkpoint_seconds=checkpoint_seconds)
    return Running(process, processes.ProcessTree(process.pid).start(), run_dir, started)


def catch_up(running: Running, contender: Contender, clusters: Clusters, workload: CatchUp) -> dict[str, Any]:
    """Time a contender just launched on a loaded source until the target holds every record.

    The target's read_committed end offsets are polled every 100 ms. Once they cover the workload
    and stop moving, the target is read and verified record by record; the copy counts as done at
    the first poll that saw the final end offsets, so the verification read does not count.
    """
    remote = contender.remote_topic(workload.topic)
    admin = AdminClient({"bootstrap.servers": clusters.target})
    wanted = {p: len(range(p, workload.records, PARTITIONS)) for p in range(PARTITIONS)}
    started, tree = running.started, running.tree
    history: list[tuple[float, dict[int, int]]] = []
    verified: dict[int, int] | None = None
    while True:
        running.check_alive()
        now = time.monotonic()
        if now - started > CATCH_UP_TIMEOUT_SECONDS:
            raise ContenderFailedError(f"not caught up after {CATCH_UP_TIMEOUT_SECONDS:g} s")
        ends = ends_of(admin, remote)
        history.append((now, ends))
        settled = [t for t, e in history if e == ends]
        if (
            all(ends[p] >= wanted[p] for p in wanted)
            and now - settled[0] >= STABLE_SECONDS
            and ends != verified
        ):
            verdict = verify(clusters.target, remote, workload, ends)
            verified = ends
            if verdict.complete:
                break
        time.sleep(POLL_SECONDS)
    done = min(t for t, e in history if e == verified)
    first = min(t for t, e in history if sum(e.values()) > 0)
    copy_seconds = max(done - first, POLL_SECONDS)
    cpu = tree.cpu_at(done)
    cpu_copy = cpu - tree.cpu_at(first)
    rate = workload.records / copy_seconds
    return {
        "records": workload.records,
        "records_per_second": rate,
        "megabytes_per_second": rate * workload.value_bytes / 1e6,
        "copy_seconds": copy_seconds,
        "startup_seconds": first - started,
        "wall_seconds": done - started,
        "cpu_seconds": cpu,
        "cpu_seconds_copy": cpu_copy,
        "cpu_seconds_per_million": cpu_copy / workload.records * 1e6,
        "peak_rss_megabytes": tree.peak_rss_bytes(until=done) / 1e6,
        "complete": verdict.complete,
        "verdict": asdict(verdict),
    }


class _LatencyReader(threading.Thread):
    """Reads a topic read_committed from the start; latency = arrival time - record timestamp."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name=f"latency-{topic}", daemon=True)
        self.latencies_ms: list[float] = []
        self.warm_up = 0
        self._stopping = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-latency-{topic}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._topic = topic

    def run(self) -> None:
        assigned = False
        while not self._stopping.is_set():
            if not assigned:
                metadata = self._consumer.list_topics(self._topic, timeout=10).topics.get(self._topic)
                if metadata is None or metadata.error is not None or len(metadata.partitions) < PARTITIONS:
                    time.sleep(POLL_SECONDS)
                    continue
                self._consumer.assign(
                    [TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
                )
                assigned = True
            # poll(), not consume(n): consume waits to fill its batch, which would add to every latency.
            message = self._consumer.poll(0.1)
            if message is not None and message.error() is None:
                arrived_ms = time.time() * 1000
                if message.key() == b"warm-up":
                    self.warm_up += 1
                else:
                    self.latencies_ms.append(arrived_ms - message.timestamp()[1])
        self._consumer.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def wait_for(condition: Callable[[], bool], timeout: float, what: str, check: Callable[[], None]) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        check()
        if time.monotonic() > deadline:
            raise ContenderFailedError(f"{what} within {timeout:g} s")
        time.sleep(POLL_SECONDS)
    return time.monotonic()


def _paced_produce(producer: Producer, topic: str, steady: Steady) -> None:
    """`steady.rate` records/s in 10 ms slices; the record timestamp is the moment of produce()."""
    per_slice = steady.rate / 100
    started = time.monotonic()
    sent = 0
    for slice_index in range(steady.seconds * 100):
        due = int(per_slice * (slice_index + 1))
        while sent < due:
            producer.produce(topic, b"%d" % sent, key=b"%d" % sent, partition=sent % PARTITIONS)
            sent += 1
        producer.poll(0)
        time.sleep(max(0.0, started + (slice_index + 1) / 100 - time.monotonic()))
    producer.flush(60)


def _warm_up_and_join_group(bootstrap: str, topic: str, group: str) -> Producer:
    """One record per partition, consumed and committed by `group`, so the group exists from the start.

    Returns the producer for the steady load: it has its producer id and metadata by now, so
    neither delays the first measured records.
    """
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "enable.idempotence": True})
    for partition in range(PARTITIONS):
        producer.produce(topic, b"warm-up", key=b"warm-up", partition=partition)
    producer.flush(30)
    _consume_to_end_and_commit(bootstrap, topic, group)
    return producer


def _consume_to_end_and_commit(bootstrap: str, topic: str, group: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    positions: dict[int, int] = {}
    for message in _until_every_end(consumer):
        positions[message.partition()] = message.offset() + 1
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    consumer.close()
    return sum(positions.values())


def _target_group_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    try:
        result = future.result(timeout=30)
    except Exception:  # noqa: BLE001 - a group that does not exist yet reads as no offsets
        return {}
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


def _re_read(bootstrap: str, topic: str, group: str) -> int:
    """Records a consumer of `group` reads on the target from its synced offsets to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    consumer.assign(
        [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            for tp in committed
        ]
    )
    read = sum(1 for message in _until_every_end(consumer) if message.key() != b"warm-up")
    consumer.close()
    return read


def _until_every_end(consumer: Consumer) -> Iterator[Message]:
    """The records of the consumer's partitions (enable.partition.eof), until each reached its end."""
    at_end: set[int] = set()
    while len(at_end) < PARTITIONS:
        for message in consumer.consume(10_000, timeout=1):
            error = message.error()
            if error is None:
                yield message
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())


@dataclass(frozen=True)
class SteadySetup:
    """The steady load's topic and group, created before the contender starts so it sees both."""

    topic: str
    group: str
    producer: Producer


def prepare_steady(clusters: Clusters, name: str) -> SteadySetup:
    topic, group = f"steady-{name}", f"bench-group-{name}"
    return SteadySetup(topic, group, _warm_up_and_join_group(clusters.source, topic, group))


def steady_and_translation(
    running: Running | None,
    contender: Contender | None,
    clusters: Clusters,
    steady: Steady,
    setup: SteadySetup,
    *,
    checkpoint_seconds: int,
) -> dict[str, Any]:
    """Latency under a steady load, then how far back a caught-up group lands on the target.

    Runs on a contender that has caught up already. With none (the ceiling) the latency reader
    reads the source topic itself: one hop.
    """
    remote = contender.remote_topic(setup.topic) if contender else setup.topic
    reader = _LatencyReader(clusters.target if contender else clusters.source, remote)
    reader.start()

    def alive() -> None:
        if running is not None:
            running.check_alive()

    result: dict[str, Any] = {}
    try:
        wait_for(
            lambda: reader.warm_up >= PARTITIONS,
            START_TIMEOUT_SECONDS,
            "the warm-up records did not arrive",
            alive,
        )
        window_start = time.monotonic()
        _paced_produce(setup.producer, setup.topic, steady)
        produced_at = time.monotonic()
        # A record still missing after a minute is reported below as not received.
        with contextlib.suppress(ContenderFailedError):
            wait_for(
                lambda: len(reader.latencies_ms) >= steady.records, 60, "not every record arrived", alive
            )
        window_end = time.monotonic()
        reader.stop()
        latencies = sorted(reader.latencies_ms)
        result["latency"] = {
            "records": steady.records,
            "received": len(latencies),
            "p50_ms": _percentile(latencies, 50),
            "p99_ms": _percentile(latencies, 99),
            "max_ms": latencies[-1] if latencies else None,
            "mean_ms": statistics.fmean(latencies) if latencies else None,
        }
        if running is not None and contender is not None:
            cpu = running.tree.cpu_at(window_end) - running.tree.cpu_at(window_start)
            result["latency"]["cpu_seconds"] = cpu
            result["latency"]["cpu_seconds_per_million"] = cpu / steady.records * 1e6
            result["latency"]["seconds_after_last_produce"] = window_end - produced_at
            result["translation"] = _translation(
                clusters,
                topic=setup.topic,
                remote=remote,
                group=setup.group,
                alive=alive,
                checkpoint_seconds=checkpoint_seconds,
            )
    finally:
        if reader.is_alive():
            reader.stop()
    return result


def _translation(
    clusters: Clusters,
    *,
    topic: str,
    remote: str,
    group: str,
    alive: Callable[[], None],
    checkpoint_seconds: int,
) -> dict[str, Any]:
    """The group consumes the whole source topic and commits; once its offsets on the target have
    not moved for three checkpoint intervals, a consumer of the group on the target counts the
    records it is handed again."""
    consumed = _consume_to_end_and_commit(clusters.source, topic, group)
    committed_at = time.monotonic()
    admin = AdminClient({"bootstrap.servers": clusters.target})
    last: dict[int, int] = {}
    stable_since = committed_at
    while time.monotonic() - committed_at < SYNC_TIMEOUT_SECONDS:
        alive()
        offsets = _target_group_offsets(admin, group, remote)
        if offsets != last:
            last, stable_since = offsets, time.monotonic()
        elif len(offsets) == PARTITIONS and time.monotonic() - stable_since > 3 * checkpoint_seconds:
            break
        time.sleep(0.5)
    synced = len(last) == PARTITIONS
    return {
        "group_records_consumed_on_source": consumed,
        "synced": synced,
        "records_re_read": _re_read(clusters.target, remote, group) if synced else None,
    }


def _percentile(ordered: list[float], percent: float) -> float | None:
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(percent / 100 * len(ordered)) - 1))
    return ordered[index]
