"""The `mirror_source` Python data source: plans source offset ranges and copies them, one row per range.

Runs in Spark's data-source planner process on the driver (latestOffset, partitions) and, for
`read()`, in executor Python workers on an unpickled copy. Picklable: Kafka clients are created
lazily and never pickled. `read()` copies its range (mirror.kafka.range_copier) and yields the
range's stats row: doing the work here rather than in a mapInArrow after the read saves a
second Python worker per task, its start-up, and a hop per batch (spark-design.md, "Something
possibly better"), and each worker's cached clients are then hit twice as often.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import astuple, fields
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from mirror.errors import MirrorError, SourceTruncatedError
from mirror.kafka.admin import (
    commit_positions,
    committed_positions,
    earliest_offsets,
    last_stable_offsets,
    list_topics,
)
from mirror.kafka.clients import admin_client, consumer
from mirror.kafka.range_copier import RangeStats, copy_range
from mirror.policy import should_replicate_topic
from mirror.replication.plan import (
    Positions,
    SourcePartitionRange,
    parse_position_key,
    plan_end,
    position_key,
    ranges_between,
    sorted_positions,
)
from mirror.replication.settings import FlowSettings

_DDL_TYPES = {"str": "STRING", "int": "LONG", "bool": "BOOLEAN", "float": "DOUBLE"}
# One column per RangeStats field, in field order: read() yields dataclasses.astuple(stats).
STATS_SCHEMA = ", ".join(f"`{f.name}` {_DDL_TYPES[str(f.type)]}" for f in fields(RangeStats))
MAX_PLANNING_BACKOFF_SECONDS = 10.0

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One source partition range; picklable."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class MirrorSourceReader(DataSourceStreamReader):
    """Plans ranges from the source's last stable offsets and the target's committed positions."""

    def __init__(self, options: dict[str, str]) -> None:
        self._settings = FlowSettings.from_json(options["settings"])
        self._stop_file = Path(options["stop_file"]) if options.get("stop_file") else None
        self._clients: dict[str, Any] = {}
        self._latest: Positions | None = None
        self._failures = 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_clients"] = {}
        return state

    def _client(self, name: str) -> Any:
        if name not in self._clients:
            s = self._settings
            factories = {
                "source_admin": lambda: admin_client(s.source_admin),
                "target_admin": lambda: admin_client(s.target_admin),
                "positions": lambda: consumer(
                    {
                        **s.target_consumer,
                        "group.id": s.positions_group(),
                        "isolation.level": "read_committed",
                    }
                ),
            }
            self._clients[name] = factories[name]()
        return self._clients[name]

    def _replicable(self) -> list[str]:
        """Position keys of source partitions whose remote partition exists on the target."""
        s = self._settings
        policy, topic_filter = s.policy(), s.topic_filter()
        source_topics = list_topics(self._client("source_admin"), what=f"source cluster {s.source}")
        target_topics = list_topics(self._client("target_admin"), what=f"target cluster {s.target}")
        keys = []
        for name, description in source_topics.items():
            selected = should_replicate_topic(
                name,
                topic_filter=topic_filter,
                policy=policy,
                target_alias=s.target,
                heartbeats_replication_enabled=s.heartbeats_replication,
            )
            remote = target_topics.get(s.remote_topic(name)) if selected else None
            if remote is not None:
                # Partitions the topic sync has not added on the target yet wait for it.
                keys += [position_key(name, p) for p in range(min(description.partitions, remote.partitions))]
        return sorted(keys)

    def _start_positions(self, keys: Sequence[str]) -> Positions:
        """Where each partition starts: its committed position, else the source's earliest offset."""
        s = self._settings
        partitions = [parse_position_key(key) for key in keys]
        committed = committed_positions(
            self._client("positions"), [(s.remote_topic(t), p) for t, p in partitions]
        )
        missing = [(t, p) for t, p in partitions if (s.remote_topic(t), p) not in committed]
        earliest = earliest_offsets(self._client("source_admin"), missing)
        positions = {}
        for topic, partition in partitions:
            key = position_key(topic, partition)
            found = committed.get((s.remote_topic(topic), partition))
            positions[key] = found if found is not None else earliest[(topic, partition)]
        return sorted_positions(positions)

    def initialOffset(self) -> dict[str, int]:
        return self._start_positions(self._replicable())

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._settings.max_records_per_batch)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if self._stop_file is not None and self._stop_file.exists():
            return start  # stopping: plan no new batch, so none is cut off mid-transaction
        try:
            end = self._plan(start, limit)
        except SourceTruncatedError:
            raise  # on_source_truncation: fail; the user decides
        except MirrorError as exc:
            # A cluster away for a while: plan nothing now and try again, a little later each time.
            self._failures += 1
            delay = min(0.5 * 2**self._failures, MAX_PLANNING_BACKOFF_SECONDS)
            log.warning("flow %s: planning failed (%s); retrying in %.1fs", self._settings.name, exc, delay)
            time.sleep(delay)
            return start
        self._failures = 0
        return end

    def _plan(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        keys = self._replicable()
        stable = last_stable_offsets(self._client("source_admin"), [parse_position_key(key) for key in keys])
        available = {position_key(topic, partition): offset for (topic, partition), offset in stable.items()}
        new = self._start_positions([key for key in keys if key not in start])
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        self._latest = sorted_positions({**start, **available})
        end = plan_end(start, available, max_records, new)
        rewound = {key: stable for key, stable in available.items() if key in start and stable < start[key]}
        if rewound:
            # plan_end never moves backwards; these partitions restart in the batch after this one.
            end = sorted_positions({**end, **self._restart_rewound(start, rewound)})
        return end

    def _restart_rewound(self, start: dict[str, int], rewound: dict[str, int]) -> dict[str, int]:
        """Partitions whose source now ends below what was copied: the topic was deleted and re-created.

        Runs between batches (Spark plans batch N+1 after batch N finished), so no range of these
        partitions is in flight. With `continue`, they restart at the new topic's first offset, in
        Spark's offsets and in the positions group the copier trusts.
        """
        s = self._settings
        partitions = [parse_position_key(key) for key in rewound]
        earliest = earliest_offsets(self._client("source_admin"), partitions)
        restarted: dict[str, int] = {}
        for key, (topic, partition) in zip(rewound, partitions, strict=True):
            message = (
                f"flow {s.name}: {topic}-{partition}: the source partition now ends at offset "
                f"{rewound[key]}, below the {start[key]} records already copied: the topic was deleted "
                "and re-created"
            )
            if s.on_source_truncation == "fail":
                raise SourceTruncatedError(
                    f"{message}; set on_source_truncation: continue to copy the new topic from its start"
                )
            restarted[key] = earliest[(topic, partition)]
            log.error("%s; copying the new topic's records from offset %d", message, restarted[key])
        commit_positions(
            self._client("positions"),
            {(s.remote_topic(t), p): restarted[position_key(t, p)] for t, p in partitions},
        )
        return restarted

    def reportLatestOffset(self) -> dict[str, int] | None:
        return self._latest

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [RangePartition(r.topic, r.partition, r.start, r.end) for r in ranges_between(start, end)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Executor side: copy the range (one target transaction), yield its stats."""
        if not isinstance(partition, RangePartition):
            raise TypeError(f"mirror_source got a {type(partition).__name__}, not a RangePartition")
        source_range = SourcePartitionRange(
            partition.topic, partition.partition, partition.start, partition.end
        )
        yield astuple(copy_range(self._settings, source_range))

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: positions are committed on the target, in each range's transaction."""


class MirrorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mirror_source"

    def schema(self) -> str:
        return STATS_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MirrorSourceReader(dict(self.options))
