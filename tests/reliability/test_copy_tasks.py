"""The copy tasks under fire: many partitions, transactions every ~100 ms, and the processes that
hold them killed, frozen into zombies, or stopped by the whole process group.

Every case compares target and source record by record (read_committed) afterwards, and the kill
cases count the records the target holds in aborted transactions (read_uncommitted minus
read_committed), which shows the faults hit open transactions."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import assert_eventually, create_topic, run_seed, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, wait_until_copying, write_config
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics, process_tree, signal_each
from tests.seeding import LARGE_VALUE, produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

KILLS = 6
TOPICS, PARTITIONS = 4, 60  # 240 source partitions, every one receiving records throughout
KEEP = {"retention.ms": "-1"}


# Each copy producer's transactions, opened and committed its own way, die with the process, six
# times each (a new seed every run): ten for librdkafka's took 344 s of a CI run (34 s a kill, most
# of it the next run's start), the longest test of the parallel pass.
@pytest.mark.parametrize("copy_producer", ["librdkafka", "aiokafka"])
def test_sigkills_at_random_moments_with_hundreds_of_partitions_lose_and_duplicate_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
    copy_producer: str,
) -> None:
    seed = run_seed()
    rng = random.Random(seed)
    topics = [unique_name(request, f"many{i}-") for i in range(TOPICS)]
    for topic in topics:
        # No retention check may delete records mid-test (mirror would rightly report them
        # truncated, and the comparison would miss them), whatever timestamps they carry.
        create_topic(source_cluster.bootstrap_servers, topic, partitions=PARTITIONS, config=KEEP)
    # A backlog with aborted source transactions and ~900 KB records, then steady traffic into
    # every partition.
    produce_mixed(source_cluster, topics[0], 20_000, PARTITIONS, seed=seed, aborted_every=4)
    large = Producer(source_cluster.properties())
    for i in range(6):
        large.produce(topics[1], value=LARGE_VALUE, key=f"large-{i}".encode(), partition=i)
    assert large.flush(60) == 0
    # 1,000 records/s: each task's transaction of ~100 ms still holds records of many partitions
    # (twice that rate only made more to copy and compare).
    traffic = Traffic(source_cluster, dict.fromkeys(topics, PARTITIONS)).start()
    # Three producers per task (ids task:0..5): a kill lands between one producer's commit and
    # another's as often as inside a transaction.
    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        topics,
        tasks_max=2,
        producers_per_task=3,
        commit_interval_ms=100,
        copy_producer=copy_producer,
    )
    moments: Counter[str] = Counter()
    left_open: list[tuple[str, list[str]]] = []  # per kill: when it came, the transactions it left open
    try:
        for kill in range(KILLS):
            run = MirrorRun(config, tmp_path / f"run-{kill}.log")
            try:
                if rng.random() < 0.7:
                    # While copying: 240 partitions, a transaction per task every ~100 ms.
                    wait_until_copying(
                        source_cluster, target_cluster, topics, run, more=rng.randint(1, 10_000)
                    )
                    time.sleep(rng.uniform(0, 1.0))
                    moment = "while copying"
                else:
                    delay = rng.uniform(0.5, 25.0)
                    with pytest.raises(subprocess.TimeoutExpired):
                        run.wait(timeout=delay)
                    moment = "in start-up or the first transactions"
                moments[moment] += 1
            finally:
                run.kill()
                run.cleanup()
            # Before the next run fences them: what the coordinators still hold open is what the
            # kill interrupted (they would time out only after transaction.timeout.ms, 60 s).
            left_open.append((moment, open_transactions(target_cluster, "mirror-A-B-task:")))
            if kill == KILLS // 2:
                (tmp_path / "state").rename(tmp_path / f"state-deleted-{kill}")  # the target is the truth
    finally:
        produced = traffic.stop()

    final = MirrorRun(config, tmp_path / "final.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, topics, final)
        exit_code = final.stop()
    finally:
        final.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, topics)
    aborted = aborted_on_target(target_cluster, [f"A.{t}" for t in topics])
    reliability(
        "fault",
        f"SIGKILL of `mirror run` at {KILLS} random moments, {TOPICS * PARTITIONS} partitions, "
        f"2 tasks of 3 {copy_producer} producers, transactions every 100 ms, Spark state deleted once",
        does=(
            "open transactions die with the process and are aborted when the next run fences their "
            "producers' ids; it resumes from the positions committed with the data"
        ),
        comparison=comparison,
        shown=f"seed {seed}; {', '.join(f'{n} {m}' for m, n in moments.items())}; "
        f"{sum(1 for _, ids in left_open if ids)} kills left transactions open (per kill: "
        f"{', '.join(str(len(ids)) for _, ids in left_open)}); {aborted:,} records in aborted transactions "
        f"on the target; final run exit {exit_code}",
    )
    # The kills hit open transactions: the coordinators held them open after the kill. Not every
    # kill finds one: one landing while the tasks hand their partitions over to a new generation
    # (the first runs make the remote heartbeats topic, and the tasks take their partitions again)
    # finds none open, as a CI run's first two kills did. Most of those while copying must.
    # aiokafka's producer opens its transaction at the coordinator only once it sends: a thin
    # transaction's records go out at its commit (mirror.kafka.packing_producer), so fewer kills
    # find one open (2 of 5 while copying, in the first run), and at least one must.
    copying = [ids for moment, ids in left_open if moment == "while copying"]
    hit = [ids for ids in copying if ids]
    enough = len(copying) / 2 if copy_producer == "librdkafka" else min(1, len(copying))
    assert len(hit) >= enough and (hit or not copying), f"kills and what they left open: {left_open}"
    assert exit_code == 0, final.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == 20_006 + produced
    # The kills hit open transactions: what they held is on the target, aborted, and unread.
    assert moments["while copying"] == 0 or aborted > 0, moments


def test_epoch_after_epoch_under_load_loses_and_duplicates_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    """Two-second epochs: every few seconds each task commits its last transaction and ends, Spark
    plans the next batch, and the next task of the slot fences the old id and re-reads the
    positions, all while 240 partitions receive records. The default epoch is ten minutes, so
    without this no other test crosses more than a boundary or two."""
    topics = [unique_name(request, f"epochs{i}-") for i in range(TOPICS)]
    for topic in topics:
        create_topic(source_cluster.bootstrap_servers, topic, partitions=PARTITIONS, config=KEEP)
        # A small backlog with aborted transactions; it also waits until every partition has a leader.
        produce_mixed(source_cluster, topic, 1_000, PARTITIONS, seed=len(topic), aborted_every=3)
    config = write_config(
        tmp_path, source_cluster, target_cluster, topics, spark={"epoch_seconds": 2}, tasks_max=2
    )
    metrics = f"http://127.0.0.1:{yaml.safe_load(config.read_text())['metrics']['port']}/metrics"
    traffic = Traffic(source_cluster, dict.fromkeys(topics, PARTITIONS), per_second=2000).start()
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        try:
            wait_until_copying(source_cluster, target_cluster, topics, run)
            gaps = assert_eventually(lambda: _epoch_gaps_at_least(metrics, 8), timeout=120, interval=1)
        finally:
            produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, topics, run)
        exit_code = run.stop()
    finally:
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, topics)
    reliability(
        "fault",
        f"2-second epochs under load: {len(gaps)} epoch boundaries, {TOPICS * PARTITIONS} partitions",
        does=(
            "at each boundary a task commits its last transaction and ends; the next fences the old id and "
            "reads the positions back from the target"
        ),
        comparison=comparison,
        shown=f"epoch gaps within {min(gaps):g}-{max(gaps):g} s (histogram buckets); exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == TOPICS * 1_000 + produced


def _epoch_gaps_at_least(url: str, count: int) -> list[float]:
    """The epoch gaps observed so far (as bucket bounds), once there are `count` of them."""
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a loopback URL we built
        families = list(text_string_to_metric_families(response.read().decode()))
    buckets = [
        (float(sample.labels["le"]), sample.value)
        for family in families
        if family.name == "mirror_source_epoch_gap_seconds"
        for sample in family.samples
        if sample.name.endswith("_bucket")
    ]
    observed = max((n for _, n in buckets), default=0)
    assert observed >= count, f"{observed:g} epoch boundaries so far"
    # Each gap as the upper bound of its bucket: enough to report the range.
    gaps, below = [], 0.0
    for bound, n in sorted(buckets):
        gaps += [bound] * int(n - below)
        below = n
    return gaps


def test_a_frozen_instance_is_fenced_when_another_takes_over_and_exits_when_it_thaws(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    """A real zombie: frozen with open transactions; meanwhile partitions are added and another
    instance with another tasks_max takes the flow over and copies; then the zombie thaws."""
    topic = unique_name(request, "zombie-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=12, config=KEEP)
    produce_mixed(source_cluster, topic, 5000, 12, seed=31)
    traffic = Traffic(source_cluster, {topic: 12}, per_second=1000).start()
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    first = MirrorRun(
        write_config(first_dir, source_cluster, target_cluster, [topic], tasks_max=2), tmp_path / "first.log"
    )
    second: MirrorRun | None = None
    frozen: list[int] = []
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], first, more=3000)
        frozen = process_tree(first.process.pid)
        signal_each(frozen, signal.SIGSTOP)
        # The assignment changes under the zombie: more partitions, and more tasks.
        admin = AdminClient(source_cluster.properties())  # kept: a collected client cancels its futures
        admin.create_partitions([NewPartitions(topic, 16)])[topic].result(30)
        traffic.set_partitions(topic, 16)
        second = MirrorRun(
            write_config(second_dir, source_cluster, target_cluster, [topic], tasks_max=3),
            tmp_path / "second.log",
        )
        wait_until_copying(source_cluster, target_cluster, [topic], second, more=2000, timeout=180)
        signal_each(frozen, signal.SIGCONT)
        frozen = []
        first_exit = first.wait(timeout=120)
        produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [topic], second)
        second_exit = second.stop()
    finally:
        signal_each(frozen, signal.SIGCONT)
        traffic.stop()
        first.cleanup()
        if second is not None:
            second.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    aborted = aborted_on_target(target_cluster, [f"A.{topic}"])
    errors = first.errors()
    reliability(
        "fault",
        "A frozen `mirror run` (SIGSTOP, open transactions) while partitions are added and another "
        "instance with another tasks_max takes over; then SIGCONT",
        does=(
            "the new instance takes the flow over (a new generation in the flow mark) and fences every "
            "producer id; the thawed zombie's commit is refused, it says so in one line and exits 3"
        ),
        comparison=comparison,
        shown=f"zombie exit {first_exit}: {errors[0] if errors else 'no line'}; {aborted:,} records in "
        f"aborted transactions; new instance exit {second_exit}",
    )
    assert first_exit == 3, first.output()[-3000:]
    assert len(errors) == 1 and "another mirror instance took over" in errors[0], first.output()[-3000:]
    assert "Traceback" not in first.output()
    assert second_exit == 0, second.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == 5000 + produced


def test_a_signal_to_the_whole_process_group_stops_cleanly_within_15_seconds(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    """What systemd's default stop (SIGTERM) and Ctrl-C in a terminal (SIGINT) do: every process of
    the group gets it, the Spark JVM included. One run stopped by each, in turn, on one topic under
    load; the run after each resumes where it stopped."""
    topic = unique_name(request, "group-stop-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=8, config=KEEP)
    produce_mixed(source_cluster, topic, 5000, 8, seed=41)
    traffic = Traffic(source_cluster, {topic: 8}, per_second=1000).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    stops: list[tuple[str, int, float, str]] = []
    try:
        for stop_signal, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT (Ctrl-C)")):
            run = MirrorRun(config, tmp_path / f"{stop_signal.name}.log")
            try:
                wait_until_copying(source_cluster, target_cluster, [topic], run, more=3000)
                os.killpg(run.process.pid, stop_signal)
                signalled = time.monotonic()
                exit_code = run.wait(timeout=60)
                stops.append((name, exit_code, time.monotonic() - signalled, run.output()))
            finally:
                run.cleanup()
        produced = traffic.stop()
        resumed = MirrorRun(config, tmp_path / "resumed.log")
        try:
            wait_until_caught_up(source_cluster, target_cluster, [topic], resumed)
            assert resumed.stop() == 0, resumed.output()[-3000:]
        finally:
            resumed.cleanup()
    finally:
        traffic.stop()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    for name, exit_code, stop_seconds, _output in stops:
        reliability(
            "fault",
            f"{name} to the whole process group of `mirror run` while copying",
            does=(
                "the driver asks the copy tasks to commit and end, then exits 0; the next run resumes from "
                "the committed positions"
            ),
            comparison=comparison,
            shown=f"exit {exit_code} after {stop_seconds:.1f} s; the next run resumed and caught up",
        )
    for name, exit_code, stop_seconds, output in stops:
        assert exit_code == 0, f"{name}: {output[-3000:]}"
        assert stop_seconds <= 15, f"{name}: stopped after {stop_seconds:.1f} s:\n{output[-3000:]}"
        assert "Traceback" not in output, f"{name}: {output[-3000:]}"
    assert comparison.exact, comparison
    assert comparison.checked == 5000 + produced


def aborted_on_target(target: KafkaCluster, topics: list[str]) -> int:
    """Records the target holds in aborted transactions: read_uncommitted minus read_committed."""
    return _count(target, topics, "read_uncommitted") - _count(target, topics, "read_committed")


def _count(cluster: KafkaCluster, topics: list[str], isolation: str) -> int:
    reader = Consumer(
        cluster.properties(
            **{
                "group.id": f"count-{isolation}",
                "isolation.level": isolation,
                "enable.auto.commit": "false",
                "enable.partition.eof": "true",
            }
        )
    )
    try:
        metadata = reader.list_topics(timeout=30)
        partitions = [
            TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in metadata.topics[t].partitions
        ]
        ends = {
            (tp.topic, tp.partition): reader.get_watermark_offsets(tp, timeout=30)[1] for tp in partitions
        }
        pending = {key for key, end in ends.items() if end > 0}
        reader.assign(partitions)
        count = 0
        deadline = time.monotonic() + 180
        while pending and time.monotonic() < deadline:
            for message in reader.consume(10_000, timeout=0.5):
                if message.error() is None:
                    count += 1
            for tp in reader.position([TopicPartition(t, p) for t, p in pending]):
                if tp.offset >= ends[(tp.topic, tp.partition)]:
                    pending.discard((tp.topic, tp.partition))
        assert not pending, f"could not read {sorted(pending)[:5]} to their ends ({isolation})"
        return count
    finally:
        reader.close()


def open_transactions(cluster: KafkaCluster, prefix: str) -> list[str]:
    """The transactional ids starting with `prefix` whose transaction the cluster's coordinators
    hold open (Ongoing), as Kafka's own TransactionsCommand lists them."""
    assert cluster.libs is not None, "Kafka's Java tools are needed (the local backend has them)"
    command = [
        "java", "-cp", str(cluster.libs / "*"), "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server", cluster.bootstrap_servers, "list",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    header, *rows = [line.split() for line in result.stdout.splitlines() if line.strip()]
    ids, states = header.index("TransactionalId"), header.index("TransactionState")
    return sorted(row[ids] for row in rows if row[ids].startswith(prefix) and row[states] == "Ongoing")
