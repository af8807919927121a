"""Processes dying or doubling up: SIGKILL of Spark's Python workers, and two instances of one flow.
Records keep arriving throughout; afterwards the target must equal the source. SIGKILLs of
`mirror run` itself, at random moments with hundreds of partitions: test_copy_tasks.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import (
    MirrorRun,
    assert_alive,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics, python_workers
from tests.seeding import produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]


def test_sigkill_of_python_workers_mid_transaction_loses_and_duplicates_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    topic = unique_name(request, "worker-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    produce_mixed(source_cluster, topic, 60_000, 4, seed=12, aborted_every=6)
    traffic = Traffic(source_cluster, {topic: 4}).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    run = MirrorRun(config, tmp_path / "run.log")
    killed = []
    workers = _Workers(run)
    try:
        for _ in range(3):
            wait_until_copying(source_cluster, target_cluster, [topic], run, more=1000)
            # A worker burning CPU is copying a range: it holds an open transaction on the target.
            worker = assert_eventually(workers.busy, timeout=60, interval=0.1)
            os.kill(worker, signal.SIGKILL)
            killed.append(worker)
        produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [topic], run)
        exit_code = run.stop()
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    notices = [line for line in run.output().splitlines() if "restarting" in line or "lost" in line.lower()]
    reliability(
        "fault",
        f"SIGKILL of a Spark Python worker copying a range, {len(killed)} times",
        does=(
            "Spark runs the task again; its producer, on the same transactional id, aborts the dead one's "
            "open transaction and it resumes from the committed positions"
        ),
        comparison=comparison,
        shown=(notices[0][:200] if notices else "nothing: Spark retried the task") + f"; exit {exit_code}",
    )
    assert exit_code == 0, run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == 60_000 + produced


def test_two_instances_of_one_flow_fence_each_other_and_nothing_is_copied_twice(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    topic = unique_name(request, "twice-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 5000, 2, seed=8)
    traffic = Traffic(source_cluster, {topic: 2}).start()
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    first_config = write_config(first_dir, source_cluster, target_cluster, [topic])
    first = MirrorRun(first_config, tmp_path / "first.log")
    second: MirrorRun | None = None
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], first, more=2000)
        # The second instance starts while the first is copying, as a botched failover would.
        second = MirrorRun(
            write_config(second_dir, source_cluster, target_cluster, [topic]), tmp_path / "second.log"
        )
        assert first.wait(timeout=120) == 3, first.output()[-3000:]
        # One line ends the run (the copy tasks' own lines before it say they stopped, and why).
        lines = [line for line in first.errors() if "another mirror instance took over" in line]
        assert lines and lines[0].startswith("mirror: flow A->B:"), first.output()[-3000:]
        traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [topic], second)
        exit_code = second.stop()
    finally:
        traffic.stop()
        first.cleanup()
        if second is not None:
            second.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    reliability(
        "fault",
        "Two `mirror run` instances of the same flow (the older one is a zombie)",
        does=(
            "the later instance takes the flow over and fences the earlier one's producers; the earlier "
            "stops with one line and exit 3"
        ),
        comparison=comparison,
        shown=f"first instance, exit 3: {lines[0]}",
    )
    assert exit_code == 0, second.output()[-3000:]
    assert comparison.exact, comparison


class _Workers:
    """Spark's Python workers of one run, and which of them used CPU since the last look."""

    def __init__(self, run: MirrorRun) -> None:
        self._run = run
        self._ticks: dict[int, int] = {}

    def busy(self) -> int:
        assert_alive(self._run)
        now = {pid: _cpu_ticks(pid) for pid in python_workers(self._run.process.pid)}
        busy = [pid for pid, ticks in now.items() if ticks > self._ticks.get(pid, ticks)]
        self._ticks = now
        assert busy, f"no Python worker busy among {sorted(now)}"
        return busy[0]


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime
