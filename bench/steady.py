"""The steady load: a paced producer while a caught-up contender runs, latency measured per record.

Each record's latency is measured twice: from the producer's send() (what a user of the source sees,
and what earlier results report), and from the source broker's append (the record's timestamp: the
source topics keep LogAppendTime, copies keep it as their CreateTime), which is what the replicator
controls. On this 2-core machine the two part when the paced producer itself falls behind: records
wait in its client, not yet in the source cluster, for as long as the contender leaves it no CPU.

The 8-partition load also measures offset translation afterwards (bench.translation); the
many-partitions load measures latency and delivery only.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench import processes, translation
from bench.contenders import Clusters, Contender
from bench.measure import START_TIMEOUT_SECONDS, ContenderFailedError, Running, launch, wait_for
from bench.workloads import PARTITIONS, Steady, TopicSet, create_topics

WARM_UP = b"warm-up"
# The broker answers a fetch as soon as one partition has new committed data, so fetch.max.wait.ms
# only paces the fetches of an idle reader. Few partitions: 10 ms, as short as possible. Many: 100 ms,
# so an idle reader costs the target broker ten 1,000-partition fetches a second rather than a hundred.
FETCH_WAIT_MS = 10
# The paced producer waits up to 300 s for leaders of every partition (10,000 just created in --huge).
READY_TIMEOUT_SECONDS = 330.0
FETCH_WAIT_MS_MANY_PARTITIONS = 100
# The source broker stamps each record with its append time; MM2 and mirror both leave this setting
# out of the remote topic's config, so a copy keeps that time as its own timestamp.
SOURCE_TOPIC_CONFIG = {"message.timestamp.type": "LogAppendTime"}


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
        # The producer's own send-to-acknowledgement percentiles: its records' wait in its client (on
        # this machine, mostly for CPU) and at the source broker.
        self.acked: dict[str, float] = {}
        self._sent = _temp_file("bench-sent-")
        self._process = subprocess.Popen(
            ["java", "-cp", f"{libs}/*", str(Path(__file__).with_name("PacedProducer.java")), bootstrap,
             str(steady.rate), str(steady.seconds), str(topics.partitions), str(self._sent), *topics.names],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
        )  # fmt: skip
        try:
            self._expect("ready", READY_TIMEOUT_SECONDS)
        except BaseException:
            self.close()  # not ready, or the bench stopped meanwhile: not left running
            raise

    def run(self, steady: Steady) -> None:
        """Produce the steady load; returns once every record is acknowledged."""
        assert self._process.stdin is not None  # noqa: S101 - a pipe
        self._process.stdin.write("go\n")
        self._process.stdin.flush()
        self._expect(f"sent {steady.records}", steady.seconds + 120)
        self._process.wait(30)

    def sent_ms(self) -> list[float]:
        """Record i's send() time, epoch ms, at index i (after run())."""
        with self._sent.open(encoding="ascii") as lines:
            return [float(line.split()[0]) for line in lines]

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._log.close()
        self._sent.unlink(missing_ok=True)

    def _expect(self, line: str, timeout: float) -> None:
        # A watchdog, so a producer that hangs ends the wait rather than the bench.
        timer = threading.Timer(timeout, self._process.kill)
        timer.start()
        try:
            assert self._process.stdout is not None  # noqa: S101 - a pipe
            # Anything else on stdout (a client log line) is not the protocol's: skip it.
            got = ""
            for got in map(str.strip, self._process.stdout):
                if got.startswith("acked "):
                    pairs = (pair.split("=") for pair in got.removeprefix("acked ").split())
                    self.acked = {f"source_ack_{name}": float(value) for name, value in pairs}
                elif got.startswith(("ready", "sent ")):
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
    create_topics(bootstrap, topics, SOURCE_TOPIC_CONFIG)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "enable.idempotence": True})
    for topic in topics.names:
        for partition in range(topics.partitions):
            producer.produce(topic, WARM_UP, key=WARM_UP, partition=partition)
    producer.flush(30)
    if group is not None:
        translation.consume_to_end_and_commit(bootstrap, topics.names[0], group)
    return SteadySetup(topics, PacedProducer(clusters.libs, bootstrap, topics, steady), group)


def launch_beside(
    setup: SteadySetup | None,
    contender: Contender,
    clusters: Clusters,
    topics: list[str],
    run_dir: Path,
    *,
    checkpoint_seconds: int,
) -> Running:
    """measure.launch; the steady load's producer, started before the contender, is closed if the
    launch fails or the bench is stopped meanwhile (it would produce into stopped brokers for minutes)."""
    try:
        return launch(contender, clusters, topics, run_dir, checkpoint_seconds=checkpoint_seconds)
    except BaseException:
        if setup is not None:
            setup.producer.close()
        raise


def prepare_steady(clusters: Clusters, name: str, steady: Steady) -> SteadySetup:
    """The 8-partition steady load of contender `name` (or the ceiling): topic `steady-<name>`."""
    return prepare(clusters, TopicSet(f"steady-{name}"), steady, f"bench-group-{name}")


class _LatencyReader:
    """bench/LatencyReader.java reading the topics read_committed from the start, from now on."""

    def __init__(self, libs: Path, bootstrap: str, topics: list[str], partitions: int, expected: int) -> None:
        many = len(topics) * partitions > PARTITIONS
        fetch_wait_ms = FETCH_WAIT_MS_MANY_PARTITIONS if many else FETCH_WAIT_MS
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._out = _temp_file("bench-latency-")
        self._process = subprocess.Popen(
            ["java", "-cp", f"{libs}/*", str(Path(__file__).with_name("LatencyReader.java")), bootstrap,
             str(fetch_wait_ms), str(partitions), str(expected), str(self._out), *topics],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
        )  # fmt: skip
        self.warm_up = 0
        self.everything = threading.Event()  # every expected record has arrived once
        self._done = threading.Event()
        threading.Thread(target=self._follow, name="latency-reader", daemon=True).start()

    def _follow(self) -> None:
        assert self._process.stdout is not None  # noqa: S101 - a pipe
        for line in map(str.strip, self._process.stdout):
            if line.startswith("warm "):
                self.warm_up = int(line.removeprefix("warm "))
            elif line == "all":
                self.everything.set()
            elif line == "done":
                self._done.set()

    def alive(self) -> None:
        if self._process.poll() is not None:
            raise RuntimeError(f"the latency reader exited with {self._process.returncode}: {self._tail()}")

    def stop(self) -> list[tuple[int, float, float]]:
        """Every record received (re-sent copies too: a late copy is a late record): its index, its
        arrival (epoch ms) and the time from its timestamp to then (ms)."""
        try:
            assert self._process.stdin is not None  # noqa: S101 - a pipe
            with contextlib.suppress(BrokenPipeError):
                self._process.stdin.write("stop\n")
                self._process.stdin.flush()
            if not self._done.wait(60):
                raise RuntimeError(f"the latency reader did not finish: {self._tail()}")
            received = []
            with self._out.open(encoding="ascii") as lines:
                for line in lines:
                    key, arrived, latency_ms = line.split()
                    received.append((int(key), float(arrived), float(latency_ms)))
            return received
        finally:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._log.close()
            self._out.unlink(missing_ok=True)

    def _tail(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]


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
    bootstrap = clusters.target if contender else clusters.source
    reader = _LatencyReader(clusters.libs, bootstrap, remote, topics.partitions, steady.records)

    def alive() -> None:
        reader.alive()
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
        brokers_before = processes.broker_usage(clusters.brokers)
        setup.producer.run(steady)
        produced_at, produced_ms = time.monotonic(), time.time() * 1000
        sent_ms = setup.producer.sent_ms()
        with contextlib.suppress(ContenderFailedError):
            wait_for(reader.everything.is_set, steady.wait_seconds, "not every record arrived", alive)
        window_end = time.monotonic()
        brokers_after = processes.broker_usage(clusters.brokers)
    finally:
        setup.producer.close()
        received = reader.stop()
    first_arrival_ms: dict[int, float] = {}
    for index, arrived, _ in received:
        first_arrival_ms.setdefault(index, arrived)
    latencies = sorted(arrived - sent_ms[index] for index, arrived, _ in received)
    from_append = sorted(since_timestamp for _, _, since_timestamp in received)
    deadline_ms = produced_ms + steady.wait_seconds * 1000
    delivered = sum(1 for arrived in first_arrival_ms.values() if arrived <= deadline_ms)
    result: dict[str, Any] = {
        "records": steady.records,
        "received": len(latencies),
        "delivered": delivered,
        "delivered_within_seconds": steady.wait_seconds,
        "delivered_fraction": delivered / steady.records,
        # From send(): the figures of earlier results.
        "p50_ms": _percentile(latencies, 50),
        "p99_ms": _percentile(latencies, 99),
        "max_ms": latencies[-1] if latencies else None,
        "mean_ms": statistics.fmean(latencies) if latencies else None,
        "from_append_p50_ms": _percentile(from_append, 50),
        "from_append_p99_ms": _percentile(from_append, 99),
        "from_append_max_ms": from_append[-1] if from_append else None,
        **setup.producer.acked,
    }
    # The window's broker figures include the bench's own paced producer (source) and latency
    # reader (target): the same for every contender, so they compare.
    for side, (cpu, full_gcs) in brokers_after.items():
        if side not in brokers_before:
            continue  # a broker was gone at the start: no figure rather than a wrong one
        before_cpu, before_full = brokers_before[side]
        result[f"{side}_broker_cpu_seconds_per_million"] = (cpu - before_cpu) / steady.records * 1e6
        result[f"{side}_broker_full_gcs"] = max(0, full_gcs - before_full)  # a rotated log: fewer
    if running is not None:
        cpu = running.tree.cpu_at(window_end) - running.tree.cpu_at(window_start)
        result["cpu_seconds"] = cpu
        result["cpu_seconds_per_million"] = cpu / steady.records * 1e6
        result["seconds_after_last_produce"] = window_end - produced_at
        # The catch-up's peak stops at its last record; a flow of thousands of partitions may grow
        # under a steady load after it, so the steady window reports its own.
        result["peak_rss_megabytes"] = running.tree.peak_rss_bytes(since=window_start, until=window_end) / 1e6
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
    if running is not None and contender is not None and contender.checkpoints and setup.group is not None:
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


def _temp_file(prefix: str) -> Path:
    """An empty file of the bench's own, for a Java helper to write into."""
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=".txt")
    os.close(handle)
    return Path(name)


def _percentile(ordered: list[float], percent: float) -> float | None:
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(percent / 100 * len(ordered)) - 1))
    return ordered[index]
