"""The heartbeat connector's Spark job: a heartbeat round (mirror.heartbeat.task) every interval, on
an executor, through the query the round connectors share (mirror.spark.rounds). Driver only."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.config.flow_settings import FlowSettings
from mirror.heartbeat.task import HeartbeatRow, run_heartbeat_round
from mirror.spark.rounds import RoundHandler, start_round_query


def start_heartbeat_query(
    spark: SparkSession,
    settings: FlowSettings,
    *,
    interval_seconds: float,
    checkpoint_dir: Path,
    stop_file: Path,
    on_round: RoundHandler,
) -> StreamingQuery:
    return start_round_query(
        spark,
        settings,
        component="heartbeat",
        round_=run_heartbeat_round,
        row_type=HeartbeatRow,
        interval_seconds=interval_seconds,
        checkpoint_dir=checkpoint_dir,
        stop_file=stop_file,
        on_round=on_round,
    )
