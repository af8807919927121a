"""The source connector's Spark job: the `mirror_copy` data source and its streaming query.

Each micro-batch is one epoch of long-running copy tasks: the planner (Spark's data-source
planner process on the driver) reads the flow's current assignment from a file the supervisor
writes, and hands every task of it a `CopyTaskSpec`; each task copies its partitions on an
executor until the epoch's window runs out (mirror.source.task). Spark's offsets are only an epoch
counter: the positions committed on the target are the truth, so a replayed epoch, a retried task
or a deleted checkpoint directory copies nothing twice.

Picklable: the reader holds settings and paths only; clients live in the tasks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from mirror.config.flow_settings import FlowSettings
from mirror.logs import configure
from mirror.source.assignment import Assignment, SourcePartition
from mirror.source.task_spec import CopyTaskSpec, TaskSummary
from mirror.spark.registry import register_for_one_query

_DDL_TYPES = {"str": "STRING", "int": "LONG"}
SUMMARY_SCHEMA = ", ".join(f"`{f.name}` {_DDL_TYPES[str(f.type)]}" for f in fields(TaskSummary))
IDLE_SECONDS = 0.5  # how long the planner waits before asking again when nothing is assigned


@dataclass(frozen=True)
class PublishedAssignment:
    """The assignment file: the supervisor writes it, the planner reads it before every epoch."""

    assignment: Assignment
    new: frozenset[SourcePartition]  # partitions first assigned in this generation

    def write(self, path: Path) -> None:
        data = {**self.assignment.to_json(), "new": sorted([list(p) for p in self.new])}
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data), encoding="utf-8")
        temporary.replace(path)  # atomic: the planner never reads half a file

    @classmethod
    def read(cls, path: Path) -> PublishedAssignment | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        new = frozenset((str(t), int(p)) for t, p in data.get("new", []))
        return cls(Assignment.from_json(data), new)


class CopyTaskPartition(InputPartition):
    def __init__(self, spec: CopyTaskSpec) -> None:
        self.spec = spec


class CopyEpochReader(DataSourceStreamReader):
    """Driver side: one epoch per micro-batch. Executor side: `read()` runs one copy task."""

    def __init__(self, options: dict[str, str]) -> None:
        self._settings = FlowSettings.from_json(options["settings"])
        self._assignment_file = Path(options["assignment_file"])
        self._stop_file = Path(options["stop_file"])
        host, _, port = options.get("stats_address", "").rpartition(":")
        self._stats_address = (host, int(port)) if host else None

    def initialOffset(self) -> dict[str, int]:
        return {"epoch": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if self._stop_file.exists():
            time.sleep(IDLE_SECONDS)  # Spark asks again at once
            return start  # stopping: no new epoch, so no task is cut off mid-transaction
        published = PublishedAssignment.read(self._assignment_file)
        if published is None or not published.assignment.partitions:
            time.sleep(IDLE_SECONDS)  # Spark asks again at once; nothing to copy yet
            return start
        return {"epoch": int(start["epoch"]) + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        published = PublishedAssignment.read(self._assignment_file)
        if published is None:
            return []
        deadline = time.time() + self._settings.epoch_seconds
        assignment = published.assignment
        running = sum(1 for owned in assignment.tasks if owned)
        throttle = self._settings.throttle_bytes_per_second
        return [
            CopyTaskPartition(
                CopyTaskSpec(
                    index=index,
                    generation=assignment.generation,
                    partitions=owned,
                    deadline=deadline,
                    stats_address=self._stats_address,
                    stop_file=str(self._stop_file),
                    # Shared equally: a task whose partitions carry less leaves part of its share unused.
                    throttle_bytes_per_second=throttle / running if throttle is not None else None,
                )
            )
            for index, owned in enumerate(assignment.tasks)
            if owned
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if not isinstance(partition, CopyTaskPartition):
            raise TypeError(f"mirror_copy got a {type(partition).__name__}, not a CopyTaskPartition")
        # Imported here, not with the module: Spark's planner processes import this module (to
        # unpickle the source, plan reads) and never copy, and the copy path's Kafka libraries
        # cost them a second or more of each start-up; executors have it preloaded
        # (mirror.spark.daemon).
        from mirror.source.task import run_copy_task

        configure(self._settings.log_format, self._settings.log_levels, debug=self._settings.log_debug)
        yield astuple(run_copy_task(self._settings, partition.spec))

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: positions are committed on the target, in each task's transactions."""


class MirrorCopySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mirror_copy"

    def schema(self) -> str:
        return SUMMARY_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CopyEpochReader(dict(self.options))


def start_copy_query(
    spark: SparkSession,
    settings: FlowSettings,
    *,
    checkpoint_dir: Path,
    assignment_file: Path,
    stop_file: Path,
    stats_address: tuple[str, int],
) -> StreamingQuery:
    """The flow's copy query: epochs back to back, into a no-op sink (the tasks wrote the target)."""
    rows = (
        spark.readStream.format(register_for_one_query(spark, MirrorCopySource))
        .option("settings", settings.to_json())
        .option("assignment_file", str(assignment_file))
        .option("stop_file", str(stop_file))
        .option("stats_address", f"{stats_address[0]}:{stats_address[1]}")
        .load()
    )
    return (
        rows.writeStream.queryName(f"mirror-source-{settings.source}-{settings.target}")
        .format("noop")
        .option("checkpointLocation", str(checkpoint_dir))
        # Spark 4.3 refuses asynchronous progress tracking for the noop sink ("does not support
        # async progress tracking"); the offsets and commit logs are two small files an epoch.
        .option("asyncProgressTrackingEnabled", "false")
        .trigger(processingTime="0 seconds")
        .start()
    )
