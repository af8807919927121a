"""The source component's Spark query: plan ranges (mirror_source), copy them (mapInArrow), report stats."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.kafka.range_copier import copy_range
from mirror.replication.plan import SourcePartitionRange
from mirror.replication.settings import FlowSettings

# One column per RangeStats field: (Arrow type for the executor, DDL type for Spark).
STATS_COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "topic": (pa.string(), "STRING"),
    "partition": (pa.int64(), "LONG"),
    "start": (pa.int64(), "LONG"),
    "end": (pa.int64(), "LONG"),
    "copied_from": (pa.int64(), "LONG"),
    "records": (pa.int64(), "LONG"),
    "bytes": (pa.int64(), "LONG"),
    "skipped": (pa.bool_(), "BOOLEAN"),
    "attempts": (pa.int64(), "LONG"),
    "fenced": (pa.int64(), "LONG"),
    "aborted": (pa.int64(), "LONG"),
    "truncated_records": (pa.int64(), "LONG"),
    "seconds": (pa.float64(), "DOUBLE"),
    "max_record_age_seconds": (pa.float64(), "DOUBLE"),
}
STATS_ARROW_SCHEMA = pa.schema([(name, arrow) for name, (arrow, _) in STATS_COLUMNS.items()])
STATS_SCHEMA = ", ".join(f"`{name}` {ddl}" for name, (_, ddl) in STATS_COLUMNS.items())

BatchHandler = Callable[[FlowSettings, list[dict[str, Any]], int], None]


def copy_ranges(settings_json: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: copy every range row, yield one stats row per range.

    Module-level and bound with functools.partial, so Spark pickles a reference to it and the
    client caches in mirror.kafka.range_copier are the worker's real ones (spark-design.md P3).
    """
    settings = FlowSettings.from_json(settings_json)
    for batch in batches:
        rows = batch.to_pydict()
        stats = [
            asdict(copy_range(settings, SourcePartitionRange(topic, partition, start, end)))
            for topic, partition, start, end in zip(
                rows["topic"], rows["partition"], rows["start_offset"], rows["end_offset"], strict=True
            )
        ]
        yield pa.RecordBatch.from_pylist(stats, schema=STATS_ARROW_SCHEMA)


def start_source_query(
    spark: SparkSession, settings: FlowSettings, checkpoint_dir: Path, stop_file: Path, on_batch: BatchHandler
) -> StreamingQuery:
    ranges = (
        spark.readStream.format("mirror_source")
        .option("settings", settings.to_json())
        .option("stop_file", str(stop_file))
        .load()
    )
    stats = ranges.mapInArrow(functools.partial(copy_ranges, settings.to_json()), STATS_SCHEMA)

    def collect(batch: DataFrame, batch_id: int) -> None:
        # One action only: a second one would run the copies again.
        on_batch(settings, [row.asDict() for row in batch.collect()], batch_id)

    return (
        stats.writeStream.queryName(f"mirror-source-{settings.source}-{settings.target}")
        .option("checkpointLocation", str(checkpoint_dir))
        .foreachBatch(collect)
        .trigger(processingTime="0 seconds")
        .start()
    )
