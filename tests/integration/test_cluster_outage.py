"""A cluster that stops answering in the middle of a run: mirror waits it out, nothing is lost."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.helpers import create_topic, unique_name
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
            time.sleep(STALL_SECONDS)
            assert run.process.poll() is None, f"mirror gave up during the outage:\n{run.output()[-3000:]}"
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
