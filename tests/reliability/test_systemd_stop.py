"""docker/systemd/mirror.service stops mirror the way mirror expects.

No systemd runs as PID 1 here, so the test does what systemd does for this unit's settings: the
unit's KillSignal to the main process only (KillMode=mixed), up to TimeoutStopSec for it to exit,
then SIGKILL to every process of the service still alive. mirror must have exited with a success
status before that, and a later run finds nothing lost and nothing copied twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, replicate_until_caught_up, wait_until_copying, write_config
from tests.reliability.conftest import Record
from tests.reliability.traffic import Traffic, compare_topics, process_alive, process_tree
from tests.seeding import produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.reliability]

UNIT = Path(__file__).resolve().parents[2] / "docker" / "systemd" / "mirror.service"
BACKLOG = 5000


def _unit_settings() -> dict[str, str]:
    settings = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


def test_the_units_stop_ends_mirror_cleanly_before_its_timeout_and_loses_nothing(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    reliability: Record,
) -> None:
    unit = _unit_settings()
    assert unit["KillMode"] == "mixed", "this test runs KillMode=mixed's stop"
    kill_signal = signal.Signals[unit["KillSignal"]]
    timeout = float(unit["TimeoutStopSec"])
    success = {int(code) for code in unit.get("SuccessExitStatus", "").split()} | {0}

    topic = unique_name(request, "systemd-stop-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=8, config={"retention.ms": "-1"})
    produce_mixed(source_cluster, topic, BACKLOG, 8, seed=16)
    traffic = Traffic(source_cluster, {topic: 8}, per_second=1000).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run, more=3000)
        service = process_tree(run.process.pid)  # the service's control group
        os.kill(run.process.pid, kill_signal)  # KillMode=mixed: the main process only
        signalled = time.monotonic()
        try:
            exit_code = run.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stuck = run.output()[-3000:]
            pytest.fail(f"mirror outlived TimeoutStopSec={timeout:g}; systemd would SIGKILL it: {stuck}")
        stop_seconds = time.monotonic() - signalled
        leftovers = [pid for pid in service if process_alive(pid)]
        for pid in leftovers:  # what systemd SIGKILLs once the main process is gone
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        produced = traffic.stop()
        replicate_until_caught_up(config, tmp_path / "resumed.log", source_cluster, target_cluster, [topic])
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    reliability(
        "fault",
        "systemd's stop of docker/systemd/mirror.service (KillMode=mixed) while copying",
        does=(
            "SIGTERM reaches the driver, which ends the copy tasks after their commit and exits 0 before "
            "TimeoutStopSec"
        ),
        comparison=comparison,
        shown=f"exit {exit_code} after {stop_seconds:.1f} s, {len(leftovers)} processes left for SIGKILL",
    )
    assert exit_code in success, run.output()[-3000:]
    assert "Traceback" not in run.output(), run.output()[-3000:]
    assert "INFO mirror: stopped" in run.output(), run.output()[-3000:]
    assert comparison.exact, comparison
    assert comparison.checked == BACKLOG + produced
