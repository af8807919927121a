"""Topics changing under a running flow: partitions added, a new topic, records deleted by
retention before they were copied, the remote topic deleted on the target."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.groups import produce
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import (
    MirrorRun,
    assert_alive,
    replicate_until_caught_up,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.records import Comparison, read_topic
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics
from tests.seeding import produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]


def test_partitions_added_and_a_new_topic_mid_stream_are_copied_whole(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    prefix = unique_name(request, "grow-")
    first, second = f"{prefix}-first", f"{prefix}-second"
    create_topic(source_cluster.bootstrap_servers, first, partitions=2)
    produce_mixed(source_cluster, first, 5000, 2, seed=21)
    traffic = Traffic(source_cluster, {first: 2}).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [f"{prefix}-.*"])
    run = MirrorRun(config, tmp_path / "run.log")
    admin = AdminClient(source_cluster.properties())
    try:
        wait_until_copying(source_cluster, target_cluster, [first], run, more=2000)
        admin.create_partitions([NewPartitions(first, 4)])[first].result(timeout=30)
        traffic.set_partitions(first, 4)
        create_topic(source_cluster.bootstrap_servers, second, partitions=3)
        traffic.set_partitions(second, 3)
        # Records keep arriving in all seven partitions while mirror finds and creates them.
        wait_until_copying(source_cluster, target_cluster, [first], run, more=2000)
        produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [first, second], run)
        exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [first, second])
    reliability(
        "fault",
        "Partitions added to a source topic (2 to 4) and a new matching topic (3 partitions), mid-stream",
        does=(
            "the topic refresh finds the new partitions and topic, grows and creates the remote topics and "
            "hands the partitions to the copy tasks"
        ),
        comparison=comparison,
        shown=f"remote topics grew to 4 and 3 partitions; exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == 5000 + produced


FIRST = [b"first-%d" % i for i in range(100)]


@pytest.fixture(scope="module")
def truncation_topics(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """For each on_source_truncation policy a one-partition topic holding FIRST, all copied by one
    run that then stopped: the policy only matters to the next run, so the first is shared."""
    tag = uuid.uuid4().hex[:6]
    topics = {policy: f"trunc-{policy}-{tag}" for policy in ("continue", "fail")}
    for topic in topics.values():
        create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
        produce(source_cluster, topic, FIRST)
    directory = tmp_path_factory.mktemp("truncation")
    every = list(topics.values())
    config = write_config(directory, source_cluster, target_cluster, every)
    replicate_until_caught_up(config, directory / "first.log", source_cluster, target_cluster, every)
    return topics


@pytest.mark.parametrize("policy", ["continue", "fail"])
def test_records_deleted_on_the_source_before_copying_are_reported(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    truncation_topics: dict[str, str],
    reliability: Record,
    policy: str,
) -> None:
    topic = truncation_topics[policy]
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], on_source_truncation=policy)

    # While mirror is down, 100 more records arrive and retention deletes 40 of them uncopied.
    produce(source_cluster, topic, [b"second-%d" % i for i in range(100)])
    admin = AdminClient(source_cluster.properties())
    future = admin.delete_records([TopicPartition(topic, 0, 140)])
    next(iter(future.values())).result(timeout=30)

    second = MirrorRun(config, tmp_path / "second.log")
    try:
        if policy == "fail":
            exit_code = second.wait(timeout=240)
        else:
            wait_until_caught_up(source_cluster, target_cluster, [topic], second)
            exit_code = second.stop()
    finally:
        second.cleanup()
    copied = [r.value for r in read_topic(target_cluster.bootstrap_servers, f"A.{topic}")[0]]
    expected: list[bytes | None] = (
        [*FIRST] if policy == "fail" else [*FIRST, *(b"second-%d" % i for i in range(40, 100))]
    )
    said = [line for line in second.output().splitlines() if "were deleted on the source" in line]
    reliability(
        "fault",
        f"Source retention deleted 40 records before they were copied (on_source_truncation: {policy})",
        # The 40 are gone from the source too; what is checked is that everything else arrived once.
        does=(
            "the gap is found when the position falls off the log; it is reported with the lost offsets, "
            "and the flow goes on or stops as on_source_truncation says"
        ),
        comparison=_compare_values(expected, copied),
        shown=(said[0].split(" ERROR ")[-1][:240] if said else "nothing") + f"; exit {exit_code}",
    )
    assert said, second.output()[-3000:]
    assert "40 records (offsets 100..139) were deleted on the source" in said[0]
    assert copied == expected
    if policy == "fail":
        assert exit_code == 1, second.output()[-3000:]
        errors = second.errors()
        assert len(errors) == 1, second.output()[-3000:]
        assert "on_source_truncation: continue" in errors[0]
        assert "Traceback" not in second.output()
    else:
        assert exit_code == 0, second.output()[-3000:]


@pytest.mark.parametrize("policy", ["recopy", "fail"])
def test_a_remote_topic_deleted_while_running_is_copied_again_or_reported(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
    policy: str,
) -> None:
    topic = unique_name(request, "gone-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 5000, 2, seed=22)
    traffic = Traffic(source_cluster, {topic: 2}).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], on_remote_topic_deleted=policy)
    run = MirrorRun(config, tmp_path / "run.log")
    target_admin = AdminClient(target_cluster.properties())
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run, more=5000)
        target_admin.delete_topics([f"A.{topic}"])[f"A.{topic}"].result(timeout=30)
        if policy == "fail":
            exit_code = run.wait(timeout=240)
            produced = traffic.stop()
        else:
            assert_eventually(lambda: _assert_recopy_reported(run), timeout=180, interval=1)
            produced = traffic.stop()
            wait_until_caught_up(source_cluster, target_cluster, [topic], run)
            exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    if policy == "fail":
        errors = run.errors()
        reliability(
            "fault",
            "Remote topic deleted on the target while running (on_remote_topic_deleted: fail)",
            does="the flow stops with one line naming the partition and the setting that would copy it again",
            shown=f"{errors[0] if errors else 'nothing'}; exit {exit_code}",
        )
        assert exit_code == 1, run.output()[-3000:]
        assert len(errors) == 1, run.output()[-3000:]
        assert "the remote topic was deleted and re-created" in errors[0]
        assert "on_remote_topic_deleted: recopy" in errors[0]
        assert "Traceback" not in run.output()
        return
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    said = _recopy_lines(run)
    reliability(
        "fault",
        "Remote topic deleted on the target while running (on_remote_topic_deleted: recopy)",
        does=(
            "the empty remote topic with no position is found and the partition is copied into it again "
            "from the source's first offset"
        ),
        comparison=comparison,
        shown=f"{said[0][:240]}; exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == 5000 + produced


def _recopy_lines(run: MirrorRun) -> list[str]:
    return [line for line in run.output().splitlines() if "had been deleted and re-created" in line]


def _assert_recopy_reported(run: MirrorRun) -> None:
    assert_alive(run)
    assert _recopy_lines(run), "no re-copy reported yet"


def _compare_values(expected: list[bytes | None], actual: list[bytes | None]) -> Comparison:
    missing, extra = Counter(expected) - Counter(actual), Counter(actual) - Counter(expected)
    reordered = int(not missing and not extra and actual != expected)
    return Comparison(len(expected), sum(missing.values()), sum(extra.values()), reordered)
