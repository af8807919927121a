"""`mirror offsets`: a stopped flow's positions listed and moved (MM2's KIP-875), record by record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.groups import produce
from tests.helpers import create_topic, run_mirror, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, replicate_until_caught_up, wait_until_caught_up, write_config
from tests.records import Record, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _values(records: list[Record]) -> list[bytes | None]:
    return [record.value for record in records]


def _mirror_offsets(*args: str) -> tuple[int, list[str], list[str]]:
    result = run_mirror("offsets", *args)
    errors = [line for line in result.stderr.splitlines() if line.startswith("mirror: ")]
    assert "Traceback" not in result.stderr
    return result.returncode, result.stdout.splitlines(), errors


def test_positions_of_a_stopped_flow_move_back_for_a_recopy_and_forward_to_skip(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "offsets-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    for partition in (0, 1):
        produce(source_cluster, topic, [b"p%d-%d" % (partition, i) for i in range(500)], partition=partition)
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    replicate_until_caught_up(config, tmp_path / "first.log", source_cluster, target_cluster, [topic])

    code, lines, _ = _mirror_offsets("list", str(config), "--topic", topic, "--json")
    assert code == 0
    listed = {(row["topic"], row["partition"]): row for row in map(json.loads, lines)}
    assert {tp: (row["position"], row["end"], row["lag"]) for tp, row in listed.items()} == {
        (topic, 0): (500, 500, 0),
        (topic, 1): (500, 500, 0),
    }

    code, _, errors = _mirror_offsets("alter", str(config), "--topic", topic, "--to-offset", "9999")
    assert code == 2 and len(errors) == 2, errors  # one line per partition out of range
    assert "offset 9999 is outside the source's range 0..500" in errors[0]

    # Partition 0 copied again from 400; partition 1 skips what is written while the flow is stopped.
    code, lines, _ = _mirror_offsets(
        "alter", str(config), "--topic", topic, "--partition", "0", "--to-offset", "400"
    )
    assert code == 0 and f"{topic}-0: 500 -> 400" in lines
    produce(source_cluster, topic, [b"skipped-%d" % i for i in range(200)], partition=1)
    code, lines, _ = _mirror_offsets(
        "alter", str(config), "--topic", topic, "--partition", "1", "--to-latest"
    )
    assert code == 0 and f"{topic}-1: 500 -> 700" in lines

    # The next run copies from the altered positions; while it owns the flow the command refuses,
    # and with --force it fences the run, which exits.
    run = MirrorRun(config, tmp_path / "second.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)
        source = {
            p: _values(records) for p, records in read_topic(source_cluster.bootstrap_servers, topic).items()
        }
        target = {
            p: _values(records)
            for p, records in read_topic(target_cluster.bootstrap_servers, f"A.{topic}").items()
        }
        assert target[0] == source[0] + source[0][400:500]
        assert target[1] == source[1][:500]
        # Records it copies prove it owns the flow (it took the lease before its tasks opened).
        produce(source_cluster, topic, [b"late-%d" % i for i in range(50)], partition=1)
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)
        code, _, errors = _mirror_offsets("reset", str(config), "--topic", topic, "--partition", "0")
        assert code == 3 and len(errors) == 1 and "may still be running it" in errors[0], errors
        assert run.process.poll() is None, "refusing must leave the running flow alone"
        code, lines, _ = _mirror_offsets(
            "reset", str(config), "--topic", topic, "--partition", "0", "--force"
        )
        assert code == 0 and f"{topic}-0: 500 -> 0" in lines
        assert run.wait(timeout=120) == 3, run.output()[-3000:]
        assert "another mirror instance took over this flow" in run.output()
    finally:
        run.cleanup()
    replicate_until_caught_up(config, tmp_path / "third.log", source_cluster, target_cluster, [topic])
    target = {
        p: _values(records)
        for p, records in read_topic(target_cluster.bootstrap_servers, f"A.{topic}").items()
    }
    late = read_topic(source_cluster.bootstrap_servers, topic)[1][700:]
    assert target[0] == source[0] + source[0][400:500] + source[0]
    assert target[1] == source[1][:500] + _values(late)
