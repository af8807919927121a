"""The `mirror_ticks` Python data source: one row per micro-batch, the batch's tick number.

It drives the checkpoint and heartbeat queries: the trigger interval sets the pace, and each
batch's one task does a round of work on an executor. Ticks carry no data; the components' real
positions are in Kafka. A stop file makes it plan nothing, as the source does, so a stopping run
starts no round; one already running finishes, unless a cluster keeps it waiting past a grace
(mirror.spark.rounds).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit
from pyspark.sql.types import StructType

TICK_SCHEMA = "tick LONG"


class TickPartition(InputPartition):
    def __init__(self, tick: int) -> None:
        self.tick = tick


class TickReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self._stop_file = Path(options["stop_file"]) if options.get("stop_file") else None

    def initialOffset(self) -> dict[str, int]:
        return {"tick": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if self._stop_file is not None and self._stop_file.exists():
            return start
        return {"tick": int(start["tick"]) + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [TickPartition(int(end["tick"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        if not isinstance(partition, TickPartition):
            raise TypeError(f"mirror_ticks got a {type(partition).__name__}, not a TickPartition")
        yield (partition.tick,)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: a tick is done when its round's transaction committed."""


class TickSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mirror_ticks"

    def schema(self) -> str:
        return TICK_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TickReader(dict(self.options))
