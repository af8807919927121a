"""`mirror run`: prepare every enabled flow, run its queries, report progress, stop cleanly.

Per flow, three streaming queries (mirror.runner.components): source (copies records),
checkpoint (translates group offsets), heartbeat (emits and watches heartbeats). Each restarts
on its own after a failure.

Driver only. Order at start, per flow: reach both clusters, create internal topics, take the
flow's lease (fencing an older instance and its copy tasks), create remote topics, take the
flow's positions from its offsets topic, publish the assignment, then start the query. On
SIGINT/SIGTERM the planner stops issuing batches, the batch in flight finishes (its transactions
commit), and only then are the queries stopped.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from mirror.config.flow_settings import FlowSettings, flow_settings
from mirror.config.models import FlowConfig, MirrorConfig
from mirror.errors import ConfigError, FlowTakenOverError, MirrorError
from mirror.metrics import CheckpointMetrics, HeartbeatMetrics, RunMetrics, SourceMetrics, serve
from mirror.runner.cluster_answers import TARGET_LATE_SECONDS, flow_silences
from mirror.runner.components import (
    USER_ERRORS,
    Component,
    Flow,
    drain,
    flow_components,
    flow_dir_name,
    on_checkpoint_round,
    on_heartbeat_round,
    query_error,
)
from mirror.runner.copy_producer import choose_copy_producer
from mirror.runner.flow_jobs import schedule_flow_jobs
from mirror.runner.preflight import check_state_dir, reach_clusters
from mirror.runner.progress import LagReader, percentile, stats_handler
from mirror.source.connector import SourceConnector
from mirror.source.stats import StatsServer
from mirror.spark.session import build_session, driver_host
from mirror.spark.signals import threads_without_signals
from mirror.topics.sync import TopicSync

log = logging.getLogger("mirror")

PROGRESS_SECONDS = 5.0
DRAIN_SECONDS = 60.0
ROUNDS_DELAY_SECONDS = 15.0
RESTART_BACKOFF_SECONDS = (2.0, 5.0, 10.0, 30.0, 60.0)
EXIT_OK, EXIT_FAILED = 0, 1


class Supervisor:
    def __init__(
        self,
        config: MirrorConfig,
        *,
        out: Callable[[str], None] = print,
        stop: threading.Event | None = None,
        log_format: str = "text",
        log_debug: bool = False,
    ) -> None:
        self._config = config
        self._log_format, self._log_debug = log_format, log_debug
        self._out = out
        self._stop = stop if stop is not None else threading.Event()
        self.instance_id = uuid.uuid4().hex
        self._failure: MirrorError | None = None
        self._flows: list[Flow] = []
        self._spark: SparkSession | None = None
        self._state_dir = Path(config.spark.checkpoint_dir)
        self.registry = CollectorRegistry()
        self._metrics = SourceMetrics(self.registry, per_partition=config.metrics.per_partition)
        self._checkpoint_metrics = CheckpointMetrics(self.registry)
        self._heartbeat_metrics = HeartbeatMetrics(self.registry)
        self._run_metrics = RunMetrics(self.registry)
        self._stats: StatsServer | None = None

    def request_stop(self, *_: Any) -> None:
        self._stop.set()

    def _fail(self, error: MirrorError) -> None:
        if self._failure is None:
            self._failure = error
        self._stop.set()

    def run(self) -> int:
        enabled = [
            (
                flow_settings(
                    self._config,
                    source,
                    target,
                    flow,
                    instance_id=self.instance_id,
                    log_format=self._log_format,
                    log_debug=self._log_debug,
                ),
                flow,
            )
            for source, target, flow in self._config.flow_endpoints()
            if flow.enabled
        ]
        if not enabled:
            raise ConfigError(["no enabled flow in the configuration; set enabled: true on a flow"])
        enabled = [(choose_copy_producer(settings, flow, self._out), flow) for settings, flow in enabled]
        # Installed first: a stop requested during start-up is honoured, never a default kill.
        previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        # A run due while the driver was starved of CPU runs late rather than not at all: with
        # APScheduler's default grace of 1 s, a loaded machine skipped config syncs unseen.
        scheduler = BackgroundScheduler(
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        )
        try:
            self._start(enabled, scheduler)
            if not self._stop.is_set():
                self._supervise()
        finally:
            self._shutdown(scheduler)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self._failure is not None:
            raise self._failure
        return EXIT_OK

    def _start(self, enabled: list[tuple[FlowSettings, FlowConfig]], scheduler: BackgroundScheduler) -> None:
        metrics = self._config.metrics
        check_state_dir(self._config, self._state_dir, self.instance_id)
        with threads_without_signals():
            if metrics.enabled:
                serve(self.registry, metrics.host, metrics.port)
            self._stats = StatsServer(driver_host(self._config.spark), self._on_stats)
        reach_clusters(self._config, [settings for settings, _ in enabled])
        # The JVM takes seconds to start: the flows' preparation on Kafka (topics, lease, fencing,
        # positions) runs meanwhile, on a thread that leaves the stop signals to this one.
        with threads_without_signals(), ThreadPoolExecutor(1, thread_name_prefix="prepare") as pool:
            preparing = pool.submit(self._prepare_flows, enabled)
            copy_tasks = sum(settings.tasks_max for settings, _ in enabled)
            try:
                self._spark = build_session(self._config.spark, copy_tasks=copy_tasks, flows=len(enabled))
            finally:
                preparing.result()  # its failure, if any, is the one to report
        log.debug("Spark session ready")
        if self._stop.is_set():
            return
        # SparkContext replaces the SIGINT handler with one that cancels every job mid-transaction;
        # Ctrl-C must instead let the tasks commit what they hold, as SIGTERM does.
        signal.signal(signal.SIGINT, self.request_stop)
        for flow in self._flows:
            if self._stop.is_set():
                return
            self._metrics.record_throttle(flow.settings.name, flow.settings.throttle_bytes_per_second)
            flow.components = self._components(flow)
            self._start_component(flow.components[0])
            self._schedule(scheduler, flow)
        scheduler.start()
        # The checkpoint and heartbeat queries start once the copy tasks copy: on 2 cores, their
        # planner processes and first rounds would otherwise delay the first record by seconds.
        deadline = time.monotonic() + ROUNDS_DELAY_SECONDS
        while not self._stop.is_set() and time.monotonic() < deadline:
            if all(flow.progress.epoch for flow in self._flows):
                break
            self._stop.wait(0.1)
        for flow in self._flows:
            for component in flow.components[1:]:
                if not self._stop.is_set():
                    self._start_component(component)

    def _prepare_flows(self, enabled: list[tuple[FlowSettings, FlowConfig]]) -> None:
        for settings, flow_config in enabled:
            if self._stop.is_set():
                return
            self._flows.append(self._prepare(settings, flow_config, self._state_dir))

    def _components(self, flow: Flow) -> list[Component]:
        spark = self._spark
        assert spark is not None, "the Spark session starts before any query"  # noqa: S101
        stats = self._stats
        assert stats is not None, "the stats server starts before any query"  # noqa: S101
        return flow_components(
            spark,
            flow,
            self._state_dir / flow_dir_name(flow.settings),
            stats.address,
            on_checkpoint_round=lambda rows: on_checkpoint_round(
                flow, rows, self._checkpoint_metrics, self._out
            ),
            on_heartbeat_round=lambda rows: on_heartbeat_round(
                flow, rows, self._heartbeat_metrics, self._out
            ),
        )

    def _start_component(self, component: Component) -> None:
        assert self._spark is not None, "the Spark session starts before any query"  # noqa: S101
        # Each component gets its own fair-share pool, so a heartbeat never queues behind a
        # source batch's copy tasks for longer than one task.
        self._spark.sparkContext.setLocalProperty("spark.scheduler.pool", component.name)
        component.query = component.start()
        log.debug("%s query started", component.name)

    def _prepare(self, settings: FlowSettings, flow_config: FlowConfig, state_dir: Path) -> Flow:
        if flow_config.max_records_per_batch is not None:
            self._out(
                f"flow {settings.name}: warning: max_records_per_batch no longer applies (copy tasks "
                f"commit every commit_interval_ms, {settings.commit_interval_ms} ms); remove it from the "
                "configuration"
            )
        if settings.exactly_once:
            self._out(
                f"flow {settings.name}: exactly-once (records, positions and offset syncs commit together, "
                f"through {settings.copy_producer}'s producer)"
            )
        else:
            self._out(
                f"flow {settings.name}: at-least-once (exactly_once: false); after a crash, "
                "records since the last commit may be copied twice"
            )
        topic_sync = TopicSync(settings)
        topic_sync.ensure_internal_topics()
        flow_dir = state_dir / flow_dir_name(settings)
        flow_dir.mkdir(parents=True, exist_ok=True)
        stop_file = flow_dir / "stopping"
        stop_file.unlink(missing_ok=True)
        # Takes the lease and fences every copy task of earlier runs, before the remote topics are
        # made (SourceConnector.take says why); publishes the assignment after them.
        connector = SourceConnector(settings, topic_sync, flow_dir, self._out)
        connector.take()
        created = topic_sync.sync().created_topics
        policy = settings.policy()
        # Heartbeats topics are copied whatever the filter says; they do not count as a match.
        if all(policy.is_heartbeats_topic(topic) for topic in topic_sync.selected_topics()):
            self._out(
                f"flow {settings.name}: warning: no topic on {settings.source} matches topics "
                f"{settings.topics} (topics_exclude {settings.topics_exclude}); nothing to copy until one "
                f"is created{' (checked every refresh)' if flow_config.refresh_topics else ''}"
            )
        if flow_config.sync_topic_configs:
            # Before the first copy: a remote topic created by hand with other configs (say
            # cleanup.policy=compact) would refuse records its source topic takes.
            # Topics the sync just made carry their source's configs already: at 10,000 partitions,
            # describing them again on a target still creating them took 4.5 s of the start.
            topic_sync.sync_configs(skip=created)
        connector.start()
        answers = flow_silences(settings, self._out)
        return Flow(settings, flow_config, topic_sync, connector, stop_file, LagReader(settings), answers)

    def _schedule(self, scheduler: BackgroundScheduler, flow: Flow) -> None:
        schedule_flow_jobs(scheduler, flow, self._run_metrics, self._fail, lag_seconds=PROGRESS_SECONDS)

    def _supervise(self) -> None:
        next_report = time.monotonic() + PROGRESS_SECONDS
        while not self._stop.wait(0.5):
            for flow in self._flows:
                for component in flow.components:
                    self._check_component(flow, component)
            if time.monotonic() >= next_report:
                next_report += PROGRESS_SECONDS
                for flow in self._flows:
                    try:
                        self._report(flow)
                    except Exception:
                        log.warning("flow %s: progress report failed", flow.settings.name, exc_info=True)

    def _check_component(self, flow: Flow, component: Component) -> None:
        up = self._run_metrics.component_up.labels(flow.settings.name, component.name)
        if component.restart_at is not None:
            up.set(0)
            if time.monotonic() >= component.restart_at:
                component.restart_at = None
                self._start_component(component)
            return
        # One py4j round trip per component and check (twice a second): asked once.
        active = component.query is not None and component.query.isActive
        up.set(1 if active else 0)
        if component.query is None or active:
            return
        kind, error = query_error(flow.settings, component.query)
        self._metrics.errors.labels(flow.settings.name, kind).inc()
        if kind == "FlowTakenOverError":
            self._fail(FlowTakenOverError(str(error)))
            return
        if kind in USER_ERRORS:
            self._fail(error)
            return
        delay = RESTART_BACKOFF_SECONDS[min(component.restarts, len(RESTART_BACKOFF_SECONDS) - 1)]
        component.restarts += 1
        component.restart_at = time.monotonic() + delay
        # Safe: what was committed is on the target, and the restarted query starts from there.
        self._out(f"{error}; restarting the {component.name} component in {delay:g}s")

    def _on_stats(self, message: dict[str, Any]) -> None:
        flow = next((f for f in self._flows if f.settings.name == message["flow"]), None)
        if flow is not None:
            stats_handler(flow.progress, self._metrics, self._out)(message)

    def _report(self, flow: Flow) -> None:
        records_per_second, bytes_per_second, latencies = flow.progress.take_window()
        lag = flow.lag.latest
        self._metrics.record_lag(flow.settings.name, lag)
        if lag is not None:
            lag_text = f"{sum(lag.values()):,} records"
        else:
            age = flow.lag.age_seconds
            lag_text = "unknown" + (f" (last read {age:.0f}s ago)" if age is not None else "")
        latency = (
            f", latency p50 {percentile(latencies, 50):.2f}s p99 {percentile(latencies, 99):.2f}s"
            if latencies
            else ""
        )
        now = time.monotonic()
        flow.check_clusters(now)
        silent = now - flow.lease.last_renewed
        health = (
            f"; {flow.settings.target} not answering for {silent:.0f}s, retrying"
            if silent > TARGET_LATE_SECONDS
            else ""
        )
        groups = f", {flow.checkpointed_groups} groups checkpointed" if flow.checkpointed_groups else ""
        self._out(
            f"flow {flow.settings.name}: {records_per_second:,.0f} records/s, "
            f"{bytes_per_second / 1e6:,.2f} MB/s, lag {lag_text}{latency}, {flow.progress.records:,} copied"
            f"{groups}{health}"
        )

    def _shutdown(self, scheduler: BackgroundScheduler) -> None:
        # A job in flight (a topic refresh listing a cluster that is down waits up to 30 s) finishes
        # while the queries drain, not before; the clients it uses close only once it has.
        jobs_done = threading.Thread(target=self._stop_jobs, args=(scheduler,), name="mirror-stop-jobs")
        jobs_done.start()
        for flow in self._flows:
            flow.stop_file.touch()
            try:
                flow.connector.stop_tasks()
            except FlowTakenOverError:
                pass  # the new owner's generation ends this instance's tasks; its line says so
            except MirrorError as exc:
                log.warning("flow %s: could not tell the copy tasks to stop: %s", flow.settings.name, exc)
        deadline = time.monotonic() + DRAIN_SECONDS
        for flow in self._flows:
            for component in flow.components:
                try:
                    drain(component.query, deadline)
                except Py4JError:
                    # The JVM went first (a signal to the whole process group): nothing left to stop,
                    # and what it had in flight is aborted or fenced by the next run.
                    log.info("flow %s: %s query already gone", flow.settings.name, component.name)
        jobs_done.join()
        for flow in self._flows:
            flow.lease.close()
            flow.lag.close()
            flow.stop_file.unlink(missing_ok=True)
        if self._stats is not None:
            self._stats.close()
        log.info("stopped")

    @staticmethod
    def _stop_jobs(scheduler: BackgroundScheduler) -> None:
        if scheduler.running:
            scheduler.shutdown(wait=True)
