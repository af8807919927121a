"""What each of mirror's three dashboards shows: its panels, their queries and its variables."""

from __future__ import annotations

from grafana_model import (
    RATE,
    Dashboard,
    Panel,
    Query,
    datasource_variable,
    flows_variable,
    or_zero,
    quantile,
)


def overview() -> Dashboard:
    f = 'flow=~"$flow"'
    p = 'path=~"$flow"'
    panels = [
        Panel(
            "Components up",
            "stat",
            [Query(f"sum(mirror_component_up{{{f}}})", instant=True)],
            width=4,
            height=4,
            description="Streaming queries running (source, checkpoint, heartbeat per flow); "
            "one waiting to be restarted counts 0",
        ),
        Panel(
            "Records/s",
            "stat",
            [Query(f"sum(rate(mirror_source_records_total{{{f}}}[{RATE}]))")],
            unit="ops",
            width=4,
            height=4,
        ),
        Panel(
            "Lag (records)",
            "stat",
            [Query(f"sum(mirror_source_lag_records{{{f}}})")],
            width=4,
            height=4,
            thresholds=[(10_000, "orange"), (100_000, "red")],
        ),
        Panel(
            "Worst heartbeat age (RPO)",
            "stat",
            [Query(f"max(mirror_heartbeat_age_seconds{{{p}}})")],
            unit="s",
            width=4,
            height=4,
            thresholds=[(60, "orange"), (300, "red")],
        ),
        Panel(
            "Worst checkpoint delay",
            "stat",
            [Query(f"max(mirror_checkpoint_delay_seconds{{{f}}})")],
            unit="s",
            width=4,
            height=4,
            thresholds=[(60, "orange"), (300, "red")],
        ),
        Panel(
            "Errors (1h)",
            "stat",
            [
                # A kind's counter is born at its first error: a series new within the hour counts
                # whole, the others by their increase.
                Query(
                    f"sum((mirror_errors_total{{{f}}} unless mirror_errors_total{{{f}}} offset 1h)"
                    f" or increase(mirror_errors_total{{{f}}}[1h])) or vector(0)"
                )
            ],
            width=4,
            height=4,
            thresholds=[(1, "red")],
        ),
        Panel(
            "Records/s by flow",
            "timeseries",
            [Query(f"sum by (flow) (rate(mirror_source_records_total{{{f}}}[{RATE}]))", "{{flow}}")],
            unit="ops",
        ),
        Panel(
            "Bytes/s by flow",
            "timeseries",
            [Query(f"sum by (flow) (rate(mirror_source_bytes_total{{{f}}}[{RATE}]))", "{{flow}}")],
            unit="Bps",
        ),
        Panel(
            "Lag by flow (records)",
            "timeseries",
            [Query(f"sum by (flow) (mirror_source_lag_records{{{f}}})", "{{flow}}")],
            description="Source end offset minus the committed position, summed over the flow's partitions",
        ),
        Panel(
            "Replication latency p50 / p99",
            "timeseries",
            [
                Query(quantile(0.5, "mirror_source_replication_latency_seconds", f), "{{flow}} p50"),
                Query(quantile(0.99, "mirror_source_replication_latency_seconds", f), "{{flow}} p99"),
            ],
            unit="s",
            description="Per committed transaction: its oldest record's timestamp to its commit",
        ),
        Panel(
            "Heartbeat age by replication path (RPO)",
            "timeseries",
            [Query(f"max by (path) (mirror_heartbeat_age_seconds{{{p}}})", "{{path}}")],
            unit="s",
            description="Age of the newest heartbeat that arrived along each path: "
            "data on the target is at most this old",
        ),
        Panel(
            "Heartbeat replication delay",
            "timeseries",
            [Query(f"max by (path) (mirror_heartbeat_replication_delay_seconds{{{p}}})", "{{path}}")],
            unit="s",
        ),
        Panel(
            "Checkpoint delay (worst group)",
            "timeseries",
            [Query(f"max by (flow) (mirror_checkpoint_delay_seconds{{{f}}})", "{{flow}}")],
            unit="s",
        ),
        Panel(
            "Errors, fenced producers, truncated records (since start)",
            "timeseries",
            # Totals rather than rates: these counters are born at their first event, above zero,
            # where increase() sees nothing; a step in the total is what an operator looks for.
            [
                Query(
                    or_zero(f"sum by (flow, kind) (mirror_errors_total{{{f}}})", f), "{{flow}} error {{kind}}"
                ),
                Query(f"sum by (flow) (mirror_source_producers_fenced_total{{{f}}})", "{{flow}} fenced"),
                Query(
                    or_zero(f"sum by (flow) (mirror_source_truncated_records_total{{{f}}})", f),
                    "{{flow}} truncated",
                ),
                Query(
                    or_zero(f"sum by (flow) (mirror_source_copied_then_lost_records_total{{{f}}})", f),
                    "{{flow}} copied, then lost by the source",
                ),
                Query(
                    or_zero(
                        "sum by (flow, operation) "
                        f'(increase(mirror_background_jobs_total{{{f}, outcome="failed"}}[{RATE}]))',
                        f,
                    ),
                    "{{flow}} {{operation}} failed",
                ),
            ],
        ),
        Panel(
            "CPU (mirror, Spark JVM and workers)",
            "timeseries",
            [Query(f"rate(mirror_process_tree_cpu_seconds_total[{RATE}])", "{{instance}}")],
            unit="percentunit",
        ),
        Panel(
            "Memory (resident, whole process tree)",
            "timeseries",
            [Query("mirror_process_tree_resident_memory_bytes", "{{instance}}")],
            unit="bytes",
        ),
    ]
    return Dashboard(
        "mirror-overview",
        "mirror: overview",
        "Every flow at a glance: throughput, lag, latency, RPO (heartbeat age), checkpoints, errors",
        panels,
        [datasource_variable(), flows_variable(multi=True)],
    )


def flow() -> Dashboard:
    f = 'flow=~"$flow"'
    panels = [
        Panel(
            "Top 20 partitions by lag",
            "table",
            [Query(f"topk(20, mirror_source_lag_records{{{f}}})")],
            width=12,
            height=10,
        ),
        Panel(
            "Top 20 partitions by record age at commit",
            "table",
            [Query(f"topk(20, mirror_source_record_age_seconds{{{f}}})")],
            unit="s",
            width=12,
            height=10,
        ),
        Panel(
            "Records/s by topic",
            "timeseries",
            [Query(f"sum by (topic) (rate(mirror_source_records_total{{{f}}}[{RATE}]))", "{{topic}}")],
            unit="ops",
        ),
        Panel(
            "Lag by topic",
            "timeseries",
            [Query(f"sum by (topic) (mirror_source_lag_records{{{f}}})", "{{topic}}")],
        ),
        Panel(
            "Copy transactions/s",
            "timeseries",
            [
                Query(
                    f"sum by (outcome) (rate(mirror_source_transactions_total{{{f}}}[{RATE}]))", "{{outcome}}"
                )
            ],
            unit="ops",
        ),
        Panel(
            "Replication latency p99 and gaps between epochs",
            "timeseries",
            [
                Query(quantile(0.99, "mirror_source_replication_latency_seconds", f), "latency p99"),
                Query(quantile(0.99, "mirror_source_epoch_gap_seconds", f), "epoch gap p99"),
            ],
            unit="s",
        ),
        Panel(
            "Topic sync: what changed on the target",
            "timeseries",
            [Query(f"sum by (kind) (increase(mirror_topic_sync_changes_total{{{f}}}[{RATE}]))", "{{kind}}")],
        ),
        Panel(
            "Background jobs",
            "timeseries",
            [
                Query(
                    f"sum by (operation, outcome) (increase(mirror_background_jobs_total{{{f}}}[{RATE}]))",
                    "{{operation}} {{outcome}}",
                )
            ],
        ),
        Panel(
            "Components",
            "timeseries",
            [Query(f"mirror_component_up{{{f}}}", "{{component}}")],
            description="1 running, 0 waiting to be restarted",
        ),
        Panel(
            "Records deleted on the source before they were copied (since start)",
            "timeseries",
            [
                Query(
                    or_zero(f"sum by (topic, partition) (mirror_source_truncated_records_total{{{f}}})", f),
                    "{{topic}}-{{partition}}",
                )
            ],
        ),
        Panel(
            "Copy verification: what the last check found wrong",
            "timeseries",
            [
                Query(f"mirror_verify_mismatched_records{{{f}}}", "{{kind}}"),
                Query(f"mirror_verify_records{{{f}}}", "records compared"),
            ],
            description="With verify_interval_seconds: missing, extra and changed records, partitions not "
            "compared (any above 0 is an alert), and how many records the check compared",
        ),
    ]
    return Dashboard(
        "mirror-flow",
        "mirror: flow",
        "One flow in detail: partitions, topics, transactions, topic sync",
        panels,
        [datasource_variable(), flows_variable(multi=False)],
    )


def groups() -> Dashboard:
    f = 'flow=~"$flow"'
    panels = [
        Panel(
            "Checkpoint delay by group",
            "timeseries",
            [Query(f"max by (flow, group) (mirror_checkpoint_delay_seconds{{{f}}})", "{{flow}} {{group}}")],
            unit="s",
            description="Age of the source offsets the group's current checkpoints translate",
        ),
        Panel(
            "Translated lag by group (records)",
            "timeseries",
            [
                Query(
                    f"sum by (flow, group) (mirror_checkpoint_translated_lag_records{{{f}}})",
                    "{{flow}} {{group}}",
                )
            ],
            description="Remote end minus the translated offset: what the group reads after a failover",
        ),
        Panel(
            "Top 20 partitions by translated lag",
            "table",
            [Query(f"topk(20, mirror_checkpoint_translated_lag_records{{{f}}})")],
            width=24,
            height=10,
        ),
        Panel(
            "Group offset syncs by outcome",
            "timeseries",
            [
                Query(
                    f"sum by (flow, outcome) (increase(mirror_group_offset_syncs_total{{{f}}}[{RATE}]))",
                    "{{flow}} {{outcome}}",
                )
            ],
        ),
        Panel(
            "Groups active on the target (not synced)",
            "timeseries",
            [Query(f"max by (flow, group) (mirror_group_sync_skipped_active{{{f}}})", "{{flow}} {{group}}")],
            description="1 while the group has members on the target: its offsets there are left alone",
        ),
        Panel(
            "Checkpoints emitted/s",
            "timeseries",
            [Query(f"sum by (flow) (rate(mirror_checkpoints_emitted_total{{{f}}}[{RATE}]))", "{{flow}}")],
            unit="ops",
        ),
        Panel(
            "Internal-topic records that did not decode",
            "timeseries",
            [
                Query(
                    or_zero(
                        "sum by (flow, topic) "
                        f"(increase(mirror_checkpoint_records_skipped_total{{{f}}}[{RATE}]))",
                        f,
                    ),
                    "{{flow}} {{topic}}",
                ),
                Query(
                    or_zero(f"sum by (topic) (increase(mirror_heartbeat_records_skipped_total[{RATE}]))", f),
                    "{{topic}}",
                ),
            ],
        ),
    ]
    return Dashboard(
        "mirror-groups",
        "mirror: consumer groups",
        "Offset translation per group: how far behind a failover would land, and what group sync did",
        panels,
        [datasource_variable(), flows_variable(multi=True)],
    )
