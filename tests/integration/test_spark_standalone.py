"""`mirror run` on a Spark standalone cluster (a master and two workers from the pyspark package)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest
import yaml

from mirror.local.ports import free_port
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import (
    MirrorRun,
    wait_until_caught_up,
    wait_until_copying,
    write_config,
)
from tests.reliability.traffic import Traffic, compare_topics, process_alive, process_tree
from tests.seeding import produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent


def _spark_env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Executors must run this interpreter, which has mirror installed.
        "PYSPARK_PYTHON": sys.executable,
    }


# A copy task's line as mirror.logs writes it in text: its flow, component and task first.
TOOK_PARTITIONS = re.compile(r"INFO mirror\.source\.task: \[A->B source task \d .*\] took \d+ partitions")


@dataclass
class Standalone:
    master: str
    workers: list[subprocess.Popen[bytes]]
    directory: Path

    def busiest_worker(self, seconds: float = 3.0) -> int:
        """The worker whose process tree (worker, executor, Python workers) used the most CPU over
        `seconds`: the one running copy tasks, which consume and produce without a pause."""
        before = [_cpu_ticks(worker.pid) for worker in self.workers]
        time.sleep(seconds)
        used = [_cpu_ticks(worker.pid) - start for worker, start in zip(self.workers, before, strict=True)]
        return used.index(max(used))

    def kill_worker(self, index: int) -> dict[int, str]:
        """SIGKILL a worker and everything under it (its executor): the machine is gone. Returns
        the processes killed, by pid, with their command lines."""
        killed = {pid: _command_line(pid) for pid in process_tree(self.workers[index].pid)}
        for pid in reversed(killed):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.workers[index].wait(timeout=30)
        return killed


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A master and two workers of 3 cores each: either worker alone can host a flow's copy task
    and its two rounds, so the flow can go on when the other one dies."""
    directory = tmp_path_factory.mktemp("spark-standalone")
    port = free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    env = _spark_env()
    processes = []
    with (directory / "spark-cluster.log").open("wb") as log:
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(free_port()),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        for worker in range(2):
            processes.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "3",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(directory / f"worker-{worker}"),
                        f"spark://127.0.0.1:{port}",
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        assert_eventually(lambda: _two_workers_registered(directory / "spark-cluster.log"), timeout=90)
        yield Standalone(f"spark://127.0.0.1:{port}", processes[1:], directory)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _still_running(pids: dict[int, str]) -> list[int]:
    return [pid for pid in pids if process_alive(pid)]


def _cpu_ticks(root: int) -> int:
    total = 0
    for pid in process_tree(root):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def _on_cluster(config: Path, master: str) -> None:
    document = yaml.safe_load(config.read_text())
    document["spark"]["master"] = master
    document["spark"]["conf"] = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "768m",
        "spark.executor.cores": "3",
    }
    config.write_text(yaml.safe_dump(document), encoding="utf-8")


def _two_workers_registered(log: Path) -> None:
    assert log.read_text(errors="replace").count("Registering worker") >= 2


def test_copy_tasks_run_and_log_on_the_workers_and_a_worker_killed_mid_copy_leaves_the_flow_exact(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    standalone: Standalone,
) -> None:
    topic = unique_name(request, "standalone-kill-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=6, config={"retention.ms": "-1"})
    produce_mixed(source_cluster, topic, 6000, 6, seed=23, aborted_every=4)
    traffic = Traffic(source_cluster, {topic: 6}, per_second=500).start()
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], tasks_max=2)
    _on_cluster(config, standalone.master)
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_copying(source_cluster, target_cluster, [topic], run, more=3000, timeout=180)
        # The copy tasks run in the workers' executors, not in an embedded local[*] driver, and
        # their log lines (mirror.logs, set up in each Python worker) reach the executor's stderr.
        executor_logs = list(standalone.directory.glob("worker-*/app-*/*/stderr"))
        assert executor_logs, "no executor ran on the standalone workers"
        logged = "".join(path.read_text(errors="replace") for path in executor_logs)
        assert re.search(
            r"INFO mirror\.source\.task: \[A->B source task \d .*\] took \d+ partitions", logged
        ), logged[-3000:]
        # Kill the worker whose executor is copying: the one whose processes burn the most CPU.
        killed = standalone.kill_worker(standalone.busiest_worker())
        # Shown to have happened before the flow is checked: an executor was among the processes
        # killed, and every one of them is gone.
        assert any("CoarseGrainedExecutorBackend" in command for command in killed.values()), killed
        assert_eventually(lambda: _still_running(killed) == [], timeout=30)
        # The flow goes on: more records are copied after the kill, by the surviving worker.
        wait_until_copying(source_cluster, target_cluster, [topic], run, more=2000, timeout=240)
        produced = traffic.stop()
        wait_until_caught_up(source_cluster, target_cluster, [topic], run, timeout=300)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        traffic.stop()
        run.cleanup()
    comparison = compare_topics(source_cluster, target_cluster, [topic])
    assert comparison.exact, comparison
    assert comparison.checked == 6000 + produced
