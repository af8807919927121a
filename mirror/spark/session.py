"""The one SparkSession every flow's queries run in. Driver only."""

from __future__ import annotations

import os
import re
import sys
from importlib import resources

from pyspark.sql import SparkSession

from mirror.config.models import SparkConfig
from mirror.spark.source import MirrorSource
from mirror.spark.ticks import TickSource

# Retries per task in local mode (local[N,F]): a failed range retries inside its batch.
LOCAL_TASK_ATTEMPTS = 4
# Task slots added in local mode for the checkpoint and heartbeat rounds. Tasks wait on Kafka,
# not on a core, and copy tasks stuck on a frozen source must not starve the heartbeats that
# tell monitoring so.
ROUND_SLOTS = 2


def local_master(master: str) -> str:
    """local, local[*], local[N]: ROUND_SLOTS more task slots and LOCAL_TASK_ATTEMPTS tries per task.

    local[N,F] is taken as the user wrote it.
    """
    match = re.fullmatch(r"local(?:\[(\*|\d+)\])?", master)
    if match is None:
        return master
    threads = match.group(1) or "1"
    slots = (os.cpu_count() or 1) if threads == "*" else int(threads)
    return f"local[{slots + ROUND_SLOTS},{LOCAL_TASK_ATTEMPTS}]"


def build_session(config: SparkConfig) -> SparkSession:
    # Executors and the data-source planner run this interpreter, so they import this very
    # `mirror` (Spark ignores spark.pyspark.python in 4.3; only the environment counts).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if config.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = resources.files("mirror.spark") / "log4j2.properties"
    builder = (
        SparkSession.builder.master(local_master(config.master))
        .appName(config.app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        # Fair shares between the per-component pools the supervisor assigns (source, checkpoint,
        # heartbeat), so small rounds are not queued behind a large copy batch.
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
    )
    for key, value in config.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(MirrorSource)
    spark.dataSource.register(TickSource)
    return spark
