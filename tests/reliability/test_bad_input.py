"""Bad input to `mirror run`: one line naming the problem and the fix, no traceback, the documented
exit code, and nothing written to the target.

Cases are fixtures with their expected lines (`# expect:`, one per line shown, " ... " between
fragments of a line), `# exit:` code and `# case:` title: tests/fixtures/bad_input (run against the real
brokers; @SOURCE@, @TARGET@ and other placeholders are filled in) and tests/fixtures/bad_configs
(the malformed configurations `mirror validate` also answers)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirror.local.ports import free_port
from tests.groups import produce
from tests.helpers import assert_eventually, create_topic, run_mirror, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, assert_alive, wait_until_caught_up, write_config
from tests.records import read_topic
from tests.reliability.conftest import Record
from tests.reliability.traffic import compare_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

FIXTURES = Path(__file__).parent.parent / "fixtures"
LIVE = sorted((FIXTURES / "bad_input").glob("*.yaml"))
STATIC = sorted((FIXTURES / "bad_configs").glob("*.yaml"))
CASES = [*LIVE, *STATIC]


def _header(path: Path, key: str) -> list[str]:
    prefix = f"# {key}:"
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.removeprefix(prefix).strip() for line in lines if line.startswith(prefix)]


@pytest.fixture(scope="module")
def not_kafka() -> Iterator[str]:
    """A loopback port that answers every connection like a web server: something, but not Kafka."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(4096)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_there_are_at_least_twenty_bad_input_cases() -> None:
    assert len(LIVE) + len(STATIC) >= 20
    assert all(_header(path, "expect") for path in CASES)


@pytest.mark.parametrize(
    "fixture", [*LIVE, *STATIC], ids=[f"{p.parent.name}/{p.stem}" for p in [*LIVE, *STATIC]]
)
def test_bad_input_gets_one_line_naming_the_fix_and_writes_nothing(
    fixture: Path,
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    not_kafka: str,
    reliability: Record,
) -> None:
    (tmp_path / "a-file").write_text("not a directory", encoding="utf-8")
    values = {
        "@SOURCE@": source_cluster.bootstrap_servers,
        "@TARGET@": target_cluster.bootstrap_servers,
        "@CLOSED_PORT@": str(free_port()),
        "@NOT_KAFKA@": not_kafka,
        "@STATE@": str(tmp_path / "state"),
        "@UNWRITABLE@": str(tmp_path / "a-file" / "state"),
    }
    text = fixture.read_text(encoding="utf-8")
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    config = tmp_path / fixture.name
    config.write_text(text, encoding="utf-8")
    expected = _header(config, "expect")
    wanted_exit = int((_header(config, "exit") or ["2"])[0])
    before = _topics(target_cluster)
    ends_before = _ends(target_cluster)

    result = run_mirror("run", str(config), timeout=120)

    errors = [line for line in result.stderr.splitlines() if line.startswith("mirror: ")]
    case = (_header(fixture, "case") or [fixture.stem.split("-", 1)[1].replace("-", " ")])[0]
    reliability("bad input", case, shown=" / ".join(errors) or "nothing", exit_code=result.returncode)
    assert result.returncode == wanted_exit, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    assert len(errors) == len(expected), result.stderr[-3000:]
    for line, wanted in zip(errors, expected, strict=True):
        for fragment in wanted.split(" ... "):  # one output line; " ... " skips what varies
            assert fragment in line, f"expected {fragment!r} in {line!r}"
    assert _topics(target_cluster) == before, "a rejected run created topics on the target"
    assert _records_since(target_cluster, ends_before) == [], "a rejected run wrote records on the target"


def test_a_topic_filter_that_matches_nothing_is_a_warning_and_the_run_goes_on(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    missing = unique_name(request, "no-such-topic-")
    run = MirrorRun(write_config(tmp_path, source_cluster, target_cluster, [missing]), tmp_path / "run.log")
    try:
        line = assert_eventually(lambda: _warning(run), timeout=120, interval=0.5)
        # It is not fatal: the topic may be created later, and is then copied.
        create_topic(source_cluster.bootstrap_servers, missing, partitions=1)
        assert_eventually(lambda: _assert_exists(target_cluster, f"A.{missing}"), timeout=60, interval=0.5)
        exit_code = run.stop()
    finally:
        run.cleanup()
    case = "topic filter matching no topic (a warning; the run goes on)"
    reliability("bad input", case, shown=line, exit_code=exit_code)
    assert exit_code == 0, run.output()[-3000:]
    assert f"no topic on A matches topics ['{missing}']" in line
    assert "Traceback" not in run.output()


def _warning(run: MirrorRun) -> str:
    assert_alive(run)
    lines = [line for line in run.output().splitlines() if "warning: no topic on A matches" in line]
    assert lines, "no warning yet"
    return lines[0]


def _assert_exists(cluster: KafkaCluster, topic: str) -> None:
    assert topic in _topics(cluster)


def _topics(cluster: KafkaCluster) -> set[str]:
    return set(AdminClient(cluster.properties()).list_topics(timeout=30).topics)


def _ends(cluster: KafkaCluster) -> dict[tuple[str, int], int]:
    """The end offset (read_committed) of every partition of every topic (Kafka's own `__` topics
    aside), in one ListOffsets request per leader: the cluster holds hundreds of partitions."""
    admin = AdminClient(cluster.properties())
    metadata = admin.list_topics(timeout=30)
    futures = admin.list_offsets(
        {
            TopicPartition(topic, partition): OffsetSpec.latest()
            for topic, described in metadata.topics.items()
            if not topic.startswith("__")
            for partition in described.partitions
        },
        isolation_level=IsolationLevel.READ_COMMITTED,
        request_timeout=30,
    )
    return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}


def _records_since(cluster: KafkaCluster, before: dict[tuple[str, int], int]) -> list[str]:
    """Records (committed or not) written after `before` was taken, as "topic-partition@offset".

    An end that moved only by transaction markers is not a write: an earlier test's killed run
    leaves transactions open, and the coordinator aborts them later, marking their partitions.
    """
    moved = {tp: end for tp, end in _ends(cluster).items() if tp in before and end > before[tp]}
    if not moved:
        return []
    reader = Consumer(
        cluster.properties(**{"group.id": "bad-input-records", "isolation.level": "read_uncommitted"})
    )
    found: list[str] = []
    try:
        reader.assign([TopicPartition(t, p, before[(t, p)]) for t, p in moved])
        pending = set(moved)
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for message in reader.consume(500, timeout=0.5):
                if message.error() is None:
                    found.append(f"{message.topic()}-{message.partition()}@{message.offset()}")
            for tp in reader.position([TopicPartition(t, p) for t, p in pending]):
                if tp.offset >= moved[(tp.topic, tp.partition)]:
                    pending.discard((tp.topic, tp.partition))
        assert not pending, f"could not read {sorted(pending)} to their ends"
    finally:
        reader.close()
    return found


def _run_to_exit(config: Path, log: Path) -> tuple[MirrorRun, int]:
    run = MirrorRun(config, log)
    try:
        return run, run.wait(timeout=240)
    finally:
        run.cleanup()


def test_a_record_larger_than_the_target_allows_stops_the_flow_with_one_line(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    topic = unique_name(request, "big-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    # The remote topic exists already and accepts only small records.
    create_topic(
        target_cluster.bootstrap_servers, f"A.{topic}", partitions=1, config={"max.message.bytes": "2000"}
    )
    produce(source_cluster, topic, [b"small", b"x" * 20_000])

    config = write_config(tmp_path, source_cluster, target_cluster, [topic], sync_topic_configs=False)
    run, exit_code = _run_to_exit(config, tmp_path / "run.log")

    errors = run.errors()
    reliability(
        "bad input", "record larger than the target allows", shown=" / ".join(errors), exit_code=exit_code
    )
    assert exit_code == 1, run.output()[-3000:]
    assert len(errors) == 1, run.output()[-3000:]
    assert (
        f"flow A->B: {topic}-0: the record at offset 1 (20,000 bytes) is larger than B accepts" in errors[0]
    )
    assert "raise max.message.bytes" in errors[0]
    assert "Traceback" not in run.output()
    # Nothing of the failed range became visible: not even the small record before it.
    assert read_topic(target_cluster.bootstrap_servers, f"A.{topic}") == {0: []}


@pytest.mark.parametrize("sync_configs", [True, False])
def test_a_remote_topic_created_by_hand_with_another_cleanup_policy(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
    sync_configs: bool,
) -> None:
    # Records without keys, and a remote topic someone created compacted (which refuses them).
    topic = unique_name(request, "policy-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    create_topic(
        target_cluster.bootstrap_servers, f"A.{topic}", partitions=2, config={"cleanup.policy": "compact"}
    )
    for partition in (0, 1):
        produce(source_cluster, topic, [b"no-key-%d" % i for i in range(25)], partition=partition)
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], sync_topic_configs=sync_configs)

    if sync_configs:
        # The default: the remote topic's configs follow the source's before the first copy.
        run = MirrorRun(config, tmp_path / "run.log")
        try:
            wait_until_caught_up(source_cluster, target_cluster, [topic], run)
            exit_code = run.stop()
        finally:
            run.cleanup()
        comparison = compare_topics(source_cluster, target_cluster, [topic])
        reliability(
            "bad input",
            "remote topic exists with another cleanup policy (compact; configs synced, the default)",
            shown=f"its configs were synced before the first copy; {comparison.checked} records copied, "
            f"{comparison.lost} lost, {comparison.duplicated} duplicated",
            exit_code=exit_code,
        )
        assert exit_code == 0, run.output()[-3000:]
        assert comparison.exact and comparison.checked == 50, comparison
        return
    run, exit_code = _run_to_exit(config, tmp_path / "run.log")
    errors = run.errors()
    reliability(
        "bad input",
        "remote topic exists with another cleanup policy (compact; sync_topic_configs: false)",
        shown=" / ".join(errors),
        exit_code=exit_code,
    )
    assert exit_code == 1, run.output()[-3000:]
    assert len(errors) == 1, run.output()[-3000:]
    assert f"B refused the record at offset 0 for A.{topic} as invalid" in errors[0]
    assert "cleanup.policy" in errors[0]
    assert "Traceback" not in run.output()
    assert all(not records for records in read_topic(target_cluster.bootstrap_servers, f"A.{topic}").values())


def test_a_remote_topic_with_fewer_partitions_is_grown_and_copied_whole(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    topic = unique_name(request, "fewer-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    create_topic(target_cluster.bootstrap_servers, f"A.{topic}", partitions=2)
    producer = Producer(source_cluster.properties())
    for i in range(400):
        producer.produce(topic, key=b"%d" % i, value=b"v-%d" % i, partition=i % 4)
    assert producer.flush(30) == 0
    run = MirrorRun(write_config(tmp_path, source_cluster, target_cluster, [topic]), tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)
        exit_code = run.stop()
    finally:
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    grown = [line for line in run.output().splitlines() if f"A.{topic} on B now has 4 partitions" in line]
    reliability(
        "bad input",
        "remote topic exists with fewer partitions (2 of 4)",
        shown=(grown[0].split(": ", 1)[-1] if grown else "nothing")
        + f"; {comparison.checked} records copied, "
        f"{comparison.lost} lost, {comparison.duplicated} duplicated",
        exit_code=exit_code,
    )
    assert exit_code == 0, run.output()[-3000:]
    assert grown, run.output()[-3000:]
    assert comparison.exact and comparison.checked == 400, comparison
