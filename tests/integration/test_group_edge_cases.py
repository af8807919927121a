"""Consumer groups at the edges of translation, on one `mirror run` with cluster aliases of its own.

`offset_lag_max: 0` makes the source write an offset sync for every record, so translation is
exact and a moved group re-reads nothing. The other cases are the ones MM2's suite pins at the
edges: an empty partition, aborted transactions under a group's position, a group rewound on the
source, a topic added to a synced group, and records in the internal topics that do not decode.
Unique aliases keep this run's internal topics (and the garbage written into them) its own.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.checkpoint_flow import Flow, values
from tests.groups import commit, committed, consume_and_commit, produce, resume
from tests.helpers import assert_eventually, create_topic, run_mirror
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def flow(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flow]:
    suffix = uuid.uuid4().hex[:4]
    running = Flow(
        source_cluster,
        target_cluster,
        tmp_path_factory.mktemp("group-edges"),
        aliases=(f"S{suffix}", f"T{suffix}"),
        offset_lag_max=0,
    )
    try:
        yield running
        assert running.run.stop() == 0, running.run.output()[-3000:]
    finally:
        running.run.cleanup()


def test_with_offset_lag_max_zero_a_mid_stream_group_re_reads_nothing(flow: Flow) -> None:
    topic, group = flow.moved_group("exact", values("r", 0, 1500), consumed=987)
    read = resume(flow.target, group, flow.remote(topic), expected=1500 - 987)
    assert read == values("r", 987, 1500), f"re-read or skipped: got {len(read)} records"


def test_a_group_between_aborted_source_transactions_resumes_exactly_where_it_stopped(flow: Flow) -> None:
    topic, group = flow.name("aborted"), flow.name("aborted-group")
    create_topic(flow.source.bootstrap_servers, topic)
    committed_values = _produce_with_aborted_transactions(flow.source, topic, batches=12, size=50)
    # 275 ends in the middle of a committed batch, 300 right before an aborted one: the group's
    # next upstream offset is then an aborted record that was never copied.
    for consumed in (275, 300):
        position = consume_and_commit(flow.source, group, topic, 0, consumed)
        flow.wait_until_copied(topic)
        flow.wait_until_synced(group, topic, upstream=position)
        # A checkpoint made before the round read the newest syncs is a coarser one (MM2's rule),
        # and the next one moves the group up: wait for the exact one, where the group's next
        # record on the target is the one it stopped before on the source.
        remote = flow.remote(topic)
        last_read = _offset_of(flow.target, remote, committed_values[consumed - 1])
        next_to_read = _offset_of(flow.target, remote, committed_values[consumed])
        assert_eventually(
            functools.partial(_assert_between, flow.target, group, remote, last_read, next_to_read),
            timeout=60,
            interval=0.5,
        )
        read = resume(flow.target, group, flow.remote(topic), expected=len(committed_values) - consumed)
        assert read == committed_values[consumed:], f"from {consumed}: got {len(read)} records"


def _offset_of(cluster: KafkaCluster, topic: str, value: bytes) -> int:
    """Where the committed record holding `value` sits in partition 0 of `topic`."""
    reader = Consumer(
        cluster.properties(
            **{"group.id": f"find-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed"}
        )
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    try:
        while True:
            message = reader.poll(10)
            assert message is not None, f"{value!r} not found in {topic}"
            if message.error() is None and message.value() == value:
                return int(message.offset())
    finally:
        reader.close()


def _assert_between(cluster: KafkaCluster, group: str, topic: str, last_read: int, next_to_read: int) -> None:
    """The group's next record is `next_to_read`'s: it is past `last_read`, and at most there."""
    position = committed(cluster, group, topic, 1).get(0)
    assert position is not None and last_read < position <= next_to_read, (position, last_read, next_to_read)


def _produce_with_aborted_transactions(
    cluster: KafkaCluster, topic: str, *, batches: int, size: int
) -> list[bytes]:
    """`batches` transactions of `size` records, every third one aborted; returns the committed values."""
    producer = Producer(cluster.properties(**{"transactional.id": f"edges-{topic}"}))
    producer.init_transactions(30)
    kept: list[bytes] = []
    for batch in range(batches):
        producer.begin_transaction()
        aborted = batch % 3 == 2
        batch_values = values("aborted" if aborted else "r", batch * size, (batch + 1) * size)
        for value in batch_values:
            producer.produce(topic, value=value, partition=0)
        if aborted:
            assert producer.flush(30) == 0  # the aborted records really reach the log
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            kept += batch_values
    return kept


def test_a_partition_that_never_had_records_gets_no_checkpoint_until_records_are_mirrored(flow: Flow) -> None:
    topic, group = flow.name("empty-partition"), flow.name("empty-partition-group")
    remote = flow.remote(topic)
    # The application on B already committed 0 for the empty partition (as a consumer of the
    # remote topic does when it starts), and the source group commits 0 there too. The remote
    # topic comes first: the flow's topic refresh creates it within 2 s of the source topic.
    create_topic(flow.target.bootstrap_servers, remote, partitions=2)
    create_topic(flow.source.bootstrap_servers, topic, partitions=2)
    produce(flow.source, topic, values("p0", 0, 400), partition=0)
    commit(flow.target, group, {(remote, 1): 0})
    commit(flow.source, group, {(topic, 1): 0})
    position = consume_and_commit(flow.source, group, topic, 0, 400)
    flow.wait_until_copied(topic)

    # The target group holds only partition 1's offset: partition 0's is missing there and is written.
    flow.wait_until_synced(group, topic, upstream=position, partition=0)
    _prove_a_sync_round_ran_since(flow)
    assert flow.client().translate_offsets(flow.source.alias, group).get((remote, 1)) is None
    assert committed(flow.target, group, remote, 2) == {0: 400, 1: 0}

    # Once records of the empty partition are mirrored and read, it is translated like any other.
    produce(flow.source, topic, values("p1", 0, 30), partition=1)
    position = consume_and_commit(flow.source, group, topic, 1, 30)
    flow.wait_until_copied(topic)
    assert flow.wait_until_synced(group, topic, upstream=position, partition=1) == 30


def test_a_group_rewound_on_the_source_gets_a_lower_checkpoint_and_is_not_moved_back_on_the_target(
    flow: Flow,
) -> None:
    topic, group = flow.moved_group("rewind", values("r", 0, 800), consumed=800)
    assert committed(flow.target, group, flow.remote(topic)) == {0: 800}
    # The group is reset on A to re-process (its right): the checkpoint follows it back...
    commit(flow.source, group, {(topic, 0): 200})
    assert_eventually(
        lambda: _assert_equal(flow.checkpoint_upstream(group, flow.remote(topic), 0), 200), timeout=120
    )
    assert flow.client().translate_offsets(flow.source.alias, group)[(flow.remote(topic), 0)] == 200
    # ...but a group on B is never moved backwards by a sync: whoever runs there decides that.
    _prove_a_sync_round_ran_since(flow)
    assert committed(flow.target, group, flow.remote(topic)) == {0: 800}


def test_a_topic_added_to_a_synced_group_is_synced_too(flow: Flow) -> None:
    first, group = flow.moved_group("added-1", values("a", 0, 300), consumed=300)
    second = flow.name("added-2")
    create_topic(flow.source.bootstrap_servers, second)
    produce(flow.source, second, values("b", 0, 500))
    position = consume_and_commit(flow.source, group, second, 0, 420)
    flow.wait_until_copied(second)
    flow.wait_until_synced(group, second, upstream=position)
    assert committed(flow.target, group, flow.remote(first)) == {0: 300}
    assert committed(flow.target, group, flow.remote(second)) == {0: 420}


def test_records_that_do_not_decode_in_the_internal_topics_are_skipped_counted_and_translation_goes_on(
    flow: Flow,
) -> None:
    flow.moved_group("before-garbage", values("g", 0, 200), consumed=200)  # the topics exist and work
    alias = flow.source.alias
    garbage = {
        f"{alias}.checkpoints.internal": "mirror_checkpoint_records_skipped_total",
        f"mm2-offset-syncs.{alias}.internal": "mirror_checkpoint_records_skipped_total",
        f"{alias}.heartbeats": "mirror_heartbeat_records_skipped_total",
    }
    producer = Producer(flow.target.properties())
    for topic in garbage:
        producer.produce(topic, key=b"\x00not a record key", value=b"\xffnot a record value", partition=0)
    assert producer.flush(30) == 0

    for topic, metric in garbage.items():
        assert_eventually(lambda t=topic, m=metric: _assert_at_least(flow.metric(m, topic=t), 1), timeout=120)
    # Translation, checkpoints and group sync go on past the garbage, and so do readers of the topics.
    flow.assert_a_caught_up_group_re_reads_nothing("after-garbage", old=300, new=100)
    shown = run_mirror("heartbeats", "--cluster", flow.target.alias, "-c", str(flow.config), "--watch", "1")
    assert shown.returncode == 0, shown.stderr
    assert f"{alias}.heartbeats" in shown.stdout
    assert flow.run.process.poll() is None, flow.run.output()[-3000:]


def _prove_a_sync_round_ran_since(flow: Flow) -> None:
    """Return once a group-sync round started after this call: a group committed now is synced."""
    topic, group = flow.name(f"proof-{uuid.uuid4().hex[:4]}"), flow.name(f"proof-{uuid.uuid4().hex[:4]}")
    create_topic(flow.source.bootstrap_servers, topic)
    produce(flow.source, topic, values("p", 0, 5))
    position = consume_and_commit(flow.source, group, topic, 0, 5)
    flow.wait_until_copied(topic)
    flow.wait_until_synced(group, topic, upstream=position)


def _assert_equal(actual: object, expected: object) -> None:
    assert actual == expected, f"{actual} != {expected}"


def _assert_at_least(actual: float, expected: float) -> None:
    assert actual >= expected, f"{actual} < {expected}"
