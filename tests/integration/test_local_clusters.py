"""`mirror local up|status|down`: real brokers started, found again, stopped, cleaned up on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror.config import load_config
from tests.helpers import assert_eventually, create_topic, run_mirror

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def free_base_port() -> int:
    """A base port such that base, base+1, base+10000 and base+10001 are all free."""
    for base in range(20100, 45000, 137):
        ports = (base, base + 1, base + 10000, base + 10001)
        if all(_free(port) for port in ports):
            return base
    raise AssertionError("no free port block on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def broker_pids(directory: Path) -> list[int]:
    marker = f"-Dmirror.local.cluster={directory.resolve()}"
    result = subprocess.run(["pgrep", "-f", "--", marker], capture_output=True, text=True, check=False)
    return [int(pid) for pid in result.stdout.split()]


def test_up_status_down_manage_two_real_clusters(tmp_path: Path) -> None:
    base = free_base_port()
    up = run_mirror("local", "up", "--dir", "clusters", "--base-port", str(base), cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        assert f"A  127.0.0.1:{base}" in up.stdout
        assert f"B  127.0.0.1:{base + 10000}" in up.stdout
        pids = sorted(broker_pids(tmp_path / "clusters" / "A") + broker_pids(tmp_path / "clusters" / "B"))
        assert len(pids) == 2

        config = load_config(tmp_path / "mm2.local.yaml")
        assert config.clusters["A"].bootstrap_servers == f"127.0.0.1:{base}"
        assert config.flows["A->B"].enabled

        again = run_mirror("local", "up", "--dir", "clusters", "--base-port", str(base), cwd=tmp_path)
        assert again.returncode == 0
        assert "already running" in again.stderr
        assert (
            sorted(broker_pids(tmp_path / "clusters" / "A") + broker_pids(tmp_path / "clusters" / "B"))
            == pids
        )

        status = run_mirror("local", "status", "--dir", "clusters", cwd=tmp_path)
        assert status.returncode == 0
        assert status.stdout.count("running") == 2

        # A real broker: a transaction commits and a read_committed consumer sees it.
        bootstrap = f"127.0.0.1:{base}"
        create_topic(bootstrap, "smoke")
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "smoke"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("smoke", b"committed", partition=0)
        producer.commit_transaction(30)
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "smoke", "isolation.level": "read_committed"}
        )
        consumer.assign([TopicPartition("smoke", 0, 0)])
        message = assert_eventually(lambda: _poll_one(consumer))
        consumer.close()
        assert message == b"committed"

        assert (tmp_path / "clusters" / "A" / "logs" / "server.log").stat().st_size > 0

        seeded = run_mirror("local", "seed", "--dir", "clusters", "--records", "250", cwd=tmp_path)
        assert seeded.returncode == 0, seeded.stderr
        assert f"wrote 250 records to orders on A (127.0.0.1:{base})" in seeded.stdout
    finally:
        down = run_mirror("local", "down", "--dir", "clusters", cwd=tmp_path)
    assert down.returncode == 0
    assert "stopped: A, B" in down.stdout
    assert broker_pids(tmp_path / "clusters" / "A") == []
    assert run_mirror("local", "status", "--dir", "clusters", cwd=tmp_path).stdout.count("stopped") == 2


def _poll_one(consumer: Consumer) -> bytes:
    message = consumer.poll(1.0)
    assert message is not None and message.error() is None
    return message.value()  # type: ignore[no-any-return]


def test_ctrl_c_during_up_stops_the_brokers_it_started(tmp_path: Path) -> None:
    base = free_base_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror", "local", "up", "--dir", "clusters", "--base-port", str(base)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Interrupt once both JVMs exist but before they are ready.
        assert_eventually(
            lambda: _assert_count(
                broker_pids(tmp_path / "clusters" / "A") + broker_pids(tmp_path / "clusters" / "B"), 2
            ),
            timeout=60,
            interval=0.05,
        )
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    assert broker_pids(tmp_path / "clusters" / "A") == []
    assert broker_pids(tmp_path / "clusters" / "B") == []


def _assert_count(pids: list[int], expected: int) -> None:
    assert len(pids) == expected
