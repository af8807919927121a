"""One broker of a replicated cluster lost for a while (RF 3, min ISR 2, two 3-node clusters): the
most ordinary fault a production cluster has. Leaders move to the two nodes left, and the copy must
go on through it: nothing lost, nothing copied twice, order kept, and records reaching the target
while the broker is down."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_backends import KafkaCluster, replicated_clusters
from tests.mirror_process import (
    MirrorRun,
    total_copied,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

TOPICS, PARTITIONS = 20, 10  # 200 partitions, RF 3
RATE = 1000  # records/s on the source throughout
TRANSACTION_STATE_PARTITIONS = 10  # REPLICATED_SETTINGS' transaction.state.log.num.partitions


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[KafkaCluster]]:
    """Two 3-broker clusters A and B for this module alone (six JVMs: one pair at a time)."""
    with replicated_clusters(("A", "B"), tmp_path_factory.mktemp("replicated")) as clusters:
        yield clusters


class Progress:
    """Samples how many records the flow has committed, once a second, in the background: the
    longest time without progress, and what was copied in a window of time."""

    def __init__(self, source: KafkaCluster, target: KafkaCluster, topics: list[str]) -> None:
        self._args = (source, target, topics)
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                copied = total_copied(*self._args)
            except Exception:  # noqa: BLE001, S112 - a broker down: the next sample asks again
                continue
            if copied:
                self.samples.append((time.monotonic(), copied))

    def copied_between(self, start: float, end: float) -> int:
        """Records committed after `start` and up to `end` (0 if no sample shows any)."""
        before = [copied for at, copied in self.samples if at <= start]
        inside = [copied for at, copied in self.samples if start < at <= end]
        return max(inside) - max(before) if before and inside else 0

    def longest_stall(self) -> float:
        """Seconds between two samples that saw progress, the longest such gap."""
        longest, last_at, last = 0.0, None, -1
        for at, copied in self.samples:
            if copied > last:
                if last_at is not None:
                    longest = max(longest, at - last_at)
                last_at, last = at, copied
        return longest


def transaction_coordinator(cluster: KafkaCluster, transactional_ids: list[str]) -> int:
    """The broker leading the __transaction_state partition of most of `transactional_ids`: the
    transaction coordinator of most of the flow's copy tasks (Kafka's partitionFor: the id's Java
    hashCode, made non-negative, modulo the topic's partition count)."""
    metadata = AdminClient(cluster.properties()).list_topics("__transaction_state", timeout=30)
    partitions = metadata.topics["__transaction_state"].partitions
    leaders = Counter(
        partitions[_java_abs(_java_hash(t)) % len(partitions)].leader for t in transactional_ids
    )
    return leaders.most_common(1)[0][0]


def _java_hash(text: str) -> int:
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _java_abs(value: int) -> int:
    return 0 if value == -(1 << 31) else abs(value)


def _busiest_leader(cluster: KafkaCluster, topics: list[str]) -> int:
    metadata = AdminClient(cluster.properties()).list_topics(timeout=30)
    leaders = Counter(
        partition.leader for topic in topics for partition in metadata.topics[topic].partitions.values()
    )
    return leaders.most_common(1)[0][0]


def _other_broker(cluster: KafkaCluster, not_this: int) -> int:
    assert cluster.nodes is not None
    return next(node for node in sorted(cluster.nodes.brokers) if node != not_this)


@pytest.mark.parametrize(
    ("which", "down_seconds"),
    [("target", 60), ("source", 60), ("transaction coordinator", 60)],
)
def test_one_broker_of_three_lost_copies_on_and_loses_and_duplicates_nothing(
    replicated: list[KafkaCluster],
    tmp_path: Path,
    reliability: Record,
    which: str,
    down_seconds: int,
) -> None:
    source, target = replicated
    assert source.nodes is not None and target.nodes is not None
    prefix = which.rsplit(maxsplit=1)[-1][:6]
    topics = [f"loss-{prefix}-{n:02d}-{time.monotonic_ns() % 10**6}" for n in range(TOPICS)]
    admin = AdminClient(source.properties())
    for future in admin.create_topics(
        [NewTopic(t, PARTITIONS) for t in topics], operation_timeout=60
    ).values():
        future.result(timeout=60)
    source.nodes.wait_until_in_sync()
    traffic = Traffic(source, dict.fromkeys(topics, PARTITIONS), per_second=RATE).start()
    config = write_config(tmp_path, source, target, topics, tasks_max=2)
    run = MirrorRun(config, tmp_path / "run.log")
    ids = [f"mirror-A-B-task:{index}" for index in range(2)]
    try:
        with Progress(source, target, topics) as progress:
            wait_until_copying(source, target, topics, run, more=5000, timeout=240)
            if which == "source":
                # The source runs no transactions of the flow's: the broker leading most of its
                # partitions is the one whose loss moves most leaders under the copy tasks.
                cluster, node = source, _busiest_leader(source, topics)
            elif which == "target":
                # Not the coordinator of the copy tasks' transactions: that case is the third.
                cluster, node = target, _other_broker(target, transaction_coordinator(target, ids))
            else:
                cluster, node = target, transaction_coordinator(target, ids)
            assert cluster.nodes is not None
            killed_at = time.monotonic()
            cluster.nodes.kill_broker(node)
            # mirror must ride out the outage: still running when the broker comes back.
            with pytest.raises(subprocess.TimeoutExpired):
                run.wait(timeout=down_seconds)
            restarted_at = time.monotonic()
            cluster.nodes.start_broker(node)
            cluster.nodes.wait_until_in_sync()  # the node caught up; leaders may move back to it
            produced = traffic.stop()
            wait_until_caught_up(source, target, topics, run, timeout=400)
        exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source, target, topics)
    # Leaders and coordinators move within the broker session timeout (9 s by default): from then
    # on it copies.
    while_down = progress.copied_between(killed_at + 15, restarted_at)
    stall = progress.longest_stall()
    recopied = [line for line in run.output().splitlines() if "copying the partition again" in line]
    reliability(
        "fault",
        f"{which.capitalize()} broker of 3 SIGKILLed for {down_seconds} s (RF 3, min ISR 2), "
        f"{TOPICS * PARTITIONS} partitions at {RATE} records/s",
        comparison=comparison,
        shown=f"copied {while_down} records while it was down; longest stall {stall:.0f} s; exit {exit_code}",
    )
    print(f"{which}: copied while down {while_down}, longest stall {stall:.1f}s, {comparison}")  # noqa: T201
    assert not recopied, recopied[:3]
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == produced
    assert while_down > 0, f"nothing reached the target while broker {node} of {cluster.alias} was down"
