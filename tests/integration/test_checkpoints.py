"""Checkpoint and heartbeat components against real brokers, with one `mirror run` for the module.

A consumer group moved from A to B must resume where it stopped: nothing skipped, and for a
group that had consumed everything, nothing re-read either.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from mirror.kafka.wire import Heartbeat
from tests.checkpoint_flow import Flow, offset_syncs_of, values
from tests.groups import committed, consume_and_commit, produce
from tests.helpers import assert_eventually, create_topic, run_mirror
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def flow(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flow]:
    running = Flow(source_cluster, target_cluster, tmp_path_factory.mktemp("checkpoints"))
    try:
        yield running
        assert running.run.stop() == 0, running.run.output()[-3000:]
    finally:
        running.run.cleanup()


def test_a_caught_up_group_resumes_on_the_target_with_nothing_re_read_or_skipped(flow: Flow) -> None:
    topic = flow.assert_a_caught_up_group_re_reads_nothing("caught-up", old=3000, new=500)
    # Exactly-once keeps the syncs on the target (written in the copy's transactions): none on A.
    assert offset_syncs_of(flow.target, "mm2-offset-syncs.A.internal", topic)
    assert offset_syncs_of(flow.source, "mm2-offset-syncs.B.internal", topic) == []


def test_a_mid_stream_group_skips_nothing_and_re_reads_less_than_one_sync_interval(flow: Flow) -> None:
    flow.assert_a_mid_stream_group_skips_nothing("mid-stream", total=3000, consumed=1234)


def test_a_group_active_on_the_target_is_left_alone_until_it_is_empty(flow: Flow) -> None:
    topic, group = flow.name("active"), flow.name("active-group")
    create_topic(flow.source.bootstrap_servers, topic)
    produce(flow.source, topic, values("a", 0, 800))
    flow.wait_until_copied(topic)
    # A consumer of the group is already running on B (say, the application was started early).
    stop, joined = threading.Event(), threading.Event()
    member = threading.Thread(target=_stay_in_group, args=(flow.target, group, f"A.{topic}", stop, joined))
    member.start()
    try:
        # Member first, then the source's commit: a full run found the group synced, likely while
        # it was still empty (which is right) as a busy machine slowed the join.
        assert joined.wait(60), f"the consumer never joined {group} on B"
        position = consume_and_commit(flow.source, group, topic, 0, 800)
        assert_eventually(
            lambda: _assert_in(f"group {group} has members on B", flow.run.output()), timeout=60
        )
        # Several sync intervals pass with the group left alone, not just one.
        skipped = flow.active_skips()
        assert_eventually(lambda: _assert_at_least(flow.active_skips(), skipped + 3), timeout=60)
        assert committed(flow.target, group, f"A.{topic}") == {}, "an active group was overwritten"
    finally:
        stop.set()
        member.join(timeout=30)

    synced = flow.wait_until_synced(group, topic, upstream=position)
    assert synced >= 800
    assert_eventually(
        lambda: _assert_in(f"group {group} is empty again and now synced", flow.run.output()), timeout=30
    )


def _stay_in_group(
    cluster: KafkaCluster, group: str, topic: str, stop: threading.Event, joined: threading.Event
) -> None:
    consumer = Consumer(
        cluster.properties(
            **{"group.id": group, "enable.auto.commit": "false", "auto.offset.reset": "latest"}
        )
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            consumer.poll(0.2)
            if consumer.assignment():
                joined.set()
    finally:
        consumer.close()


def _assert_at_least(actual: float, expected: float) -> None:
    assert actual >= expected


def _assert_in(needle: str, text: str) -> None:
    assert needle in text, f"{needle!r} not in the output:\n{text[-2000:]}"


def test_heartbeats_keep_arriving_on_the_target_and_the_heartbeats_command_shows_them(flow: Flow) -> None:
    first = assert_eventually(
        lambda: _heartbeats_since(flow.target, "A.heartbeats", flow.started, 3), timeout=90
    )
    # Reverse heartbeats: written into A by this flow as (B, A), carried back into B as A.heartbeats.
    assert {(b.source_alias, b.target_alias) for b in first} == {("B", "A")}
    stamps = [b.timestamp_ms for b in first]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    # They keep coming: newer ones than the newest seen so far.
    newest = max(stamps) / 1000
    assert_eventually(lambda: _heartbeats_since(flow.target, "A.heartbeats", newest + 0.001, 2), timeout=90)

    shown = run_mirror("heartbeats", "--cluster", "B", "-c", str(flow.config), "--watch", "3")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if "A.heartbeats" in line)
    path, _topic, hops, age, _ago, delay = line.split()
    assert (path, hops) == ("A->B", "1")
    assert float(age.rstrip("s")) >= 0 and float(delay.rstrip("s")) >= 0

    topology = run_mirror("topology", "--cluster", "B", "-c", str(flow.config))
    assert topology.returncode == 0, topology.stderr
    assert re.search(r"^\s+A\s+1 hop$", topology.stdout, re.MULTILINE), topology.stdout


def _heartbeats_since(target: KafkaCluster, topic: str, since: float, count: int) -> list[Heartbeat]:
    """The heartbeats on `topic` stamped after `since` (epoch seconds); at least `count` of them."""
    reader = Consumer(target.properties(**{"group.id": "beats", "isolation.level": "read_committed"}))
    reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    beats: list[Heartbeat] = []
    try:
        _, end = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        deadline = time.monotonic() + 30
        while reader.position([TopicPartition(topic, 0)])[0].offset < end - 1 and time.monotonic() < deadline:
            for message in reader.consume(500, timeout=0.5):
                if message.error() is None:
                    beats.append(Heartbeat.decode(message.key(), message.value()))
    finally:
        reader.close()
    recent = [b for b in beats if b.timestamp_ms > since * 1000]
    assert len(recent) >= count, f"{len(recent)} heartbeats on {topic} since {since}"
    return recent


def test_kafkas_remote_cluster_utils_translates_our_checkpoints_as_mirror_does(
    flow: Flow, tmp_path: Path
) -> None:
    assert flow.source.libs is not None, "needs Kafka's jars"
    topic, group = flow.name("java"), flow.name("java-group")
    create_topic(flow.source.bootstrap_servers, topic, partitions=2)
    produce(flow.source, topic, values("p0", 0, 600), partition=0)
    produce(flow.source, topic, values("p1", 0, 900), partition=1)
    consume_and_commit(flow.source, group, topic, 0, 600)
    position = consume_and_commit(flow.source, group, topic, 1, 450)
    flow.wait_until_copied(topic)
    flow.wait_until_synced(group, topic, upstream=position, partition=1)

    ours = run_mirror(
        "translate-offsets", "--cluster", "B", "--source", "A", "--group", group, "-c", str(flow.config)
    )
    assert ours.returncode == 0, ours.stderr
    ours_rows = sorted(tuple(line.split()) for line in ours.stdout.splitlines()[1:])
    java = _remote_cluster_utils(flow.source.libs, tmp_path, flow.target.bootstrap_servers, "A", group)
    assert java == ours_rows
    assert [row[:2] for row in java] == [(f"A.{topic}", "0"), (f"A.{topic}", "1")]


JAVA_TRANSLATE = """
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class Translate {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = Map.of("bootstrap.servers", args[0]);
        RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(60))
            .forEach((tp, om) -> System.out.println(tp.topic() + " " + tp.partition() + " " + om.offset()));
    }
}
"""


def _remote_cluster_utils(
    libs: Path, directory: Path, bootstrap: str, source: str, group: str
) -> list[tuple[str, ...]]:
    (directory / "Translate.java").write_text(JAVA_TRANSLATE, encoding="utf-8")
    classpath = f"{libs}/*"
    subprocess.run(
        ["javac", "-cp", classpath, "-d", str(directory), str(directory / "Translate.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    result = subprocess.run(
        ["java", "-cp", f"{classpath}:{directory}", "Translate", bootstrap, source, group],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return sorted(tuple(line.split()) for line in result.stdout.splitlines() if line.strip())
