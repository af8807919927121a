"""`mirror local up|status|down`: real brokers started, found again, stopped, cleaned up on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror.config import load_config
from tests.helpers import assert_eventually, create_topic, run_mirror
from tests.reliability.traffic import signal_each

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.solo]


def free_base_port(nodes: int = 1) -> int:
    """A base port such that base..base+2*nodes-1 and the same 10000 higher are all free."""
    for base in range(20100, 45000, 137):
        ports = [port + offset for port in range(base, base + 2 * nodes) for offset in (0, 10000)]
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


def test_up_with_three_brokers_makes_replicated_clusters_whose_brokers_drills_kill_and_start(
    tmp_path: Path,
) -> None:
    base = free_base_port(nodes=3)
    up = run_mirror(
        "local", "up", "--dir", "clusters", "--base-port", str(base), "--brokers", "3", cwd=tmp_path
    )
    try:
        assert up.returncode == 0, up.stderr
        a = f"127.0.0.1:{base},127.0.0.1:{base + 2},127.0.0.1:{base + 4}"
        b = f"127.0.0.1:{base + 10000},127.0.0.1:{base + 10002},127.0.0.1:{base + 10004}"
        config = load_config(tmp_path / "mm2.local.yaml")
        assert (config.clusters["A"].bootstrap_servers, config.clusters["B"].bootstrap_servers) == (a, b)
        assert len(broker_pids(tmp_path / "clusters" / "A")) == 3
        assert len(broker_pids(tmp_path / "clusters" / "B")) == 3
        # Replicated as operators run them: new topics get three replicas, and take writes with
        # one broker down (min ISR 2).
        create_topic_with_default_replicas(b, "drill")
        assert replica_counts(b, "drill") == {3}

        killed = run_mirror(
            "local", "kill-broker", "--dir", "clusters", "--cluster", "B", "--id", "2", cwd=tmp_path
        )
        assert killed.returncode == 0, killed.stderr
        assert killed.stdout.strip() == "B broker 2 killed"
        assert len(broker_pids(tmp_path / "clusters" / "B")) == 2
        status = run_mirror("local", "status", "--dir", "clusters", cwd=tmp_path)
        assert status.returncode == 1  # not every broker runs
        assert "B  2 of 3 brokers running" in status.stdout
        assert f"broker 2  127.0.0.1:{base + 10002}  stopped" in status.stdout
        producer = Producer({"bootstrap.servers": b, "acks": "all"})
        for n in range(10):
            producer.produce("drill", b"%d" % n, partition=n % 3)
        assert producer.flush(60) == 0

        started = run_mirror(
            "local", "start-broker", "--dir", "clusters", "--cluster", "B", "--id", "2", cwd=tmp_path
        )
        assert started.returncode == 0, started.stderr
        assert run_mirror("local", "status", "--dir", "clusters", cwd=tmp_path).returncode == 0

        unknown = run_mirror(
            "local", "stop-broker", "--dir", "clusters", "--cluster", "B", "--id", "7", cwd=tmp_path
        )
        assert unknown.returncode != 0
        assert unknown.stderr.strip().endswith("cluster B has no broker 7; its brokers are 1, 2, 3")
        assert "Traceback" not in unknown.stderr
    finally:
        down = run_mirror("local", "down", "--dir", "clusters", "--purge", cwd=tmp_path)
    assert down.returncode == 0
    assert broker_pids(tmp_path / "clusters" / "B") == []


def create_topic_with_default_replicas(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3)], operation_timeout=30)[topic].result(timeout=30)


def replica_counts(bootstrap: str, topic: str) -> set[int]:
    def described() -> set[int]:
        partitions = (
            AdminClient({"bootstrap.servers": bootstrap})
            .list_topics(topic, timeout=30)
            .topics[topic]
            .partitions
        )
        assert len(partitions) == 3
        return {len(partition.replicas) for partition in partitions.values()}

    return assert_eventually(described)


def _poll_one(consumer: Consumer) -> bytes:
    message = consumer.poll(1.0)
    assert message is not None and message.error() is None
    return message.value()  # type: ignore[no-any-return]


def test_ctrl_c_during_up_stops_the_brokers_it_started(tmp_path: Path) -> None:
    base = free_base_port()
    # `up` as from a terminal. A test run started in the background (`cmd &` in a script) ignores
    # SIGINT, a child inherits that, and its Python then raises no KeyboardInterrupt at all; a
    # handler here (not inherited: exec resets it) starts the child with the default instead.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "mirror", "local", "up", "--dir", "clusters", "--base-port", str(base)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        # Interrupt once both JVMs exist but before they are ready. They are held stopped across
        # the interrupt: on an idle machine they were ready, and `up` done, before it arrived.
        assert_eventually(
            lambda: _assert_count(
                broker_pids(tmp_path / "clusters" / "A") + broker_pids(tmp_path / "clusters" / "B"), 2
            ),
            timeout=60,
            interval=0.05,
        )
        brokers = broker_pids(tmp_path / "clusters" / "A") + broker_pids(tmp_path / "clusters" / "B")
        signal_each(brokers, signal.SIGSTOP)
        os.kill(process.pid, signal.SIGINT)
        time.sleep(1.0)  # `up` takes the interrupt while neither broker can become ready
        signal_each(brokers, signal.SIGCONT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        left = broker_pids(tmp_path / "clusters" / "A") + broker_pids(tmp_path / "clusters" / "B")
        signal_each(left, signal.SIGKILL)  # not left running for the tests after a failure
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    assert left == []


def _assert_count(pids: list[int], expected: int) -> None:
    assert len(pids) == expected
