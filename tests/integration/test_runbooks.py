"""The runbooks in docs/runbooks/, run as written against two local clusters of their own while
producers and a consumer group work as the runbooks say; each test checks what its runbook promises."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror.local.broker import free_port
from tests.groups import committed
from tests.helpers import assert_eventually, run_mirror
from tests.kafka_backends import KafkaCluster, local_clusters
from tests.mirror_process import MirrorRun, write_config
from tests.records import read_topic
from tests.runbooks import GroupReader, SequencedProducer, SharedCounter, run_runbook, stop_background

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks"
PARTITIONS = 6


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    # A pair of their own: a migration plan looks at every topic and group of the clusters.
    with local_clusters(("A", "B"), tmp_path_factory.mktemp("runbook-clusters")) as (a, b):
        yield a, b


def _environment(a: KafkaCluster, b: KafkaCluster, work: Path) -> dict[str, str]:
    return {
        "A_BOOTSTRAP": a.bootstrap_servers,
        "B_BOOTSTRAP": b.bootstrap_servers,
        "WORK": str(work),
        # Test-sized settings, through the environment overrides every mm2.yaml takes.
        "MIRROR_SPARK__MASTER": "local[2]",
        "MIRROR_SPARK__CHECKPOINT_DIR": str(work / "state"),
        "MIRROR_METRICS__PORT": str(free_port()),
    }


def _create(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    admin = AdminClient(cluster.properties())
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def _ends(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    reader = Consumer(cluster.properties(**{"group.id": "runbook-ends", "isolation.level": "read_committed"}))
    try:
        return {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        reader.close()


def test_migrate_a_to_b_loses_nothing_rereads_nothing_and_keeps_order(
    clusters: tuple[KafkaCluster, KafkaCluster], tmp_path: Path
) -> None:
    a, b = clusters
    _create(a, "orders", PARTITIONS)
    numbers = SharedCounter()
    producer = SequencedProducer(numbers, "orders", PARTITIONS)
    reader = GroupReader("billing", "orders")
    producer.start(a)
    reader.start(a)
    hooks = {
        "stop-consumers A": reader.stop,
        "start-consumers B": lambda: reader.start(b),
        "stop-producers A": producer.stop,
        "start-producers B": lambda: producer.start(b),
    }
    try:
        run_runbook(
            RUNBOOKS / "migrate-a-to-b.md", _environment(a, b, tmp_path), hooks, tmp_path / "runbook.log"
        )
        # The producers now write to B, the group reads there; let both go on for a moment.
        written_on_a = len(producer.acked)
        assert_eventually(lambda: _wrote_more(producer, written_on_a + 300), timeout=60)
        producer.stop()
        ends = _ends(b, "orders")
        assert_eventually(lambda: _committed_to(b, "billing", "orders", ends), timeout=60, interval=0.5)
        reader.stop()
    finally:
        stop_background(tmp_path)

    produced = sorted(producer.acked)
    consumed = sorted(n for _, _, n in reader.log)
    assert written_on_a > 0 and len(produced) > written_on_a, "records were written on both clusters"
    lost = sorted(set(produced) - set(consumed))
    assert lost == [], f"{len(lost)} records never reached the group: {lost[:10]}"
    assert reader.read_twice() == [], "a caught-up group read records again after the move"
    assert reader.out_of_order() == [], "a partition's records arrived out of order across the move"
    assert {alias for alias, _, _ in reader.log} == {"A", "B"}, "the group read on A, then on B"
    # Everything A held is on B, in the same partition and order, and B's group ends at B's ends.
    source = read_topic(a.bootstrap_servers, "orders")
    target = read_topic(b.bootstrap_servers, "orders")
    for partition in range(PARTITIONS):
        assert target[partition][: len(source[partition])] == source[partition], f"partition {partition}"
    assert committed(b, "billing", "orders", PARTITIONS) == _ends(b, "orders")


def _cutover(config: Path, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_mirror("migrate", "cutover", str(config), "--state-dir", str(state), *extra)


def _wrote_more(producer: SequencedProducer, than: int) -> None:
    assert len(producer.acked) > than


def _read_at_least(reader: GroupReader, records: int) -> None:
    assert len({n for _, _, n in reader.log}) >= records


def _committed_to(cluster: KafkaCluster, group: str, topic: str, ends: dict[int, int]) -> None:
    assert committed(cluster, group, topic, PARTITIONS) == ends


def _step_status(path: Path, step: str) -> str | None:
    if not path.exists():
        return None
    return str(json.loads(path.read_text(encoding="utf-8"))["steps"][step]["status"])


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("mirror: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_a_cutover_checks_its_fence_resumes_after_sigkill_and_moves_the_group_exactly(
    clusters: tuple[KafkaCluster, KafkaCluster], tmp_path: Path
) -> None:
    a, b = clusters
    _create(a, "payments", PARTITIONS)
    numbers = SharedCounter()
    producer = SequencedProducer(numbers, "payments", PARTITIONS)
    reader = GroupReader("ledger", "payments")
    producer.start(a)
    reader.start(a)
    config = write_config(
        tmp_path, a, b, ["payments"], replication_policy="identity", groups=["ledger"], name="cutover.yaml"
    )
    state = tmp_path / "migrate"
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        dry = _cutover(config, state, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "fence: would refuse: name the producers" in dry.stdout and not state.exists()

        # No fence named: the lag gate passes, then the cutover stops at the fence, exit 2.
        refused = _cutover(config, state)
        assert refused.returncode == 2 and "--producers-stopped" in _one_line_error(refused)

        # The operator says the producers stopped, but one still writes: the fence check catches it.
        lied = _cutover(config, state, "--producers-stopped", "--fence-seconds", "2", "--fence-timeout", "4")
        assert lied.returncode == 1, lied.stderr
        assert "verify_fence: payments-" in _one_line_error(lied) and "something still writes" in lied.stderr

        reader.stop()  # first: the group stops behind, so its translation has work to do
        assert_eventually(lambda: _wrote_more(producer, len(reader.log) + 100), timeout=60)
        producer.stop()
        written, read_on_a = len(producer.acked), len(reader.log)
        # Killed mid-step (the fence check's quiet window), it resumes at that step.
        first = subprocess.Popen(
            [sys.executable, "-m", "mirror", "migrate", "cutover", str(config), "--state-dir", str(state),
             "--producers-stopped", "--fence-seconds", "5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

        def in_verify_fence() -> None:
            assert first.poll() is None, "the cutover ended before verify_fence"
            assert _step_status(state / "A_to_B.json", "verify_fence") == "running"

        assert_eventually(in_verify_fence, timeout=60)
        second = _cutover(config, state, "--producers-stopped")
        assert second.returncode == 3 and "holds" in _one_line_error(second)  # one cutover at a time
        first.kill()
        first.wait(30)

        resumed = _cutover(config, state, "--producers-stopped", "--fence-seconds", "2")
        assert resumed.returncode == 0, resumed.stderr
        assert "lag_gate: done before" in resumed.stdout and "fence: done before" in resumed.stdout
        assert "verify: " in resumed.stdout and "records in 6 partitions equal their source" in resumed.stdout
        assert "ledger" in resumed.stdout.split("groups moved:")[1].splitlines()[0]
        status = run_mirror("migrate", "status", str(config), "--state-dir", str(state))
        assert status.returncode == 0 and status.stdout.count(" done ") == 7, status.stdout
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    # The group resumes on B right after what it committed on A: nothing lost, nothing read twice.
    reader.start(b)
    assert_eventually(lambda: _read_at_least(reader, written), timeout=60)
    reader.stop()
    assert read_on_a < written, "the group was behind when it stopped: the translation had work to do"
    assert sorted(n for _, _, n in reader.log) == sorted(producer.acked)
    assert reader.read_twice() == [] and reader.out_of_order() == []


def test_failover_and_failback_lose_nothing_acknowledged_and_report_what_was_read_twice(
    clusters: tuple[KafkaCluster, KafkaCluster], tmp_path: Path
) -> None:
    a, b = clusters
    topic = "transfers"
    for cluster in (a, b):  # B's own transfers takes the producers after the failover
        _create(cluster, topic, PARTITIONS)
    numbers = SharedCounter()
    producer = SequencedProducer(numbers, topic, PARTITIONS)
    reader = GroupReader("fraud", topic)
    producer.start(a)
    reader.start(a)
    assert a.broker is not None
    broker = a.broker
    phases: dict[str, int] = {}

    def fail_a() -> None:
        # The group and the producer busy: a few hundred records more before A dies.
        before = len(producer.acked)
        assert_eventually(lambda: _wrote_more(producer, before + 400), timeout=60)
        broker.kill()
        producer.crash()
        reader.crash()
        phases["read on A before the failure"] = len(reader.log)
        phases["acknowledged by A before the failure"] = len(producer.acked)

    def restart_a() -> None:
        broker.start()
        broker.wait_until_ready()

    hooks = {
        "fail-cluster A": fail_a,
        "start-consumers B": lambda: reader.start(b, rf"^(A\.)?{topic}$"),
        "start-producers B": lambda: producer.start(b),
        "restart-cluster A": restart_a,
        "stop-consumers B": reader.stop,
        "stop-producers B": producer.stop,
        "start-consumers A": lambda: reader.start(a, rf"^(B\.)?{topic}$"),
        "start-producers A": lambda: producer.start(a),
    }
    try:
        outputs = run_runbook(
            RUNBOOKS / "failover-and-failback.md",
            _environment(a, b, tmp_path),
            hooks,
            tmp_path / "runbook.log",
        )
        back_on_a = len(producer.acked)
        assert_eventually(lambda: _wrote_more(producer, back_on_a + 300), timeout=60)
        producer.stop()
        assert_eventually(lambda: _read_at_least(reader, len(set(producer.acked))), timeout=60, interval=0.5)
        reader.stop()
    finally:
        stop_background(tmp_path)
        if broker.pid is None:  # the test failed while A was down: the next test needs it
            restart_a()

    acknowledged = set(producer.acked)
    consumed = [n for _, _, n in reader.log]
    lost = sorted(acknowledged - set(consumed))
    in_flight = next(line for out in outputs for line in out.splitlines() if "not yet copied" in line)
    measured = (
        f"failover and failback: {phases}; {len(acknowledged)} acknowledged, {len(consumed)} read, "
        f"{len(consumed) - len(set(consumed))} read twice; A->B verify after A came back: {in_flight}\n"
    )
    (tmp_path / "measured.txt").write_text(measured, encoding="utf-8")
    sys.stdout.write(measured)
    assert lost == [], f"{len(lost)} acknowledged records never reached the group: {lost[:10]}"
