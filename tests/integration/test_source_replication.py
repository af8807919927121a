"""The source component against real brokers: exact copies, crashes, zombies, clean stops."""

from __future__ import annotations

import random
import shutil
import threading
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import (
    MirrorRun,
    replicate_until_caught_up,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LARGE_VALUE = bytes(range(256)) * 3500  # ~900 KB


def produce_mixed(
    cluster: KafkaCluster, topic: str, count: int, partitions: int, *, seed: int, aborted_every: int = 0
) -> None:
    """Null keys, null values, repeated headers, and (with aborted_every) aborted transactions between
    committed ones, so the source has markers and aborted records the copy must skip."""
    rng = random.Random(seed)
    producer = Producer(cluster.properties(**{"transactional.id": f"seed-{topic}", "linger.ms": "10"}))
    producer.init_transactions(30)
    sent = 0
    batch = 0
    while sent < count:
        batch += 1
        producer.begin_transaction()
        size = min(rng.randint(200, 2000), count - sent)
        for i in range(size):
            n = sent + i
            key = None if n % 7 == 0 else f"key-{n}".encode()
            value = None if n % 11 == 0 else f"value-{n}-".encode() * rng.randint(1, 20)
            headers = [("trace", str(n).encode()), ("trace", None), ("kind", b"x")] if n % 3 == 0 else None
            producer.produce(topic, value=value, key=key, partition=n % partitions, headers=headers)
        if aborted_every and batch % aborted_every == 0:
            producer.flush(30)  # the aborted records really reach the log
            producer.abort_transaction(30)
            continue
        producer.commit_transaction(30)
        sent += size


def test_replicates_every_record_exactly_and_stops_cleanly(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    plain = unique_name(request, "plain-")
    log_append = unique_name(request, "logappend-")
    create_topic(source_cluster.bootstrap_servers, plain, partitions=3)
    create_topic(source_cluster.bootstrap_servers, log_append, 2, {"message.timestamp.type": "LogAppendTime"})
    produce_mixed(source_cluster, plain, 3000, 3, seed=1, aborted_every=3)
    produce_mixed(source_cluster, log_append, 1000, 2, seed=2)
    large = Producer(source_cluster.properties())
    large.produce(plain, value=LARGE_VALUE, key=b"large", partition=1)
    large.flush(30)

    config = write_config(tmp_path, source_cluster, target_cluster, [plain, log_append])
    metrics_url = f"http://127.0.0.1:{yaml.safe_load(config.read_text())['metrics']['port']}/metrics"
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [plain, log_append], run)
        # Lag is refreshed with each progress report; every partition of both topics reaches 0.
        scraped = assert_eventually(lambda: _lag_is_zero(metrics_url, [plain, log_append]), timeout=30)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    for topic in (plain, log_append):
        source_records = read_topic(source_cluster.bootstrap_servers, topic)
        assert_same_records(source_records, read_topic(target_cluster.bootstrap_servers, f"A.{topic}"))
        for partition, records in source_records.items():
            labels = {"flow": "A->B", "topic": topic, "partition": str(partition)}
            assert scraped.get_sample_value("mirror_source_records_total", labels) == len(records)
    committed = {"flow": "A->B", "outcome": "committed"}
    assert (scraped.get_sample_value("mirror_source_transactions_total", committed) or 0) > 0
    assert "exactly-once" in run.output()
    assert "Traceback" not in run.output()


class _Scrape:
    def __init__(self, text: str) -> None:
        self.families = list(text_string_to_metric_families(text))

    def get_sample_value(self, name: str, labels: dict[str, str]) -> float | None:
        for family in self.families:
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return None


def _lag_is_zero(url: str, topics: list[str]) -> _Scrape:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a loopback URL we built
        scrape = _Scrape(response.read().decode())
    lags = [
        sample
        for family in scrape.families
        if family.name == "mirror_source_lag_records"
        for sample in family.samples
        if sample.labels["topic"] in topics
    ]
    assert {sample.labels["topic"] for sample in lags} == set(topics)
    assert all(sample.value == 0 for sample in lags)
    return scrape


def test_exactly_once_across_repeated_sigkills(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topics = [unique_name(request, f"eos{i}-") for i in range(3)]
    for topic, partitions in zip(topics, (4, 3, 2), strict=True):
        create_topic(source_cluster.bootstrap_servers, topic, partitions=partitions)
    # About half the records exist before the first start; the rest arrive while mirror is being killed.
    produce_mixed(source_cluster, topics[0], 30_000, 4, seed=3, aborted_every=4)
    producers = [
        threading.Thread(
            target=produce_mixed, args=(source_cluster, topics[0], 20_000, 4), kwargs={"seed": 4}
        ),
        threading.Thread(
            target=produce_mixed,
            args=(source_cluster, topics[1], 30_000, 3),
            kwargs={"seed": 5, "aborted_every": 5},
        ),
        threading.Thread(
            target=produce_mixed, args=(source_cluster, topics[2], 20_000, 2), kwargs={"seed": 6}
        ),
    ]
    large = Producer(source_cluster.properties())
    for i in range(6):
        large.produce(topics[2], value=LARGE_VALUE, key=f"large-{i}".encode(), partition=i % 2)
    large.flush(60)

    config = write_config(tmp_path, source_cluster, target_cluster, topics)
    rng = random.Random(7)
    for thread in producers:
        thread.start()
    for kill in range(6):
        run = MirrorRun(config, tmp_path / f"run-{kill}.log")
        try:
            # Kill while copying: after this run committed something, at a random point of its work.
            wait_until_copying(source_cluster, target_cluster, topics, run, more=rng.randint(1, 8_000))
        finally:
            run.kill()
            run.cleanup()
        if kill == 3:
            shutil.rmtree(
                tmp_path / "state"
            )  # the offsets on the target, not Spark's checkpoint, are the truth
    for thread in producers:
        thread.join(timeout=300)

    final = MirrorRun(config, tmp_path / "final.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, topics, final)
        assert final.stop() == 0, final.output()[-3000:]
    finally:
        final.cleanup()
    total = 0
    for topic in topics:
        source_records = read_topic(source_cluster.bootstrap_servers, topic)
        assert_same_records(source_records, read_topic(target_cluster.bootstrap_servers, f"A.{topic}"))
        total += sum(len(records) for records in source_records.values())
    assert total >= 100_000


def test_a_second_instance_fences_the_first_which_exits_with_a_clear_message(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "twice-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 5000, 2, seed=8)
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    first = MirrorRun(
        write_config(first_dir, source_cluster, target_cluster, [topic]), tmp_path / "first.log"
    )
    second: MirrorRun | None = None
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic], first)
        second = MirrorRun(
            write_config(second_dir, source_cluster, target_cluster, [topic]), tmp_path / "second.log"
        )
        produce_mixed(source_cluster, topic, 5000, 2, seed=9)
        assert first.wait(timeout=120) == 3, first.output()[-3000:]
        lines = [line for line in first.output().splitlines() if "another mirror instance took over" in line]
        assert lines and lines[0].startswith("mirror: flow A->B:"), first.output()[-3000:]
        wait_until_caught_up(source_cluster, target_cluster, [topic], second)
        assert second.stop() == 0, second.output()[-3000:]
    finally:
        first.cleanup()
        if second is not None:
            second.cleanup()
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
    )


def test_at_least_once_mode_says_so_and_copies_everything(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "alo-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 4000, 2, seed=10, aborted_every=3)
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], exactly_once=False)
    run = replicate_until_caught_up(config, tmp_path / "run.log", source_cluster, target_cluster, [topic])
    assert "at-least-once (exactly_once: false)" in run.output()
    # Without a crash nothing is duplicated in this mode either; aborted source records are still skipped.
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
    )


def test_starts_after_a_remote_topic_it_no_longer_copies_was_deleted(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The offsets topic still remembers the first topic; its positions must not be committed for a
    # remote topic that is gone (the broker refuses, and the run used to exit 1 at start).
    first, second = unique_name(request, "first-"), unique_name(request, "second-")
    for topic in (first, second):
        create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
        produce_mixed(source_cluster, topic, 500, 2, seed=11)
    config = write_config(tmp_path, source_cluster, target_cluster, [first])
    replicate_until_caught_up(config, tmp_path / "first.log", source_cluster, target_cluster, [first])
    admin = AdminClient(target_cluster.properties())
    admin.delete_topics([f"A.{first}"], operation_timeout=30)[f"A.{first}"].result(timeout=30)

    config = write_config(tmp_path, source_cluster, target_cluster, [second], name="second.yaml")
    replicate_until_caught_up(config, tmp_path / "second.log", source_cluster, target_cluster, [second])
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, second),
        read_topic(target_cluster.bootstrap_servers, f"A.{second}"),
    )
