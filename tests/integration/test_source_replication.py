"""The source component against real brokers: exact copies, metrics, modes, clean stops.

Crashes, zombies and other faults: tests/reliability."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from mirror.kafka.packing_producer import PackingProducer
from mirror.source.partition_copy import PartitionCopy
from mirror.source.task_producers import TaskProducers
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import (
    MirrorRun,
    replicate_until_caught_up,
    wait_until_caught_up,
    write_config,
)
from tests.records import assert_same_records, read_topic
from tests.seeding import LARGE_VALUE, produce_mixed
from tests.unit.flows import flow_a_to_b

pytestmark = [pytest.mark.integration, pytest.mark.slow]


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
    assert large.flush(30) == 0

    levels = {"mirror.source": "DEBUG", "mirror.heartbeat": "DEBUG"}
    config = write_config(tmp_path, source_cluster, target_cluster, [plain, log_append], logging=levels)
    metrics_url = f"http://127.0.0.1:{yaml.safe_load(config.read_text())['metrics']['port']}/metrics"
    run = MirrorRun(config, tmp_path / "run.log", options=("--log-format", "json"))
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
    _assert_executors_logged_json(run, [plain, log_append])


def test_the_aiokafka_producer_copies_hundreds_of_partitions_exactly_and_its_positions_read_back(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # copy_producer: aiokafka packs partitions into produce requests: null keys and values (both
    # at once too), repeated and null headers, aborted source transactions, a ~900 KB value,
    # LogAppendTime, over 200 partitions and two tasks.
    topic, log_append = unique_name(request, "packed-"), unique_name(request, "packed-appended-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=200)
    create_topic(source_cluster.bootstrap_servers, log_append, 2, {"message.timestamp.type": "LogAppendTime"})
    produce_mixed(source_cluster, topic, 20_000, 200, seed=21, aborted_every=3)
    produce_mixed(source_cluster, log_append, 1000, 2, seed=22)
    large = Producer(source_cluster.properties())
    large.produce(topic, value=LARGE_VALUE, key=b"large", partition=7)
    assert large.flush(30) == 0

    config = write_config(
        tmp_path, source_cluster, target_cluster, [topic, log_append], copy_producer="aiokafka", tasks_max=2
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic, log_append], run)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    for copied in (topic, log_append):
        assert_same_records(
            read_topic(source_cluster.bootstrap_servers, copied),
            read_topic(target_cluster.bootstrap_servers, f"A.{copied}"),
        )
    # The positions went into the transactions by aiokafka's TxnOffsetCommit; librdkafka (every
    # reader of them: the tasks, the lag, `mirror verify`) reads each one back whole: a metadata
    # string committed without librdkafka's terminator came back with stray bytes appended.
    reader = Consumer({**target_cluster.properties(), "group.id": "__mirror-positions.A-B"})
    try:
        committed = reader.committed([TopicPartition(f"A.{topic}", p) for p in range(200)], timeout=30)
    finally:
        reader.close()
    assert all(tp.error is None and tp.offset > 0 for tp in committed), committed[:3]
    # u=: the last record's source offset while its trailing offset sync is due.
    fields = re.compile(r"d=\d+;t=[\w+/]{22};e=\d+;s=[\w+/]{22}(;u=\d+)?")
    assert [tp.metadata for tp in committed if not fields.fullmatch(tp.metadata)] == []
    assert "Traceback" not in run.output()


def test_a_delivery_aiokafka_failed_keeps_the_transaction_from_committing(
    target_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    # aiokafka fails only the batch, never the transaction: the record that failed here (a
    # partition the topic has not got) has no callback, as an offsets record has none, and the
    # commit must still refuse what did land rather than commit it without the failed one.
    topic, transactional_id = unique_name(request, "refused-"), unique_name(request, "packing-")
    create_topic(target_cluster.bootstrap_servers, topic, partitions=1)
    options = {"bootstrap_servers": target_cluster.bootstrap_servers}
    producer = PackingProducer(options, transactional_id, group_id="positions", doing="test")
    try:
        producer.begin_transaction()
        landed: list[int] = []
        producer.produce(topic, b"lands", partition=0, on_delivery=lambda _e, m: landed.append(m.offset()))
        producer.produce(topic, b"has no partition", partition=5)
        assert producer.flush(30) == 0
        assert landed == [0]
        assert not producer.usable
        # Records still go in, so the copy task learns why from the delivery reports (a record too
        # large, or refused, is named there) rather than from a refused produce.
        producer.produce(topic, b"after the failure", partition=0)
        with pytest.raises(KafkaException) as refused:
            producer.commit_transaction(30)
        assert refused.value.args[0].fatal()
    finally:
        producer.close()
    # As a copy task does: the next producer with the id fences this one and aborts what it held.
    PackingProducer(options, transactional_id, group_id="positions", doing="test").close()
    assert read_topic(target_cluster.bootstrap_servers, topic, timeout=30) == {0: []}


@pytest.mark.parametrize("copy_producer", ["aiokafka", "librdkafka"])
def test_an_at_least_once_abort_serves_every_report_before_the_task_forgets_its_reads(
    target_cluster: KafkaCluster, request: pytest.FixtureRequest, copy_producer: str
) -> None:
    # With no transaction to abort, the failed round's records are still in flight when the task
    # goes back to its committed positions. Their reports must all be in by the time abort()
    # returns: one served later lands in the next round's downstream offsets, one more than its
    # source offsets, and that round stops on the mismatch.
    topic = unique_name(request, "alo-abort-")
    create_topic(target_cluster.bootstrap_servers, topic, partitions=50)
    settings = flow_a_to_b(
        [topic], exactly_once=False, copy_producer=copy_producer, target_producer=target_cluster.properties()
    )
    parts = [PartitionCopy("A->B", topic, n, topic, 100, position=0, committed=0) for n in range(50)]
    producers = TaskProducers(settings, 0, parts)
    producers.make()
    try:
        assert producers.producers is not None
        for _ in range(40):
            for part in parts:
                producers.producers[0].produce(
                    topic, b"in flight", None, part.partition, on_delivery=part.on_delivery
                )
        producers.sent()
        producers.abort()
        assert [len(part.downstream) for part in parts] == [40] * 50
        assert producers.ready  # the target answered: the same producers carry on
        assert min(offset for part in parts for offset in part.downstream) >= 0
    finally:
        producers.close()


def _assert_executors_logged_json(run: MirrorRun, topics: list[str]) -> None:
    """The copy tasks and heartbeat rounds ran in Spark's Python workers, which know nothing of the
    driver's logging: their lines, at the levels mm2.yaml set, reached the run's output as JSON."""
    lines = run.output().splitlines()
    records = run.log_records()
    assert len(records) == len(lines), [line for line in lines if not line.startswith("{")][:5]
    owned = {f"{topic}-{p}" for topic, count in zip(topics, (3, 2), strict=True) for p in range(count)}
    copy_task = [r for r in records if r.get("component") == "source" and r["logger"] == "mirror.source.task"]
    took = [r for r in copy_task if r["message"].startswith("took ")]
    assert took and all(r["flow"] == "A->B" and r["level"] == "INFO" for r in took), copy_task[:5]
    assert {p for r in took for p in r["partitions"]} >= owned  # and the heartbeats topic's
    transactions = [r for r in copy_task if r["message"].startswith("committed ") and r["level"] == "DEBUG"]
    assert transactions and {p for r in transactions for p in r["partitions"]} >= owned
    assert any(r["message"].startswith("gave up ") for r in copy_task), copy_task[-5:]
    heartbeats = [r for r in records if r.get("component") == "heartbeat" and r["level"] == "DEBUG"]
    assert heartbeats and all(r["flow"] == "A->B" for r in heartbeats)
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)


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


def test_auto_offset_reset_latest_copies_what_comes_after_the_start_and_then_keeps_its_place(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Kafka's testReplicateFromLatest: MM2's A.consumer.auto.offset.reset=latest. A backlog written
    # before the flow first finds the partitions is not copied; everything after is, also what is
    # written while mirror is stopped (a stored position is never moved to the end).
    topic = unique_name(request, "latest-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 1000, 2, seed=12)
    backlog = {p: len(records) for p, records in read_topic(source_cluster.bootstrap_servers, topic).items()}
    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        [topic],
        clusters={"A": {"consumer": {"auto.offset.reset": "latest"}}},
    )
    run = MirrorRun(config, tmp_path / "first.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)  # positions at the ends
        produce_mixed(source_cluster, topic, 600, 2, seed=13, aborted_every=3)
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()
    produce_mixed(source_cluster, topic, 400, 2, seed=14)
    replicate_until_caught_up(config, tmp_path / "second.log", source_cluster, target_cluster, [topic])

    source = read_topic(source_cluster.bootstrap_servers, topic)
    after_start = {p: records[backlog[p] :] for p, records in source.items()}
    assert sum(len(records) for records in after_start.values()) == 1000
    assert_same_records(after_start, read_topic(target_cluster.bootstrap_servers, f"A.{topic}"))


def test_with_offset_syncs_off_a_flow_copies_and_creates_no_offset_syncs_topic_anywhere(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Kafka's testReplicationWithoutOffsetSyncWillNotCreateOffsetSyncsTopic. Aliases of its own
    # (the same brokers) give this flow internal topic names no other test creates.
    suffix = unique_name(request)[-6:]
    source_alias, target_alias = f"S{suffix}", f"T{suffix}"
    topic = unique_name(request, "no-syncs-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 1000, 2, seed=15)
    config = tmp_path / "mm2.yaml"
    document = yaml.safe_load(write_config(tmp_path, source_cluster, target_cluster, [topic]).read_text())
    document["clusters"] = {
        source_alias: {"bootstrap_servers": source_cluster.bootstrap_servers},
        target_alias: {"bootstrap_servers": target_cluster.bootstrap_servers},
    }
    flow = document["flows"].pop("A->B")
    flow.update(emit_offset_syncs=False, emit_checkpoints=False, sync_group_offsets=False)
    document["flows"] = {f"{source_alias}->{target_alias}": flow}
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(
            source_cluster,
            target_cluster,
            [topic],
            run,
            remote_prefix=f"{source_alias}.",
            group_flow=f"{source_alias}-{target_alias}",
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"{source_alias}.{topic}"),
    )
    for cluster in (source_cluster, target_cluster):
        topics = AdminClient(cluster.properties()).list_topics(timeout=30).topics
        assert not [t for t in topics if t.startswith("mm2-offset-syncs") and suffix in t], sorted(topics)
        assert f"{source_alias}.checkpoints.internal" not in topics


def test_a_zombie_holding_any_producer_id_a_copy_task_may_use_is_fenced_when_mirror_starts(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Two tasks of four producers may hold task:0..7 (FlowSettings.copy_task_ids). This flow's
    # tasks own two or three partitions (the heartbeats topic's too), so they use task:0..4 at
    # most: task:7 is held by no live task, and only the connector's fencing round reaches it.
    topic = unique_name(request, "fenced-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    produce_mixed(source_cluster, topic, 400, 4, seed=5)
    witness = unique_name(request, "zombie-")
    create_topic(target_cluster.bootstrap_servers, witness, partitions=1)
    zombie = Producer({**target_cluster.properties(), "transactional.id": "mirror-A-B-task:7"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(witness, value=b"from a zombie")
    assert zombie.flush(30) == 0  # in the target's log, its transaction open

    config = write_config(
        tmp_path, source_cluster, target_cluster, [topic], tasks_max=2, producers_per_task=4
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)
        with pytest.raises(KafkaException) as fenced:
            zombie.commit_transaction(30)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()
    assert fenced.value.args[0].code() in {KafkaError._FENCED, KafkaError.PRODUCER_FENCED}, fenced.value
    assert read_topic(target_cluster.bootstrap_servers, witness, timeout=30) == {
        0: []
    }  # aborted by the fence
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
    )
