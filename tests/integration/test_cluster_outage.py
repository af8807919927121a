"""A cluster that stops answering in the middle of a run: mirror waits it out, nothing is lost,
and heartbeats into the cluster that still answers keep coming."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirror.errors import KafkaClientError
from mirror.kafka.tail import PartitionTail
from mirror.kafka.wire import Heartbeat
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, wait_until_copying, write_config
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STALL_SECONDS = 40  # longer than the clients' 30 s request timeouts


def produce(cluster: KafkaCluster, topic: str, count: int, offset: int) -> None:
    producer = Producer(cluster.properties(**{"linger.ms": "10"}))
    for i in range(offset, offset + count):
        producer.produce(topic, key=b"%d" % i, value=b"value-%d" % i, partition=i % 4)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def test_a_target_that_stops_answering_mid_run_loses_and_duplicates_nothing(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert target_cluster.pid is not None, "this fault test needs the local broker backend"
    topic = unique_name(request, "outage-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    produce(source_cluster, topic, 40_000, 0)
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], max_records_per_batch=4000)
    run = MirrorRun(config, tmp_path / "run.log")
    more = threading.Thread(target=produce, args=(source_cluster, topic, 20_000, 40_000))
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run)
        more.start()
        os.kill(target_cluster.pid, signal.SIGSTOP)  # the target broker freezes mid-transaction
        try:
            # Frozen until mirror itself has reported B silent for longer than the client timeouts.
            assert_eventually(lambda: _assert_silent_for(run, STALL_SECONDS), timeout=STALL_SECONDS + 60)
        finally:
            os.kill(target_cluster.pid, signal.SIGCONT)
        more.join(timeout=120)
        wait_until_caught_up(source_cluster, target_cluster, [topic], run, timeout=400)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        os.kill(target_cluster.pid, signal.SIGCONT)
        run.cleanup()
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
    )
    # The progress lines said what was going on, and stopped saying it once B answered again.
    progress = [line for line in run.output().splitlines() if "records/s" in line]
    assert any("B not answering for" in line for line in progress)
    assert "not answering" not in progress[-1]


def test_heartbeats_into_the_target_go_on_while_the_source_is_frozen(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Disaster recovery is when heartbeats matter: with A gone, B must keep hearing from the flow
    # (so monitoring can tell "A is down" from "mirror is down"), while A.heartbeats ages.
    assert source_cluster.pid is not None, "this fault test needs the local broker backend"
    topic = unique_name(request, "frozen-source-")
    create_topic(source_cluster.bootstrap_servers, topic)
    run = MirrorRun(write_config(tmp_path, source_cluster, target_cluster, [topic]), tmp_path / "run.log")
    try:
        assert_eventually(
            lambda: _assert_running(run, _beats(target_cluster, "heartbeats", since=time.time() - 3)),
            timeout=120,
            interval=1,
        )
        frozen_at = time.time()
        os.kill(source_cluster.pid, signal.SIGSTOP)
        try:
            during = assert_eventually(
                lambda: _assert_beats_while_frozen(run, target_cluster, frozen_at, 5), timeout=60, interval=1
            )
        finally:
            os.kill(source_cluster.pid, signal.SIGCONT)
        thawed_at = time.time()
        assert {(b.source_alias, b.target_alias) for b in during} == {("A", "B")}
        # The reverse heartbeats, written into A, flow again once A answers.
        assert_eventually(
            lambda: _assert_running(run, _beats(target_cluster, "A.heartbeats", since=thawed_at)),
            timeout=180,
            interval=1,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        os.kill(source_cluster.pid, signal.SIGCONT)
        run.cleanup()


def _beats(cluster: KafkaCluster, topic: str, *, since: float, until: float | None = None) -> list[Heartbeat]:
    tail = PartitionTail(cluster.properties(), topic)
    try:
        beats = [Heartbeat.decode(r.key, r.value) for r in tail.catch_up()]
    except KafkaClientError as exc:
        raise AssertionError(f"{topic} cannot be read (yet): {exc}") from exc
    finally:
        tail.close()
    return [b for b in beats if since * 1000 <= b.timestamp_ms <= (until or time.time() + 60) * 1000]


def _assert_silent_for(run: MirrorRun, seconds: float) -> None:
    assert run.process.poll() is None, f"mirror gave up during the outage:\n{run.output()[-3000:]}"
    reported = [int(s) for s in re.findall(r"B not answering for (\d+)s", run.output())]
    assert max(reported, default=0) >= seconds, f"B reported silent for {max(reported, default=0)}s so far"


def _assert_beats_while_frozen(
    run: MirrorRun, cluster: KafkaCluster, frozen_at: float, count: int
) -> list[Heartbeat]:
    beats = _beats(cluster, "heartbeats", since=frozen_at + 2)
    assert run.process.poll() is None, run.output()[-3000:]
    assert len(beats) >= count, f"only {len(beats)} heartbeats A->B reached B while A was frozen"
    return beats


def _assert_running(run: MirrorRun, beats: list[Heartbeat]) -> None:
    assert run.process.poll() is None, run.output()[-3000:]
    assert beats, "no heartbeat yet"
