"""A flow's background jobs on the supervisor's scheduler: topic refresh, topic config and ACL sync,
lease renewal and the lag reading. Each job's failures are retried at its next interval and counted
(`mirror_background_jobs_total`), except a takeover of the flow, which ends the run."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler

from mirror.errors import FlowTakenOverError, MirrorError
from mirror.metrics import RunMetrics
from mirror.runner.components import Flow
from mirror.source.lease import RENEW_SECONDS
from mirror.verify.job import verify_flow

log = logging.getLogger(__name__)


def schedule_flow_jobs(
    scheduler: BackgroundScheduler,
    flow: Flow,
    metrics: RunMetrics,
    fail: Callable[[MirrorError], None],
    *,
    lag_seconds: float,
) -> None:
    name, config, sync = flow.settings.name, flow.config, flow.topic_sync
    changes = metrics.topic_changes

    def guarded(job: Callable[[], object], what: str) -> Callable[[], None]:
        # Both outcomes exist from the start: a counter first scraped at 1 shows no increase.
        # (Its label is `operation`: Prometheus keeps `job` for the scrape job.)
        operation = what.replace(" ", "_").lower()
        failed, ok = (metrics.jobs.labels(name, operation, outcome) for outcome in ("failed", "ok"))

        def run() -> None:
            try:
                job()
            except FlowTakenOverError as exc:
                fail(exc)
            except MirrorError as exc:  # retried at the next interval
                failed.inc()
                log.warning("flow %s: %s failed: %s", name, what, exc)
            else:
                ok.inc()

        return run

    def refresh() -> None:
        result = sync.sync()
        changes.labels(name, "topics_created").inc(result.created)
        changes.labels(name, "partitions_added").inc(result.grown)
        flow.connector.refresh()  # a new copy generation if partitions were added or removed

    jobs: list[tuple[bool, float, Callable[[], object], str]] = [
        (config.refresh_topics, config.refresh_topics_interval_seconds, refresh, "topic refresh"),
        (
            config.sync_topic_configs,
            config.sync_topic_configs_interval_seconds,
            lambda: changes.labels(name, "config_entries").inc(sync.sync_configs()),
            "topic config sync",
        ),
        (
            config.sync_topic_acls,
            config.sync_topic_acls_interval_seconds,
            lambda: changes.labels(name, "acls").inc(sync.sync_acls()),
            "topic ACL sync",
        ),
        (True, RENEW_SECONDS, flow.lease.renew, "lease renewal"),
    ]
    for enabled, seconds, job, what in jobs:
        if enabled:
            scheduler.add_job(guarded(job, what), "interval", seconds=seconds)
    if config.verify_interval_seconds is not None:
        scheduler.add_job(
            guarded(lambda: _verify(flow, metrics), "verify"),
            "interval",
            seconds=config.verify_interval_seconds,
        )

    def read_lag() -> None:
        published = flow.connector.published
        flow.lag.refresh(sync.selected_partitions, published.assignment.partitions if published else set())

    scheduler.add_job(read_lag, "interval", seconds=lag_seconds, next_run_time=datetime.now(UTC))


def _verify(flow: Flow, metrics: RunMetrics) -> None:
    """`mirror verify` of the flow while it runs: its ranges are anchored, so copying meanwhile is fine."""
    name = flow.settings.name
    report = verify_flow(flow.settings, workers=1)  # one reader per cluster: the copy comes first
    found = {
        "missing": report.diff_total("missing"),
        "extra": report.diff_total("extra") + report.total("extra_after"),
        "changed": report.diff_total("changed"),
        "uncompared_partitions": report.uncompared,
    }
    for kind, count in found.items():
        metrics.verify_mismatched.labels(name, kind).set(count)
    metrics.verify_records.labels(name).set(report.total("records"))
    metrics.verify_finished.labels(name).set(time.time())
    for part in report.partitions:
        d = part.diff
        if part.differs:
            log.warning(
                "flow %s: verify: %s-%d differs from its copy: %d missing, %d extra, %d changed, the first "
                "at source offset %s; `mirror verify` names them",
                name, part.topic, part.partition, d.missing, d.extra + part.extra_after, d.changed,
                d.first_source_offset,
            )  # fmt: skip
        elif part.uncompared:
            log.warning(
                "flow %s: verify: %s-%d not compared: %s", name, part.topic, part.partition, part.skipped
            )
