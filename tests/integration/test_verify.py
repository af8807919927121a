"""`mirror verify` against real corruption of a copy: a record appended by hand to a remote topic,
a record the flow skipped, a record whose header changed; and a clean copy verifies clean."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer

from tests.helpers import assert_eventually, create_topic, run_mirror, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, replicate_until_caught_up, wait_until_caught_up, write_config
from tests.records import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PER_PARTITION = 300
# Recent: a broker's retention deletes segments whose records are older than a week.
EPOCH_MS = int(time.time() * 1000) - 3_600_000


def _produce(cluster: KafkaCluster, topic: str, partition: int, first: int, count: int) -> None:
    producer = Producer(cluster.properties())
    for i in range(first, first + count):
        producer.produce(
            topic,
            key=b"key-%d" % i,
            value=b"value-%d-%d" % (partition, i),
            headers=[("seq", b"%d" % i), ("empty", None)],
            partition=partition,
            timestamp=EPOCH_MS + i,
        )
    assert producer.flush(30) == 0


def _verify(config: Path, *topics: str) -> tuple[int, list[dict[str, object]], str]:
    args = [arg for topic in topics for arg in ("--topic", topic)]
    result = run_mirror("verify", str(config), "--json", *args)
    assert "Traceback" not in result.stderr, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    return result.returncode, rows, result.stderr


def _differing(rows: list[dict[str, object]]) -> dict[tuple[object, object], tuple[object, ...]]:
    return {
        (row["topic"], row["partition"]): (
            row["missing"],
            row["extra"],
            row["changed"],
            row["first_source_offset"],
            row["first_target_offset"],
        )
        for row in rows[:-1]
        if row["differs"]
    }


def test_verify_finds_an_extra_a_missing_and_a_changed_record_and_nothing_in_a_clean_copy(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    name = unique_name(request, "verify-")
    extra, missing, changed = f"{name}-extra", f"{name}-missing", f"{name}-changed"
    topics = [extra, missing, changed]
    for topic in topics:
        create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
        for partition in (0, 1):
            _produce(source_cluster, topic, partition, 0, PER_PARTITION)
    config = write_config(tmp_path, source_cluster, target_cluster, topics)
    replicate_until_caught_up(config, tmp_path / "first.log", source_cluster, target_cluster, topics)

    code, rows, stderr = _verify(config, *topics)
    assert code == 0, (rows, stderr)
    summary = rows[-1]
    assert (summary["partitions"], summary["records"], summary["differing_partitions"]) == (6, 1800, 0)
    assert summary["not_yet_copied"] == 0 and summary["unverified"] == 0

    # The flow is stopped. A record appended by hand to a remote topic is extra past its last copy.
    target = Producer(target_cluster.properties())
    target.produce(f"A.{extra}", key=b"intruder", value=b"by hand", partition=0)
    assert target.flush(30) == 0
    code, rows, stderr = _verify(config, *topics)
    assert code == 1, "\n".join([*map(json.dumps, rows), stderr])
    # Copies at 0..299, the last transaction's commit marker at 300, the intruder at 301.
    assert _differing(rows) == {(extra, 0): (0, 1, 0, None, PER_PARTITION + 1)}

    # More records on the source; the flow will skip record 300 of `missing`-0, and record 300 of
    # `changed`-1 lands on the target as a copy with one header changed, written by hand.
    for topic in topics:
        for partition in (0, 1):
            _produce(source_cluster, topic, partition, PER_PARTITION, 10)
    target.produce(
        f"A.{changed}", key=b"key-300", value=b"value-1-300", partition=1,
        headers=[("seq", b"tampered"), ("empty", None)], timestamp=EPOCH_MS + 300,
    )  # fmt: skip
    assert target.flush(30) == 0
    for topic, partition in ((missing, 0), (changed, 1)):
        moved = run_mirror(
            "offsets",
            "alter",
            str(config),
            "--topic",
            topic,
            "--partition",
            str(partition),
            "--to-offset",
            "301",
        )
        assert moved.returncode == 0, moved.stderr
    replicate_until_caught_up(config, tmp_path / "second.log", source_cluster, target_cluster, topics)

    code, rows, stderr = _verify(config, *topics)
    assert code == 1, "\n".join([*map(json.dumps, rows), stderr])
    assert _differing(rows) == {
        # The hand-written records now sit between copies (after the first run's last commit marker,
        # at 300): one extra, one changed, each named where the copies part; and one missing.
        (extra, 0): (0, 1, 0, PER_PARTITION, PER_PARTITION + 1),
        (missing, 0): (1, 0, 0, PER_PARTITION, PER_PARTITION + 1),
        (changed, 1): (0, 0, 1, PER_PARTITION, PER_PARTITION + 1),
    }
    summary = rows[-1]
    assert (summary["records"], summary["missing"], summary["extra"], summary["changed"]) == (1860, 1, 1, 1)

    # The test's own reading agrees with verify on what the target holds.
    copied = read_topic(target_cluster.bootstrap_servers, f"A.{changed}")[1]
    assert [dict(r.headers)["seq"] for r in copied[299:302]] == [b"299", b"tampered", b"301"]

    # The one-line form: one line per differing partition, then the summary.
    result = run_mirror("verify", str(config), "--topic", missing)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"DIFFERS {missing}-0 -> A.{missing}-0: 1 missing; first difference at source offset 300 "
        "(target offset 301)"
    ), lines
    assert lines[-1].startswith("flow A->B: 2 partitions, 620 records compared, 1 partitions differ")


def _metric(port: int, name: str, **labels: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_running_flow_verifies_itself_and_reports_a_record_written_into_its_copy(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Aliases of its own: the flow copies the source's heartbeats topic too, and `A.heartbeats` on the
    # shared target also holds what other tests' runs copied there (real MM2's included, which reads
    # read_uncommitted by default and so copies aborted records: verify would rightly report them).
    tag = uuid.uuid4().hex[:4]
    source = dataclasses.replace(source_cluster, alias=f"S{tag}")
    target = dataclasses.replace(target_cluster, alias=f"T{tag}")
    topic = unique_name(request, "verifying-")
    create_topic(source.bootstrap_servers, topic, partitions=2)
    _produce(source, topic, 0, 0, 200)
    config = write_config(tmp_path, source, target, [topic], verify_interval_seconds=2)
    port = int(yaml.safe_load(config.read_text())["metrics"]["port"])
    flow = f"{source.alias}->{target.alias}"
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source, target, [topic], run)
        # Clean first: a verification after the copy caught up compares every record, finds nothing.
        assert_eventually(lambda: _assert_verified(port, flow, at_least=200), timeout=60)
        assert _metric(port, "mirror_verify_mismatched_records", flow=flow, kind="extra") == 0
        intruder = Producer(target.properties())
        intruder.produce(f"{source.alias}.{topic}", value=b"not from the source", partition=0)
        assert intruder.flush(30) == 0
        _produce(source, topic, 0, 200, 50)  # copied after the intruder: it sits between copies
        assert_eventually(lambda: _assert_mismatch(port, flow, "extra"), timeout=60)
        assert (
            "differs from its copy: 0 missing, 1 extra, 0 changed, the first at source offset 200"
            in run.output()
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()


def _assert_verified(port: int, flow: str, *, at_least: int) -> None:
    records = _metric(port, "mirror_verify_records", flow=flow)
    assert records is not None and records >= at_least, records


def _assert_mismatch(port: int, flow: str, kind: str) -> None:
    assert _metric(port, "mirror_verify_mismatched_records", flow=flow, kind=kind) == 1
