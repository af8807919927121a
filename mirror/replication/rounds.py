"""The checkpoint and heartbeat components' Spark queries: ticks -> one round per batch -> stats.

Same shape as the source query: the work runs on an executor inside mapInArrow (bound with
functools.partial to a module-level function, spark-design.md P3), and foreachBatch hands the
round's rows to the driver for metrics. The trigger interval is the component's interval.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.kafka.checkpointer import CheckpointRow, run_checkpoint_round
from mirror.kafka.heartbeater import HeartbeatRow, run_heartbeat_round
from mirror.replication.settings import FlowSettings

RoundHandler = Callable[[FlowSettings, list[dict[str, Any]]], None]

_ARROW_TYPES: dict[str, tuple[pa.DataType, str]] = {
    "str": (pa.string(), "STRING"),
    "int": (pa.int64(), "LONG"),
    "float": (pa.float64(), "DOUBLE"),
    "bool": (pa.bool_(), "BOOLEAN"),
}


def _schemas(row_type: type) -> tuple[pa.Schema, str]:
    """(Arrow schema, Spark DDL) with one column per field of a row dataclass."""
    fields = [(f.name, _ARROW_TYPES[str(f.type)]) for f in dataclasses.fields(row_type)]
    arrow = pa.schema([(name, types[0]) for name, types in fields])
    return arrow, ", ".join(f"`{name}` {types[1]}" for name, types in fields)


CHECKPOINT_ARROW, CHECKPOINT_DDL = _schemas(CheckpointRow)
HEARTBEAT_ARROW, HEARTBEAT_DDL = _schemas(HeartbeatRow)


def checkpoint_rounds(settings_json: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    settings = FlowSettings.from_json(settings_json)
    for batch in batches:
        for _ in range(batch.num_rows):
            rows = [dataclasses.asdict(row) for row in run_checkpoint_round(settings)]
            yield pa.RecordBatch.from_pylist(rows, schema=CHECKPOINT_ARROW)


def heartbeat_rounds(settings_json: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    settings = FlowSettings.from_json(settings_json)
    for batch in batches:
        for _ in range(batch.num_rows):
            rows = [dataclasses.asdict(row) for row in run_heartbeat_round(settings)]
            yield pa.RecordBatch.from_pylist(rows, schema=HEARTBEAT_ARROW)


# component -> (executor function, output DDL)
_ROUNDS: dict[str, tuple[Callable[[str, Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], str]] = {
    "checkpoint": (checkpoint_rounds, CHECKPOINT_DDL),
    "heartbeat": (heartbeat_rounds, HEARTBEAT_DDL),
}


def start_round_query(
    spark: SparkSession,
    settings: FlowSettings,
    *,
    component: str,
    interval_seconds: float,
    checkpoint_dir: Path,
    stop_file: Path,
    on_round: RoundHandler,
) -> StreamingQuery:
    """Start the `component` ("checkpoint" or "heartbeat") query of a flow: a round every interval."""
    work, ddl = _ROUNDS[component]
    ticks = spark.readStream.format("mirror_ticks").option("stop_file", str(stop_file)).load()
    rows = ticks.mapInArrow(functools.partial(work, settings.to_json()), ddl)

    def collect(batch: DataFrame, _batch_id: int) -> None:
        on_round(settings, [row.asDict() for row in batch.collect()])

    return (
        rows.writeStream.queryName(f"mirror-{component}-{settings.source}-{settings.target}")
        .option("checkpointLocation", str(checkpoint_dir))
        .foreachBatch(collect)
        .trigger(processingTime=f"{interval_seconds:g} seconds")
        .start()
    )
