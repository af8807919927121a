"""The one SparkSession every flow's queries run in. Driver only."""

from __future__ import annotations

import os
import re
import socket
import sys
from importlib import resources

from pyspark import SparkConf
from pyspark.sql import SparkSession

from mirror.config.models import SparkConfig
from mirror.spark.gateway import start_gateway
from mirror.spark.jvm import driver_java_options, spark_home_without_zip
from mirror.spark.signals import start_ignoring_sigterm

# Retries per task in local mode (local[N,F]): a failed task retries inside its epoch.
LOCAL_TASK_ATTEMPTS = 4
# Task slots per flow for its checkpoint and heartbeat rounds. Copy tasks hold a slot for a whole
# epoch, and copy tasks stuck on a frozen source must not starve the heartbeats that tell
# monitoring so.
ROUND_SLOTS = 2


def local_master(master: str, *, copy_tasks: int = 0, flows: int = 1) -> str:
    """local, local[*], local[N]: a slot per copy task, ROUND_SLOTS per flow, LOCAL_TASK_ATTEMPTS tries.

    At least as many slots as local[N] asked for (N cores for local[*]); local[N,F] is taken as
    the user wrote it.
    """
    match = re.fullmatch(r"local(?:\[(\*|\d+)\])?", master)
    if match is None:
        return master
    threads = match.group(1) or "1"
    asked = (os.cpu_count() or 1) if threads == "*" else int(threads)
    slots = max(asked, copy_tasks) + ROUND_SLOTS * max(1, flows)
    return f"local[{slots},{LOCAL_TASK_ATTEMPTS}]"


def driver_host(config: SparkConfig) -> str:
    """The address executors reach the driver at (copy tasks send their stats there)."""
    if "spark.driver.host" in config.conf:
        return config.conf["spark.driver.host"]
    if config.master.startswith("local"):
        return "127.0.0.1"
    return socket.gethostbyname(socket.gethostname())


def build_session(config: SparkConfig, *, copy_tasks: int = 0, flows: int = 1) -> SparkSession:
    # Executors and the data-source planner run this interpreter, so they import this very
    # `mirror` (Spark ignores spark.pyspark.python in 4.3; only the environment counts).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if config.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        home = spark_home_without_zip() if "SPARK_HOME" not in os.environ else None
        if home is not None:
            os.environ["SPARK_HOME"] = str(home)
    log4j = resources.files("mirror.spark") / "log4j2.properties"
    options = {
        "spark.master": local_master(config.master, copy_tasks=copy_tasks, flows=flows),
        "spark.app.name": config.app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.python.worker.reuse": "true",
        "spark.python.daemon.module": "mirror.spark.daemon",
        # Fair shares between the per-component pools the supervisor assigns (source, checkpoint,
        # heartbeat), so small rounds are not queued behind a large copy batch.
        "spark.scheduler.mode": "FAIR",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}",
        # A Python worker that crashes reports its stack in the task's error, not only its exit code.
        "spark.python.worker.faulthandler.enabled": "true",
    }
    options.update(config.conf)
    options["spark.driver.extraJavaOptions"] = driver_java_options(
        f"-Dlog4j2.configurationFile={log4j} {config.conf.get('spark.driver.extraJavaOptions', '')}"
    )
    conf = SparkConf().setAll(list(options.items()))
    start_ignoring_sigterm(lambda: start_gateway(conf))
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
