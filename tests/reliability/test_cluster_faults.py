"""Brokers that crash or freeze in the middle of a run: mirror waits them out, nothing is lost or
duplicated, and heartbeats into the cluster that still answers keep coming."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirror.errors import KafkaClientError
from mirror.flow.tail import PartitionTail
from mirror.kafka.wire import Heartbeat
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster, local_clusters
from tests.mirror_process import (
    MirrorRun,
    assert_alive,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

STALL_SECONDS = 25  # longer than the transaction timeout below, so the broker aborts what was open
TRANSACTION_TIMEOUT_MS = 10_000
DOWN_SECONDS = 10  # how long a killed broker stays down
BACKLOG = 20_000  # records on the source before mirror starts; more arrive throughout


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[KafkaCluster]]:
    # A pair of their own. A broker killed here recovers every log it holds before it answers: the
    # session's shared brokers hold over a thousand by now (the hundreds-of-partitions drills), which
    # took 37 s here and over 60 s on CI, while these tests' own topics take a second or two.
    with local_clusters(("A", "B"), tmp_path_factory.mktemp("fault-clusters")) as pair:
        yield pair


@pytest.fixture(scope="module")
def source_cluster(clusters: list[KafkaCluster]) -> KafkaCluster:
    return clusters[0]


@pytest.fixture(scope="module")
def target_cluster(clusters: list[KafkaCluster]) -> KafkaCluster:
    return clusters[1]


def produce(cluster: KafkaCluster, topic: str, count: int, offset: int) -> None:
    producer = Producer(cluster.properties(**{"linger.ms": "10"}))
    for i in range(offset, offset + count):
        producer.produce(topic, key=b"%d" % i, value=b"value-%d" % i, partition=i % 4)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


@pytest.mark.parametrize("which", ["target", "source"])
def test_a_broker_killed_and_restarted_mid_stream_loses_and_duplicates_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
    which: str,
) -> None:
    victim = target_cluster if which == "target" else source_cluster
    assert victim.broker is not None, "this fault test needs the local broker backend"
    topic = unique_name(request, f"{which}-crash-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    produce(source_cluster, topic, BACKLOG, 0)
    traffic = Traffic(source_cluster, {topic: 4}).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run, more=4000)
        victim.broker.kill()  # mid-transaction: ranges are being copied
        try:
            # mirror must ride out the outage: still running after it.
            with pytest.raises(subprocess.TimeoutExpired):
                run.wait(timeout=DOWN_SECONDS)
        finally:
            victim.broker.start()
            victim.broker.wait_until_ready()
        produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [topic], run, timeout=400)
        exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    said = [line for line in run.output().splitlines() if "not answering" in line or "restarting" in line]
    reliability(
        "fault",
        f"{which.capitalize()} broker SIGKILLed mid-stream, restarted {DOWN_SECONDS} s later",
        does=(
            "the open transaction is aborted and the task retries until the broker answers, then resumes "
            "from the committed positions; the driver says the cluster is not answering"
        ),
        comparison=comparison,
        shown=(said[0][:200] if said else "-") + f"; exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == BACKLOG + produced


def test_a_target_frozen_longer_than_the_transaction_timeout_loses_and_duplicates_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    assert target_cluster.pid is not None, "this fault test needs the local broker backend"
    topic = unique_name(request, "outage-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    produce(source_cluster, topic, BACKLOG, 0)
    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        [topic],
        clusters={"B": {"producer": {"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS}}},
    )
    run = MirrorRun(config, tmp_path / "run.log")
    traffic = Traffic(source_cluster, {topic: 4})
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run)
        traffic.start()
        os.kill(target_cluster.pid, signal.SIGSTOP)  # the target broker freezes mid-transaction
        try:
            # Frozen until mirror itself has reported B silent for longer than the client timeouts.
            assert_eventually(lambda: _assert_silent_for(run, STALL_SECONDS), timeout=STALL_SECONDS + 60)
        finally:
            os.kill(target_cluster.pid, signal.SIGCONT)
        produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [topic], run, timeout=400)
        # Copy tasks catch up within seconds: wait for the next progress line, which must no longer
        # say B is silent.
        assert_eventually(lambda: _assert_answering_again(run), timeout=60, interval=1)
        exit_code = run.stop()
    finally:
        os.kill(target_cluster.pid, signal.SIGCONT)
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    progress = [line for line in run.output().splitlines() if "records/s" in line]
    said = [line for line in progress if "B not answering for" in line]
    reliability(
        "fault",
        f"Target broker frozen (SIGSTOP) for over {STALL_SECONDS} s, longer than the "
        f"{TRANSACTION_TIMEOUT_MS // 1000} s transaction timeout, then resumed",
        does=(
            "the coordinator aborts the transaction that outlived its timeout; the task's commit is "
            "refused, it re-opens its producer and reads the positions back"
        ),
        comparison=comparison,
        shown=(said[-1][:200] if said else "-") + f"; exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == BACKLOG + produced
    # The progress lines said what was going on, and stopped saying it once B answered again.
    assert said
    assert "not answering" not in progress[-1]


def test_heartbeats_into_the_target_go_on_while_the_source_is_frozen(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Disaster recovery is when heartbeats matter: with A gone, B must keep hearing from the flow
    # (so monitoring can tell "A is down" from "mirror is down"), while A.heartbeats ages.
    assert source_cluster.pid is not None, "this fault test needs the local broker backend"
    topic = unique_name(request, "frozen-source-")
    create_topic(source_cluster.bootstrap_servers, topic)
    started = time.time()
    run = MirrorRun(write_config(tmp_path, source_cluster, target_cluster, [topic]), tmp_path / "run.log")
    try:
        assert_eventually(
            lambda: _assert_running(run, _beats(target_cluster, "heartbeats", since=started)),
            timeout=120,
            interval=1,
        )
        frozen_at = time.time()
        os.kill(source_cluster.pid, signal.SIGSTOP)
        try:
            during = assert_eventually(
                lambda: _assert_beats_while_frozen(run, target_cluster, frozen_at, 5), timeout=180, interval=1
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


def _assert_answering_again(run: MirrorRun) -> None:
    progress = [line for line in run.output().splitlines() if "records/s" in line]
    assert progress and "not answering" not in progress[-1], progress[-1:]


def _assert_silent_for(run: MirrorRun, seconds: float) -> None:
    assert_alive(run)  # mirror must not give up during the outage
    reported = [int(s) for s in re.findall(r"B not answering for (\d+)s", run.output())]
    assert max(reported, default=0) >= seconds, f"B reported silent for {max(reported, default=0)}s so far"


def _assert_beats_while_frozen(
    run: MirrorRun, cluster: KafkaCluster, frozen_at: float, count: int
) -> list[Heartbeat]:
    beats = _beats(cluster, "heartbeats", since=frozen_at + 2)
    assert_alive(run)
    assert len(beats) >= count, f"only {len(beats)} heartbeats A->B reached B while A was frozen"
    return beats


def _assert_running(run: MirrorRun, beats: list[Heartbeat]) -> None:
    assert_alive(run)
    assert beats, "no heartbeat yet"
