"""A flow under `mirror run`: its streaming queries (source, checkpoint, heartbeat) and their state.

Driver only. How each query starts, how a failed one is read (one line, and whether only the
user can fix it), how one is drained at shutdown, and what the driver makes of every checkpoint
and heartbeat round. The supervisor (mirror.runner.supervisor) decides when.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from mirror.checkpoint.job import start_checkpoint_query
from mirror.config.flow_settings import FlowSettings
from mirror.config.models import FlowConfig
from mirror.errors import ReplicationError
from mirror.heartbeat.job import start_heartbeat_query
from mirror.metrics import CheckpointMetrics, HeartbeatMetrics
from mirror.runner.cluster_answers import Silence
from mirror.runner.progress import FlowProgress, LagReader
from mirror.source.connector import SourceConnector
from mirror.source.job import start_copy_query
from mirror.source.lease import FlowLease
from mirror.topics.sync import TopicSync

# Failures only the user can fix; anything else (a cluster away for a while) restarts the query.
USER_ERRORS = (
    "RecordTooLargeError",
    "RecordRejectedError",
    "SourceTruncatedError",
    "RemoteTopicDeletedError",
    "NotAuthorizedError",
)
_MIRROR_ERROR_LINE = re.compile(r"(?:mirror\.errors\.)?(\w+Error): (flow [^\n]+)")


@dataclass
class Component:
    """One of a flow's streaming queries (source, checkpoint, heartbeat) and its restart state."""

    name: str
    start: Callable[[], StreamingQuery]
    query: StreamingQuery | None = None
    restarts: int = 0
    restart_at: float | None = None


@dataclass
class Flow:
    settings: FlowSettings
    config: FlowConfig
    topic_sync: TopicSync
    connector: SourceConnector
    stop_file: Path
    lag: LagReader
    # Whether the source and the target answer (one line when one stops, one when it is back).
    answers: tuple[Silence, Silence]
    progress: FlowProgress = field(default_factory=FlowProgress)
    components: list[Component] = field(default_factory=list)
    # Groups last seen with members on the target, reported once when they become so.
    active_groups: set[str] = field(default_factory=set)
    # Heartbeat pairs ("B->A") whose last write failed, reported once until they recover.
    failing_heartbeats: set[str] = field(default_factory=set)
    checkpointed_groups: int = 0

    def check_clusters(self, now: float) -> None:
        """Say once if the source or the target stopped answering, and once when it is back."""
        source, target = self.answers
        source.check(
            self.lag.source_unanswered_since,
            self.lag.source_problem,
            now,
            in_part=self.lag.source_answers_in_part,
        )
        # Renewals never stop: the last one that committed is where a silence starts.
        target.check(self.lease.last_renewed, self.lease.problem, now)

    @property
    def lease(self) -> FlowLease:
        assert self.connector.lease is not None, "the lease is taken when the flow starts"  # noqa: S101
        return self.connector.lease


def flow_components(
    spark: SparkSession,
    flow: Flow,
    state: Path,
    stats_address: tuple[str, int],
    *,
    on_checkpoint_round: Callable[[list[dict[str, Any]]], None],
    on_heartbeat_round: Callable[[list[dict[str, Any]]], None],
) -> list[Component]:
    """The flow's queries, source first; `state` is the flow's directory of Spark checkpoints."""
    settings, config = flow.settings, flow.config
    components = [
        Component(
            "source",
            lambda: start_copy_query(
                spark,
                settings,
                checkpoint_dir=state / "source",
                assignment_file=flow.connector.assignment_file,
                stop_file=flow.stop_file,
                stats_address=stats_address,
            ),
        )
    ]
    if config.emit_checkpoints:
        components.append(
            Component(
                "checkpoint",
                lambda: start_checkpoint_query(
                    spark,
                    settings,
                    interval_seconds=config.emit_checkpoints_interval_seconds,
                    checkpoint_dir=state / "checkpoint",
                    stop_file=flow.stop_file,
                    on_round=lambda _settings, rows: on_checkpoint_round(rows),
                ),
            )
        )
    if settings.emit_heartbeats or settings.reverse_heartbeats:
        components.append(
            Component(
                "heartbeat",
                lambda: start_heartbeat_query(
                    spark,
                    settings,
                    interval_seconds=config.emit_heartbeats_interval_seconds,
                    checkpoint_dir=state / "heartbeat",
                    stop_file=flow.stop_file,
                    on_round=lambda _settings, rows: on_heartbeat_round(rows),
                ),
            )
        )
    return components


def on_heartbeat_round(
    flow: Flow, rows: list[dict[str, Any]], metrics: HeartbeatMetrics, out: Callable[[str], None]
) -> None:
    metrics.record_round(rows)
    for row in rows:
        pair = f"{row['source']}->{row['target']}"
        if row["kind"] == "failed" and pair not in flow.failing_heartbeats:
            flow.failing_heartbeats.add(pair)
            out(f"{row['path']}; retrying every round")
        elif row["kind"] == "emitted" and pair in flow.failing_heartbeats:
            flow.failing_heartbeats.discard(pair)
            out(f"flow {flow.settings.name}: heartbeats {pair} written again")


def on_checkpoint_round(
    flow: Flow, rows: list[dict[str, Any]], metrics: CheckpointMetrics, out: Callable[[str], None]
) -> None:
    metrics.record_round(flow.settings.name, rows)
    flow.checkpointed_groups = len({row["group"] for row in rows if row["kind"] == "checkpoint"})
    outcomes = {row["group"]: row["outcome"] for row in rows if row["kind"] == "group"}
    for group, outcome in sorted(outcomes.items()):
        if outcome == "active" and group not in flow.active_groups:
            flow.active_groups.add(group)
            out(
                f"flow {flow.settings.name}: group {group} has members on {flow.settings.target}; "
                "its offsets there are left alone until it is empty"
            )
        elif outcome in ("synced", "unchanged") and group in flow.active_groups:
            # Not on "failed": a member leaving can make the first write after it be refused;
            # the group stays pending until a round has really brought it up to date.
            flow.active_groups.discard(group)
            out(f"flow {flow.settings.name}: group {group} is empty again and now synced")


def drain(query: StreamingQuery | None, deadline: float) -> None:
    """Nothing new is planned now; wait for the batch in flight so its transactions commit, then stop.

    No batch is in flight once the status says no data is available, or no trigger is active; each
    query kind shows it one way only. A copy query that is stopping asks its planner for an epoch
    again and again (each answer "none"), so a trigger is active nearly all the time: waiting for a
    moment without one took 10 s and more. A round query (checkpoint, heartbeat) ends its batch early
    on the stop file, but keeps "data available" from that batch until its next trigger, up to 10 s
    later: waiting for that took most of a `mirror run`'s stop (3-8 s of 3-9 s).
    Two answers in a row: a guard, not a proof. A batch still being planned reads "no data" too; a
    copy batch planned as the stop file appeared opens nothing (the task checks the file first), and a
    round cut short leaves its transaction to the next run's fence or its timeout."""
    quiet = 0
    while query is not None and query.isActive and time.monotonic() < deadline:
        status = query.status
        quiet = 0 if status["isDataAvailable"] and status["isTriggerActive"] else quiet + 1
        if quiet == 2:
            break
        time.sleep(0.1)
    if query is not None and query.isActive:
        query.stop()


def flow_dir_name(settings: FlowSettings) -> str:
    return f"{settings.source}-{settings.target}"


def query_error(settings: FlowSettings, query: StreamingQuery) -> tuple[str, ReplicationError]:
    """(error class name, one-line error) from a failed query's exception text."""
    exception = query.exception()
    text = str(exception) if exception is not None else "the query stopped"
    match = _MIRROR_ERROR_LINE.search(text)
    if match:
        return match.group(1), ReplicationError(match.group(2).strip())
    return "SparkError", ReplicationError(
        f"flow {settings.name}: replication failed: {failure_line(text)[:300]}"
    )


def failure_line(text: str) -> str:
    """The line of a query's exception text that says what failed.

    A Python worker's failure arrives as Spark's first line ending in "Traceback (most recent call
    last):", then the frames, indented, then the exception's own line: that one names the problem.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.rstrip().endswith("Traceback (most recent call last):"):
            raised = next((later for later in lines[index + 1 :] if later[:1] not in ("", " ", "\t")), None)
            if raised is not None:
                return f"a Python worker raised {raised.strip()}"
    return next((line.strip() for line in lines if line.strip()), text)
