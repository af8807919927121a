"""Checkpoints across crashes: SIGKILL `mirror run` while a group moves; nothing goes backwards or
stalls, and a run killed before a quiet partition's last offset sync leaves that sync to the next."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirror.flow.tail import PartitionTail
from mirror.kafka.clients import COORDINATOR_CODES
from mirror.kafka.wire import Checkpoint
from tests.checkpoint_flow import offset_syncs_of
from tests.helpers import assert_eventually, create_topic, run_seed, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, committed_positions, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _produce_steadily(cluster: KafkaCluster, topic: str, stop: threading.Event) -> None:
    producer = Producer(cluster.properties(**{"linger.ms": "5"}))
    i = 0
    while not stop.is_set():
        for _ in range(50):
            producer.produce(topic, value=b"v%d" % i, partition=0)
            i += 1
        producer.poll(0)
        stop.wait(0.05)  # ~1,000 records/s
    assert producer.flush(30) == 0


def _commit(consumer: Consumer, position: TopicPartition) -> None:
    """Commit as an application does: a group coordinator still loading (the cluster's offsets topic
    just made, on a busy machine) or moving is asked again, as the Java consumer does by itself."""
    deadline = time.monotonic() + 60
    while True:
        try:
            consumer.commit(offsets=[position], asynchronous=False)
            return
        except KafkaException as exc:
            error = exc.args[0]
            moving = error.code() in COORDINATOR_CODES or error.retriable()
            if not moving or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _consume_steadily(
    cluster: KafkaCluster,
    group: str,
    topic: str,
    stop: threading.Event,
    drain: threading.Event,
    rng: random.Random,
) -> list[int]:
    """Consume and commit every few dozen records until `stop`; once `drain` is set too (the
    producer has finished), read on to the end of the partition and commit that.

    Returns the committed positions, in order. The last one is the end of the partition: a group
    stopped mid-stream translates only to the sync before it (MM2's rule), so it is the caught-up
    group whose final position every checkpoint must eventually name exactly.
    """
    consumer = Consumer(
        cluster.properties(
            **{"group.id": group, "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
        )
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    commits: list[int] = []
    try:
        while not stop.is_set():
            messages = consumer.consume(rng.randint(10, 80), timeout=0.3)
            good = [m for m in messages if m.error() is None]
            if good:
                position = good[-1].offset() + 1
                _commit(consumer, TopicPartition(topic, 0, position))
                commits.append(position)
            stop.wait(0.1)
        drain.wait(120)
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        position = commits[-1] if commits else 0
        while position < end:
            good = [m for m in consumer.consume(1000, timeout=1) if m.error() is None]
            if good:
                position = good[-1].offset() + 1
        _commit(consumer, TopicPartition(topic, 0, position))
        commits.append(position)
    finally:
        consumer.close()
    return commits


def _checkpoints(target: KafkaCluster, group: str, topic: str) -> list[Checkpoint]:
    if "A.checkpoints.internal" not in AdminClient(target.properties()).list_topics(timeout=30).topics:
        return []  # no flow into this cluster has started yet
    tail = PartitionTail(target.properties(), "A.checkpoints.internal")
    try:
        decoded = (Checkpoint.decode(r.key, r.value) for r in tail.catch_up())
        return [c for c in decoded if (c.group, c.topic, c.partition) == (group, topic, 0)]
    finally:
        tail.close()


def test_checkpoints_never_move_backwards_across_sigkills_and_restarts(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic, group = unique_name(request, "ckpt-kill-"), unique_name(request, "ckpt-kill-group-")
    create_topic(source_cluster.bootstrap_servers, topic)
    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        [topic],
        groups=[group],
        emit_checkpoints_interval_seconds=1,
        sync_group_offsets_interval_seconds=1,
    )
    rng = random.Random(run_seed())
    stop, drain = threading.Event(), threading.Event()
    commits: list[int] = []
    producer = threading.Thread(target=_produce_steadily, args=(source_cluster, topic, stop))
    consumer = threading.Thread(
        target=lambda: commits.extend(
            _consume_steadily(source_cluster, group, topic, stop, drain, random.Random(rng.random()))
        )
    )
    producer.start()
    consumer.start()
    runs: list[MirrorRun] = []
    remote = f"A.{topic}"
    try:
        for kill in range(4):
            run = MirrorRun(config, tmp_path / f"run-{kill}.log")
            runs.append(run)
            seen = len(_checkpoints(target_cluster, group, remote))
            # Each run gets past start-up and emits a few checkpoints of its own (a random number,
            # so the kill lands at a different point of its rounds each time) before it is killed.
            wanted = seen + rng.randint(1, 4)
            assert_eventually(
                lambda wanted=wanted, run=run: _assert_checkpoints(
                    target_cluster, group, remote, wanted, run
                ),
                timeout=120,
                interval=0.2,
            )
            if kill < 3:
                run.kill()
        stop.set()
        producer.join(timeout=60)
        drain.set()
        consumer.join(timeout=180)
        assert not consumer.is_alive(), "the consumer did not reach the end of the source partition"
        final = commits[-1]
        # Not stalled by the restarts: the last run translates the caught-up group's final position.
        assert_eventually(
            lambda: _assert_equal(_checkpoints(target_cluster, group, remote)[-1].upstream_offset, final),
            timeout=120,
            interval=0.5,
        )
        assert runs[-1].stop() == 0, runs[-1].output()[-3000:]
    finally:
        stop.set()
        drain.set()
        for run in runs:
            run.cleanup()

    checkpoints = _checkpoints(target_cluster, group, remote)
    downstream = [c.downstream_offset for c in checkpoints]
    upstream = [c.upstream_offset for c in checkpoints]
    assert downstream == sorted(downstream), f"a checkpoint moved backwards: {downstream}"
    assert upstream == sorted(upstream)
    assert len(checkpoints) >= 4


def _assert_checkpoints(target: KafkaCluster, group: str, topic: str, wanted: int, run: MirrorRun) -> None:
    assert run.process.poll() is None, run.output()[-3000:]
    assert len(_checkpoints(target, group, topic)) >= wanted


def _assert_equal(actual: object, expected: object) -> None:
    assert actual == expected


def test_a_run_killed_between_a_copy_and_its_trailing_sync_leaves_that_sync_to_the_next_run(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A group that read all of a quiet partition translates to the remote partition's end only
    through the sync of its last record, which goes out a transaction after the records. A run
    killed in between (or a task fenced, or one unsure whether its commit landed) must not lose
    it: nothing more is copied, so nothing else would ever say where that record landed."""
    topic = unique_name(request, "trailing-kill-")
    create_topic(source_cluster.bootstrap_servers, topic)
    producer = Producer(source_cluster.properties())
    for i in range(50):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    # Transactions held open 5 s: the records' commit and the trailing sync's are 5 s apart.
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], commit_interval_ms=5000)
    remote, syncs_topic = f"A.{topic}", "mm2-offset-syncs.A.internal"
    first = MirrorRun(config, tmp_path / "first.log")
    second: MirrorRun | None = None
    try:

        def records_committed() -> None:
            assert first.process.poll() is None, first.output()[-3000:]
            assert committed_positions(target_cluster, {(topic, 0): (remote, 0)}) == {(topic, 0): 50}

        assert_eventually(records_committed, timeout=180, interval=0.1)
        first.kill()
        assert "u=49" in _position_metadata(target_cluster, remote), (
            "the position does not say the sync is due"
        )
        before = [sync.upstream_offset for sync in offset_syncs_of(target_cluster, syncs_topic, topic)]
        assert 49 not in before, (
            f"the kill came after the trailing sync (syncs of {before}): it proves nothing"
        )

        last_landed = _last_record_offset(target_cluster, remote, records=50)
        second = MirrorRun(config, tmp_path / "second.log")
        run = second

        def trailing_synced() -> None:
            assert run.process.poll() is None, run.output()[-3000:]
            pairs = [
                (s.upstream_offset, s.downstream_offset)
                for s in offset_syncs_of(target_cluster, syncs_topic, topic)
            ]
            assert (49, last_landed) in pairs, f"no sync of the last record (49 at {last_landed}): {pairs}"

        assert_eventually(trailing_synced, timeout=180, interval=0.5)
        assert second.stop() == 0, second.output()[-3000:]
    finally:
        first.cleanup()
        if second is not None:
            second.cleanup()


def _last_record_offset(cluster: KafkaCluster, topic: str, *, records: int) -> int:
    """Where the last of the `records` committed records of `topic`'s partition 0 sits."""
    consumer = Consumer(
        cluster.properties(**{"group.id": "last-record", "isolation.level": "read_committed"})
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        offsets: list[int] = []
        while len(offsets) < records:
            messages = consumer.consume(records, timeout=30)
            assert messages, f"{topic} holds {len(offsets)} committed records, not {records}"
            offsets += [m.offset() for m in messages if m.error() is None]
        return offsets[records - 1]
    finally:
        consumer.close()


def _position_metadata(cluster: KafkaCluster, remote_topic: str) -> str:
    """The metadata the flow committed with its position for `remote_topic`'s partition 0."""
    reader = Consumer(
        cluster.properties(**{"group.id": "__mirror-positions.A-B", "isolation.level": "read_committed"})
    )
    try:
        (position,) = reader.committed([TopicPartition(remote_topic, 0)], timeout=30)
        return position.metadata or ""
    finally:
        reader.close()
