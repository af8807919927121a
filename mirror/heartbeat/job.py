"""The heartbeat connector's Spark job: a heartbeat round every interval (mirror.spark.rounds).

heartbeat_rounds runs on an executor, bound with functools.partial to the flow's settings as
JSON (spark-design.md P3: a module-level function pickles by reference); the round itself is
mirror.heartbeat.task. The driver gets every round's rows through `on_round`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.config.flow_settings import FlowSettings
from mirror.heartbeat.task import HeartbeatRow, run_heartbeat_round
from mirror.spark.rounds import RoundHandler, row_schemas, start_round_query

HEARTBEAT_ARROW, HEARTBEAT_DDL = row_schemas(HeartbeatRow)


def heartbeat_rounds(settings_json: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    settings = FlowSettings.from_json(settings_json)
    for batch in batches:
        for _ in range(batch.num_rows):
            rows = [dataclasses.asdict(row) for row in run_heartbeat_round(settings)]
            yield pa.RecordBatch.from_pylist(rows, schema=HEARTBEAT_ARROW)


def start_heartbeat_query(
    spark: SparkSession,
    settings: FlowSettings,
    *,
    interval_seconds: float,
    checkpoint_dir: Path,
    stop_file: Path,
    on_round: RoundHandler,
) -> StreamingQuery:
    """Start the flow's heartbeat query: a round every `interval_seconds`. Driver only."""
    return start_round_query(
        spark,
        settings,
        component="heartbeat",
        work=heartbeat_rounds,
        ddl=HEARTBEAT_DDL,
        interval_seconds=interval_seconds,
        checkpoint_dir=checkpoint_dir,
        stop_file=stop_file,
        on_round=on_round,
    )
