"""Fault tests' tools: keep producing during a fault, find Spark's Python workers, check the target."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Producer

from tests.helpers import assert_eventually
from tests.kafka_backends import KafkaCluster
from tests.records import Comparison, compare_records, read_topics


class Traffic:
    """Records produced to `topics` in the background until stopped: unique keys and values, headers,
    explicit timestamps, spread over each topic's `partitions`. Survives broker restarts: the
    idempotent producer retries (for up to five minutes) until the broker is back."""

    def __init__(self, cluster: KafkaCluster, partitions: dict[str, int], *, per_second: int = 1000) -> None:
        self._producer = Producer(
            cluster.properties(
                **{"enable.idempotence": "true", "linger.ms": "20", "message.timeout.ms": "300000"}
            )
        )
        self._partitions = dict(partitions)  # topic -> partition count; changes while running
        self._per_tick = max(1, per_second // 20)
        self._stop = threading.Event()
        self._failed: list[str] = []
        self.sent = 0
        # Explicit, distinct and recent: a 2023 timestamp made the broker's retention check delete
        # whole segments of a topic mid-test (7 days' retention, judged by record timestamps).
        self._epoch_ms = int(time.time() * 1000)
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def set_partitions(self, topic: str, partitions: int) -> None:
        """Produce to a new topic too, or to a topic's new partitions (once the producer sees them)."""
        assert_eventually(lambda: self._sees(topic, partitions), timeout=60, interval=0.2)
        self._partitions = {**self._partitions, topic: partitions}

    def _sees(self, topic: str, partitions: int) -> None:
        # A metadata request refreshes the producer's view; right after the change it may still
        # come from a broker that has not applied it.
        metadata = self._producer.list_topics(topic, timeout=30)
        seen = metadata.topics[topic].partitions if topic in metadata.topics else {}
        assert len(seen) == partitions, f"the producer sees {len(seen)} of {partitions} partitions"

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._produce_until_stopped()
        except Exception as exc:  # noqa: BLE001 - reported by stop(), in the test's thread
            self._failed.append(f"the traffic thread died: {exc!r}")

    def _produce_until_stopped(self) -> None:
        while not self._stop.wait(0.05):  # 20 ticks a second: a steady, modest rate
            partitions = self._partitions
            topics = sorted(partitions)
            for _ in range(self._per_tick):
                n = self.sent
                topic = topics[n % len(topics)]
                self._producer.produce(
                    topic,
                    key=b"key-%d" % n,
                    value=b"value-%d-" % n * (1 + n % 5),
                    partition=(n // len(topics)) % partitions[topic],
                    headers=[("n", b"%d" % n), ("empty", None)] if n % 3 == 0 else None,
                    timestamp=self._epoch_ms + n,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            self._producer.poll(0)

    def _delivered(self, error: object, _message: object) -> None:
        if error is not None:
            self._failed.append(str(error))

    def stop(self) -> int:
        """Stop producing; returns how many records were delivered (all of them, or it fails)."""
        self._stop.set()
        self._thread.join(timeout=30)
        remaining = self._producer.flush(300)
        assert remaining == 0 and not self._failed, (
            f"the source did not take {remaining} records: {self._failed[:3]}"
        )
        return self.sent


# Reading every topic of a side to its end, at once: hundreds of thousands of records after a drill.
READ_SECONDS = 300.0


def compare_topics(
    source: KafkaCluster, target: KafkaCluster, topics: Sequence[str], *, remote_prefix: str = "A."
) -> Comparison:
    """Every topic's target copy against its source, record by record, read_committed; each side
    read by one consumer for all the topics."""
    remote = [f"{remote_prefix}{topic}" for topic in topics]
    originals = read_topics(source.bootstrap_servers, list(topics), READ_SECONDS, security=source.security)
    copies = read_topics(target.bootstrap_servers, remote, READ_SECONDS, security=target.security)
    total = Comparison(0, 0, 0, 0)
    for topic, copy in zip(topics, remote, strict=True):
        total += compare_records(originals[topic], copies[copy])
    return total


def process_tree(root_pid: int) -> list[int]:
    """`root_pid` and every process under it, Spark's Python daemon and workers included (they run
    in a process group of their own, so a signal to the group would miss them)."""
    children = _children()
    tree, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(children.get(pid, []))
    return tree


def signal_each(pids: list[int], signum: signal.Signals) -> None:
    """Send `signum` to each process of a tree listed a moment before. One that has exited since (a
    short-lived child, reaped by a parent not yet stopped) is skipped: a CI run's SIGCONT to a
    frozen tree raised on one and left the rest frozen."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def process_alive(pid: int) -> bool:
    """Whether `pid` still runs; a zombie, dead and waiting for its parent to reap it, does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(") ", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False  # gone between the two looks


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return children


def python_workers(root_pid: int) -> list[int]:
    """Spark's Python workers under `root_pid`: the processes a daemon forked (a fork keeps its
    parent's command line, so a worker is a daemon whose parent is one too). Only `-m <daemon>`
    counts: the JVM's own command line names the module too (`--conf
    spark.python.daemon.module=mirror.spark.daemon`), and taking it for a daemon would count the
    daemon itself among the workers."""
    children = _children()
    workers, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        parent_is_daemon = _is_daemon(pid)
        for child in children.get(pid, []):
            stack.append(child)
            if parent_is_daemon and _is_daemon(child):
                workers.append(child)
    return workers


_DAEMON_MODULES = {b"pyspark.daemon", b"mirror.spark.daemon"}


def _is_daemon(pid: int) -> bool:
    argv = _cmdline(pid).split(b"\0")
    return any(flag == b"-m" and module in _DAEMON_MODULES for flag, module in itertools.pairwise(argv))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
