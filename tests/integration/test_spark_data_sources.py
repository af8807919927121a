"""Streaming queries of one Python data source, started together, each on a registration of its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.config.models import SparkConfig
from mirror.spark.registry import register_for_one_query
from mirror.spark.session import build_session
from mirror.spark.ticks import TickSource
from tests.helpers import assert_eventually

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = build_session(SparkConfig(master="local[2]"), flows=3)
    try:
        yield session
    finally:
        session.stop()


def _start_at_once(spark: SparkSession, checkpoints: Path, count: int) -> list[StreamingQuery]:
    """`count` queries of the ticks source, started from as many threads at the same moment."""
    queries: list[StreamingQuery] = []
    lock = threading.Lock()
    go = threading.Barrier(count)

    def start(index: int) -> None:
        ticks = spark.readStream.format(register_for_one_query(spark, TickSource)).load()
        go.wait(timeout=60)
        query = (
            ticks.writeStream.format("noop")
            .option("checkpointLocation", str(checkpoints / f"query-{index}"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        with lock:
            queries.append(query)

    threads = [threading.Thread(target=start, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return queries


def test_queries_of_one_source_started_at_once_all_keep_running(spark: SparkSession, tmp_path: Path) -> None:
    # What two flows do at start-up: several queries of one data source start in parallel threads
    # while the first ones already run batches. When they shared one environment map, a round
    # corrupted it about one time in three, and every later task then failed to deserialize
    # (java.io.OptionalDataException).
    for round_ in range(3):
        queries = _start_at_once(spark, tmp_path / f"round-{round_}", 6)
        try:
            assert len(queries) == 6

            def every_query_ran_batches(queries: list[StreamingQuery] = queries) -> None:
                for query in queries:
                    if query.exception() is not None:
                        pytest.fail(f"query {query.name} failed: {query.exception()}")
                    assert query.lastProgress is not None and query.lastProgress["batchId"] >= 3

            assert_eventually(every_query_ran_batches, timeout=120, interval=1)
        finally:
            for query in queries:
                query.stop()
