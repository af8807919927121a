"""The query the checkpoint and heartbeat connectors share: ticks -> one round per batch -> the driver.

Same shape as the source query: the work runs on an executor inside mapInArrow (bound with
functools.partial to a module-level function, spark-design.md P3), and foreachBatch hands the
rounds' rows to the driver for metrics. A micro-batch costs the driver and an executor about a
fifth of a CPU second (planning, the offset and commit logs, foreachBatch through py4j); one a
second for MM2's default heartbeat interval was a tenth of this 2-core machine while idle. So a
short interval (5 s or less) runs several rounds, one interval apart, in one micro-batch of about
MIN_BATCH_SECONDS; longer ones keep one round a batch. The rounds keep their interval; the
driver hears of them when the micro-batch ends, up to ~10 s later.
Each connector brings its executor function and output schema (mirror.checkpoint.job,
mirror.heartbeat.job); nothing here knows what a round does.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.config.flow_settings import FlowSettings
from mirror.logs import configure, log_context
from mirror.spark.registry import register_for_one_query
from mirror.spark.ticks import TickSource

# The shortest micro-batch a round query runs (see above).
MIN_BATCH_SECONDS = 10.0
# How often a micro-batch waiting for its next round looks for the stop file.
STOP_CHECK_SECONDS = 0.2
# How long a round running when the stop file appears may go on before it is abandoned.
ROUND_STOP_GRACE_SECONDS = 10.0

RoundHandler = Callable[[FlowSettings, list[dict[str, Any]]], None]
# A connector's round, on an executor: the flow's settings -> the round's rows (dataclasses).
Round = Callable[[FlowSettings], Iterable[Any]]

_ARROW_TYPES: dict[str, tuple[pa.DataType, str]] = {
    "str": (pa.string(), "STRING"),
    "int": (pa.int64(), "LONG"),
    "float": (pa.float64(), "DOUBLE"),
    "bool": (pa.bool_(), "BOOLEAN"),
}


def row_schemas(row_type: type) -> tuple[pa.Schema, str]:
    """(Arrow schema, Spark DDL) with one column per field of a row dataclass."""
    fields = [(f.name, _ARROW_TYPES[str(f.type)]) for f in dataclasses.fields(row_type)]
    arrow = pa.schema([(name, types[0]) for name, types in fields])
    return arrow, ", ".join(f"`{name}` {types[1]}" for name, types in fields)


def rounds_per_batch(interval_seconds: float) -> int:
    """How many rounds one micro-batch runs: enough to last MIN_BATCH_SECONDS, at least one."""
    return max(1, math.floor(MIN_BATCH_SECONDS / interval_seconds))


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How one micro-batch runs its rounds: `rounds` of them, `interval` seconds apart, fewer once
    `stop_file` exists (on an executor that sees the driver's file system; elsewhere all run)."""

    rounds: int
    interval: float
    stop_file: str
    component: str = ""  # what the rounds' log lines name (mirror.logs)


def run_rounds(
    round_: Round,
    row_type: type,
    settings_json: str,
    schedule: Schedule,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Executor side: per tick, the schedule's rounds, each round's rows as one Arrow batch."""
    settings = FlowSettings.from_json(settings_json)
    configure(settings.log_format, settings.log_levels, debug=settings.log_debug)
    schema, _ = row_schemas(row_type)
    stopping = Path(schedule.stop_file)
    for batch in batches:
        for _ in range(batch.num_rows):
            started = time.monotonic()
            for index in range(schedule.rounds):
                if index and not _wait_unless_stopping(started + index * schedule.interval, stopping):
                    break
                rows = _round_unless_stopping(round_, settings, stopping, schedule.component)
                if rows is None:
                    return
                yield pa.RecordBatch.from_pylist([dataclasses.asdict(row) for row in rows], schema=schema)


def _round_unless_stopping(
    round_: Round, settings: FlowSettings, stop_file: Path, component: str
) -> list[Any] | None:
    """The round's rows; None if it still runs ROUND_STOP_GRACE_SECONDS after the stop file appeared.

    A healthy round ends within a second and is left to finish. One blocked on a cluster that is
    down (each of its calls waits up to 30 s) must not hold up shutdown; and Spark stopping the
    query mid-batch instead interrupts the driver's foreachBatch, which ends in a JVM stack overflow
    on stderr. The abandoned round's thread stays behind in the Python worker until Spark stops it;
    a transaction it left open (checkpoints, heartbeats) is aborted by the next run's fence or by
    its timeout, and that run writes what it would have.
    """
    rows: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with log_context(flow=settings.name, component=component):
                rows.extend(round_(settings))
        except BaseException as exc:  # noqa: BLE001 - raised again in the worker's own thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="mirror-round", daemon=True)
    thread.start()
    stopping_since: float | None = None
    while thread.is_alive():
        thread.join(STOP_CHECK_SECONDS)
        if stopping_since is None and stop_file.exists():
            stopping_since = time.monotonic()
        stopped_waiting = (
            stopping_since is not None and time.monotonic() - stopping_since >= ROUND_STOP_GRACE_SECONDS
        )
        if thread.is_alive() and stopped_waiting:
            return None
    if failure:
        raise failure[0]
    return rows


def _wait_unless_stopping(until: float, stop_file: Path) -> bool:
    """Sleep until `until`; False as soon as the stop file exists (checked every STOP_CHECK_SECONDS)."""
    while not stop_file.exists():
        left = until - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, STOP_CHECK_SECONDS))
    return False


def start_round_query(
    spark: SparkSession,
    settings: FlowSettings,
    *,
    component: str,
    round_: Round,
    row_type: type,
    interval_seconds: float,
    checkpoint_dir: Path,
    stop_file: Path,
    on_round: RoundHandler,
) -> StreamingQuery:
    """Start the `component` query of a flow: `round_` runs every interval; its rows are `row_type`s.

    `round_` and `row_type` must be module-level: the partial bound to them pickles them by
    reference, not by value with copies of their module's globals (spark-design.md P3).
    """
    ticks = (
        spark.readStream.format(register_for_one_query(spark, TickSource))
        .option("stop_file", str(stop_file))
        .load()
    )
    _, ddl = row_schemas(row_type)
    rounds = rounds_per_batch(interval_seconds)
    schedule = Schedule(rounds, interval_seconds, str(stop_file), component)
    rows = ticks.mapInArrow(
        functools.partial(run_rounds, round_, row_type, settings.to_json(), schedule), ddl
    )

    def collect(batch: DataFrame, _batch_id: int) -> None:
        on_round(settings, [row.asDict() for row in batch.collect()])

    return (
        rows.writeStream.queryName(f"mirror-{component}-{settings.source}-{settings.target}")
        .option("checkpointLocation", str(checkpoint_dir))
        .foreachBatch(collect)
        .trigger(processingTime=f"{interval_seconds * rounds:g} seconds")
        .start()
    )
