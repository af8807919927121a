"""`mirror run` on a Spark standalone cluster (a master and two workers from the pyspark package)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
import yaml
from confluent_kafka import Producer

from mirror.local.broker import free_port
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import replicate_until_caught_up, write_config
from tests.records import assert_same_records, read_topic

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


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    env = _spark_env()
    processes = []
    with (tmp_path / "spark-cluster.log").open("wb") as log:
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
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(tmp_path / f"worker-{worker}"),
                        f"spark://127.0.0.1:{port}",
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        assert_eventually(lambda: _two_workers_registered(tmp_path / "spark-cluster.log"), timeout=90)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _two_workers_registered(log: Path) -> None:
    assert log.read_text(errors="replace").count("Registering worker") >= 2


def test_replicates_through_a_standalone_spark_cluster(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    standalone_master: str,
) -> None:
    topic = unique_name(request, "standalone-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    producer = Producer(source_cluster.properties())
    for i in range(20_000):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % 4)
    assert producer.flush(30) == 0

    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    document = yaml.safe_load(config.read_text())
    document["spark"]["master"] = standalone_master
    document["spark"]["conf"] = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "768m",
        "spark.executor.cores": "1",
    }
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    replicate_until_caught_up(config, tmp_path / "run.log", source_cluster, target_cluster, [topic])
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
    )
    # The work ran in the workers' executors, not in an embedded local[*] driver.
    executor_logs = list(tmp_path.glob("worker-*/app-*/*/stderr"))
    assert executor_logs, "no executor ran on the standalone workers"
