"""`throttle_bytes_per_second`: a flow copies at the rate set, shared by its copy tasks, and says
so on /metrics. The rate is mirror's own: the bytes of its committed transactions over the times
its copy tasks logged their commits, not how long the test ran."""

from __future__ import annotations

import re
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import assert_eventually
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_copying, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 200_000  # bytes/s for the flow: 100,000 for each of its two tasks
RECORD = 1_000  # value bytes; no key, so a record copies exactly this many bytes
PARTITIONS, RECORDS = 20, 16_000  # 16 MB: 80 s of copying at RATE, more than the test reads
WARM_UP, WINDOW = 5.0, 60.0  # seconds of the copy's own time: skip the first burst, then a minute
_COMMITTED = re.compile(r"^committed (\d+) records of \d+ partitions")


def _fill(source: KafkaCluster, topic: str) -> None:
    admin = AdminClient(source.properties())
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=60)[topic].result(timeout=60)
    producer = Producer(source.properties(**{"linger.ms": "20"}))
    for n in range(RECORDS):
        producer.produce(topic, value=b"%0*d" % (RECORD, n), partition=n % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0


def _commits(run: MirrorRun) -> list[tuple[float, int, int]]:
    """(time, task, records) of every transaction the copy tasks logged committing."""
    commits = []
    for record in run.log_records():
        match = _COMMITTED.match(str(record.get("message", "")))
        if match and record.get("component") == "source":
            at = datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()
            commits.append((at, int(record["task"]), int(match.group(1))))
    return sorted(commits)


def _scrape(config: Path) -> str:
    port = yaml.safe_load(config.read_text())["metrics"]["port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def _sample(page: str, name: str) -> float:
    match = re.search(rf'^{name}\{{flow="A->B"\}} (\S+)$', page, re.MULTILINE)
    assert match, f"no {name} on /metrics"
    return float(match.group(1))


def test_a_throttled_flow_copies_at_the_rate_set_across_its_tasks_and_reports_the_wait(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = f"throttled-{uuid.uuid4().hex[:6]}"
    _fill(source_cluster, topic)
    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        [topic],
        tasks_max=2,
        throttle_bytes_per_second=RATE,
        logging={"mirror.source": "DEBUG"},
    )
    run = MirrorRun(config, tmp_path / "run.log", options=("--log-format", "json"))
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run, more=1, timeout=180)

        def measured() -> None:
            commits = _commits(run)
            assert commits and commits[-1][0] - commits[0][0] >= WARM_UP + WINDOW, (
                f"{len(commits)} commits so far"
            )

        assert_eventually(measured, timeout=180, interval=1)
        page = _scrape(config)
        run.stop()
    finally:
        run.cleanup()
    commits = _commits(run)
    start = commits[0][0] + WARM_UP
    window = [c for c in commits if start < c[0] <= start + WINDOW]
    copied = sum(records for _, _, records in window) * RECORD
    rate = copied / (window[-1][0] - start)
    print(f"{copied:,} bytes in {window[-1][0] - start:.1f} s: {rate:,.0f} bytes/s of {RATE:,}")  # noqa: T201
    assert {task for _, task, _ in window} == {0, 1}, "both tasks copied"
    assert RATE * 0.9 <= rate <= RATE * 1.1
    # The source still held records at the window's end: the throttle, not the source, set the pace.
    assert sum(records for at, _, records in commits if at <= window[-1][0]) < RECORDS
    assert _sample(page, "mirror_source_throttle_bytes_per_second") == RATE
    assert _sample(page, "mirror_source_throttle_wait_seconds_total") > 0
