"""Metrics of the `mirror run` process itself: build, flow components, background jobs, and the
whole process tree.

prometheus_client's process collector sees one process; a `mirror run` is three kinds (the Python
driver, Spark's JVM, Spark's Python workers), and the JVM and the workers do most of the work. The
tree collector sums CPU time and resident memory over the driver and every process under it
(Linux /proc; elsewhere it reports nothing).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mirror import __version__

_PROC = Path("/proc")


class RunMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        Info("mirror_build", "The running mirror's version", registry=registry).info({"version": __version__})
        self.component_up = Gauge(
            "mirror_component_up",
            "1 while a flow component's streaming query runs, 0 while it waits to be restarted",
            ("flow", "component"),
            registry=registry,
        )
        self.jobs = Counter(
            "mirror_background_jobs",
            "Runs of a flow's background jobs (topic refresh, config and ACL sync, lease renewal) by outcome",
            ("flow", "operation", "outcome"),
            registry=registry,
        )
        self.topic_changes = Counter(
            "mirror_topic_sync_changes",
            "What topic sync changed on the target: topics created, partitions added, config entries, ACLs",
            ("flow", "kind"),
            registry=registry,
        )
        self.verify_records = Gauge(
            "mirror_verify_records",
            "Source records the last verification of a flow compared with their copies",
            ("flow",),
            registry=registry,
        )
        self.verify_mismatched = Gauge(
            "mirror_verify_mismatched_records",
            "What the last verification of a flow found wrong in the copy: missing, extra or changed "
            "records, and partitions it could not compare (kind=uncompared_partitions)",
            ("flow", "kind"),
            registry=registry,
        )
        self.verify_finished = Gauge(
            "mirror_verify_last_finished_timestamp_seconds",
            "When the last verification of a flow finished (Unix time)",
            ("flow",),
            registry=registry,
        )
        registry.register(ProcessTreeCollector(os.getpid()))


class ProcessTreeCollector(Collector):
    def __init__(self, root: int) -> None:
        self._root = root
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def collect(self) -> Iterator[Metric]:
        if not _PROC.is_dir():
            return
        stats = _stats()
        tree = _tree(self._root, stats)
        cpu = sum(stats[pid][0] for pid in tree) / self._ticks
        rss = sum(stats[pid][1] for pid in tree) * self._page
        yield CounterMetricFamily(
            "mirror_process_tree_cpu_seconds",
            "CPU time of `mirror run` and every process under it (Spark's JVM and Python workers)",
            value=cpu,
        )
        yield GaugeMetricFamily(
            "mirror_process_tree_resident_memory_bytes",
            "Resident memory of `mirror run` and every process under it",
            value=rss,
        )
        yield GaugeMetricFamily("mirror_process_tree_processes", "Processes in the tree", value=len(tree))


def _stats() -> dict[int, tuple[int, int, int]]:
    """pid -> (utime + stime in ticks, resident pages, parent pid) of every process."""
    stats = {}
    for entry in _PROC.glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        # utime + stime, and cutime + cstime: a worker that exits hands its CPU time to the parent
        # that reaps it, so the tree's sum never goes down (a counter Prometheus would see reset).
        cpu = sum(int(f) for f in fields[11:15])
        stats[int(entry.parent.name)] = (cpu, int(fields[21]), int(fields[1]))
    return stats


def _tree(root: int, stats: dict[int, tuple[int, int, int]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, _, parent) in stats.items():
        children.setdefault(parent, []).append(pid)
    tree, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid in stats:
            tree.append(pid)
        stack.extend(children.get(pid, []))
    return tree
