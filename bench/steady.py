"""The steady load: a paced producer while a caught-up contender runs, latency measured per record.

The 8-partition load also measures offset translation afterwards (bench.translation); the
many-partitions load measures latency and delivery only.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from bench import translation
from bench.contenders import Clusters, Contender
from bench.measure import POLL_SECONDS, START_TIMEOUT_SECONDS, ContenderFailedError, Running, wait_for
from bench.workloads import PARTITIONS, Steady, TopicSet, create_topics

WARM_UP = b"warm-up"
# librdkafka sends every assigned partition in every fetch request (it has no incremental fetch
# sessions), and the broker answers a fetch as soon as one partition has new committed data, so
# fetch.wait.max.ms only paces the fetches of an idle reader. Few partitions: 10 ms, as short as
# possible. Many: 100 ms, so an idle reader costs the target broker ten 1,000-partition fetches a
# second rather than a hundred.
FETCH_WAIT_MS = 10
FETCH_WAIT_MS_MANY_PARTITIONS = 100


@dataclass(frozen=True)
class SteadySetup:
    """The steady load's topics (and, for translation, its group), made before the contender starts
    so it sees them from the start, with one warm-up record in every partition."""

    topics: TopicSet
    # It has every topic's metadata by now, so that does not delay the first records.
    producer: PacedProducer
    group: str | None = None


class PacedProducer:
    """bench/PacedProducer.java, started and warmed up now, producing when run() says go."""

    def __init__(self, libs: Path, bootstrap: str, topics: TopicSet, steady: Steady) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            ["java", "-cp", f"{libs}/*", str(Path(__file__).with_name("PacedProducer.java")), bootstrap,
             str(steady.rate), str(steady.seconds), str(topics.partitions), *topics.names],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
        )  # fmt: skip
        self._expect("ready", START_TIMEOUT_SECONDS)

    def run(self, steady: Steady) -> None:
        """Produce the steady load; returns once every record is acknowledged."""
        assert self._process.stdin is not None  # noqa: S101 - a pipe
        self._process.stdin.write("go\n")
        self._process.stdin.flush()
        self._expect(f"sent {steady.records}", steady.seconds + 120)
        self._process.wait(30)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._log.close()

    def _expect(self, line: str, timeout: float) -> None:
        # A watchdog, so a producer that hangs ends the wait rather than the bench.
        timer = threading.Timer(timeout, self._process.kill)
        timer.start()
        try:
            assert self._process.stdout is not None  # noqa: S101 - a pipe
            # Anything else on stdout (a client log line) is not the protocol's: skip it.
            got = ""
            for got in map(str.strip, self._process.stdout):
                if got.startswith(("ready", "sent ")):
                    break
        finally:
            timer.cancel()
        if got != line:
            self._log.seek(0)
            output = self._log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"the paced producer said {got!r}, not {line!r}: {output}")


def prepare(clusters: Clusters, topics: TopicSet, steady: Steady, group: str | None = None) -> SteadySetup:
    """Create the topics and warm them up; with a group, it consumes and commits the warm-up records
    so the group exists from the start. The paced producer starts now, ready before the contender."""
    bootstrap = clusters.source
    create_topics(bootstrap, topics)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "enable.idempotence": True})
    for topic in topics.names:
        for partition in range(topics.partitions):
            producer.produce(topic, WARM_UP, key=WARM_UP, partition=partition)
    producer.flush(30)
    if group is not None:
        translation.consume_to_end_and_commit(bootstrap, topics.names[0], group)
    return SteadySetup(topics, PacedProducer(clusters.libs, bootstrap, topics, steady), group)


def prepare_steady(clusters: Clusters, name: str, steady: Steady) -> SteadySetup:
    """The 8-partition steady load of contender `name` (or the ceiling): topic `steady-<name>`."""
    return prepare(clusters, TopicSet(f"steady-{name}"), steady, f"bench-group-{name}")


class _LatencyReader(threading.Thread):
    """Reads topics read_committed from the start; latency = arrival time - record timestamp."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        super().__init__(name=f"latency-{topics[0]}", daemon=True)
        self.latencies_ms: list[float] = []  # re-sent copies too: a late copy is a late record
        # Wall-clock time each record (by key) first arrived, for "delivered within".
        self.first_arrival_ms: dict[bytes, float] = {}
        self.warm_up = 0
        self._stopping = threading.Event()
        many = len(topics) * partitions > PARTITIONS
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-latency-{topics[0]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": FETCH_WAIT_MS_MANY_PARTITIONS if many else FETCH_WAIT_MS,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._topics = topics
        self._partitions = partitions

    def _all_exist(self) -> bool:
        try:
            metadata = self._consumer.list_topics(timeout=10).topics
        except KafkaException:
            return False
        for name in self._topics:
            topic = metadata.get(name)
            if topic is None or topic.error is not None or len(topic.partitions) < self._partitions:
                return False
        return True

    def run(self) -> None:
        assigned = False
        while not self._stopping.is_set():
            if not assigned:
                if not self._all_exist():
                    time.sleep(POLL_SECONDS)
                    continue
                self._consumer.assign(
                    [
                        TopicPartition(topic, p, OFFSET_BEGINNING)
                        for topic in self._topics
                        for p in range(self._partitions)
                    ]
                )
                assigned = True
            # poll(), not consume(n): consume waits to fill its batch, which would add to every
            # latency. One call per record is cheap enough at a few thousand records a second.
            message = self._consumer.poll(0.1)
            if message is not None and message.error() is None:
                arrived_ms = time.time() * 1000
                if message.key() == WARM_UP:
                    self.warm_up += 1
                else:
                    self.latencies_ms.append(arrived_ms - message.timestamp()[1])
                    self.first_arrival_ms.setdefault(message.key(), arrived_ms)
        self._consumer.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def latency(
    running: Running | None,
    contender: Contender | None,
    clusters: Clusters,
    steady: Steady,
    setup: SteadySetup,
) -> dict[str, Any]:
    """Latency under a steady load, on a contender that has caught up already.

    With none (the ceiling) the reader reads the source topics themselves: one hop. Records not
    arrived `steady.wait_seconds` after the last produce() are reported as not delivered.
    """
    topics = setup.topics
    remote = [contender.remote_topic(t) for t in topics.names] if contender else topics.names
    reader = _LatencyReader(clusters.target if contender else clusters.source, remote, topics.partitions)
    reader.start()

    def alive() -> None:
        if running is not None:
            running.check_alive()

    try:
        wait_for(
            lambda: reader.warm_up >= topics.total,
            START_TIMEOUT_SECONDS,
            "the warm-up records did not arrive",
            alive,
        )
        window_start = time.monotonic()
        setup.producer.run(steady)
        produced_at, produced_ms = time.monotonic(), time.time() * 1000
        with contextlib.suppress(ContenderFailedError):
            wait_for(
                lambda: len(reader.first_arrival_ms) >= steady.records,  # re-sent copies aside
                steady.wait_seconds,
                "not every record arrived",
                alive,
            )
        window_end = time.monotonic()
    finally:
        reader.stop()
        setup.producer.close()
    latencies = sorted(reader.latencies_ms)
    deadline_ms = produced_ms + steady.wait_seconds * 1000
    delivered = sum(1 for arrived in reader.first_arrival_ms.values() if arrived <= deadline_ms)
    result: dict[str, Any] = {
        "records": steady.records,
        "received": len(latencies),
        "delivered": delivered,
        "delivered_within_seconds": steady.wait_seconds,
        "delivered_fraction": delivered / steady.records,
        "p50_ms": _percentile(latencies, 50),
        "p99_ms": _percentile(latencies, 99),
        "max_ms": latencies[-1] if latencies else None,
        "mean_ms": statistics.fmean(latencies) if latencies else None,
    }
    if running is not None:
        cpu = running.tree.cpu_at(window_end) - running.tree.cpu_at(window_start)
        result["cpu_seconds"] = cpu
        result["cpu_seconds_per_million"] = cpu / steady.records * 1e6
        result["seconds_after_last_produce"] = window_end - produced_at
    return result


def steady_and_translation(
    running: Running | None,
    contender: Contender | None,
    clusters: Clusters,
    steady: Steady,
    setup: SteadySetup,
    *,
    checkpoint_seconds: int,
) -> dict[str, Any]:
    """The 8-partition steady load's latency, then how far back a caught-up group lands on the target."""
    result: dict[str, Any] = {"latency": latency(running, contender, clusters, steady, setup)}
    if running is not None and contender is not None and setup.group is not None:
        topic = setup.topics.names[0]
        result["translation"] = translation.measure(
            clusters,
            topic=topic,
            remote=contender.remote_topic(topic),
            group=setup.group,
            alive=running.check_alive,
            checkpoint_seconds=checkpoint_seconds,
        )
    return result


def _percentile(ordered: list[float], percent: float) -> float | None:
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(percent / 100 * len(ordered)) - 1))
    return ordered[index]
