"""The source component's Spark query: mirror_source plans and copies ranges; foreachBatch reports stats."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.replication.settings import FlowSettings

BatchHandler = Callable[[FlowSettings, list[dict[str, Any]], int], None]


def start_source_query(
    spark: SparkSession, settings: FlowSettings, checkpoint_dir: Path, stop_file: Path, on_batch: BatchHandler
) -> StreamingQuery:
    # Each row is one copied range's stats (mirror.kafka.range_copier.RangeStats): the copy happens
    # in the source's read(), on executors, when foreachBatch collects the batch.
    stats = (
        spark.readStream.format("mirror_source")
        .option("settings", settings.to_json())
        .option("stop_file", str(stop_file))
        .load()
    )

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
