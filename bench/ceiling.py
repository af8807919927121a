"""The broker ceiling: Kafka's own perf tools, consuming the source and producing into the target at once.

A replicator does both on the same machine, so running the two tools together gives the fastest a
replicator could go here. Each tool reports its own rate (JVM start-up excluded); the ceiling is the
slower of the two.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from bench import processes
from bench.contenders import Clusters
from bench.workloads import PARTITIONS, CatchUp, create_topic

# The summary line; the periodic progress lines before it have no percentiles.
_PRODUCED = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\).* 50th", re.MULTILINE)


def _java(clusters: Clusters, tool: str, *arguments: str) -> list[str]:
    return ["java", "-Xmx1g", "-cp", str(clusters.libs / "*"), f"org.apache.kafka.tools.{tool}", *arguments]


def measure(clusters: Clusters, workload: CatchUp, run_dir: Path) -> dict[str, Any]:
    run_dir.mkdir(parents=True, exist_ok=True)
    target_topic = f"ceiling-{workload.name}"
    create_topic(clusters.target, target_topic, PARTITIONS)
    produce_log, consume_log = run_dir / "producer-perf.log", run_dir / "consumer-perf.log"
    started = time.monotonic()
    producer = processes.start(
        _java(
            clusters, "ProducerPerformance", "--topic", target_topic,
            "--num-records", str(workload.records), "--record-size", str(workload.value_bytes),
            "--throughput", "-1", "--producer-props", f"bootstrap.servers={clusters.target}", "acks=all",
        ),
        produce_log,
    )  # fmt: skip
    consumer = processes.start(
        _java(
            clusters, "ConsumerPerformance", "--bootstrap-server", clusters.source,
            "--topic", workload.topic, "--num-records", str(workload.records), "--hide-header",
            "--group", f"bench-ceiling-{workload.name}",
        ),
        consume_log,
    )  # fmt: skip
    trees = [processes.ProcessTree(p.pid).start() for p in (producer, consumer)]
    for tool, process in (("ProducerPerformance", producer), ("ConsumerPerformance", consumer)):
        if process.wait(900) != 0:
            raise RuntimeError(f"{tool} exited with {process.returncode}; see {run_dir}")
    finished = time.monotonic()
    for tree in trees:
        tree.stop()

    produced = _PRODUCED.search(produce_log.read_text(encoding="utf-8"))
    if produced is None:
        raise RuntimeError(f"no summary line from ProducerPerformance in {produce_log}")
    producer_rate = float(produced.group(2))
    # start.time, end.time, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s
    fields = consume_log.read_text(encoding="utf-8").strip().splitlines()[-1].split(",")
    consumed = int(fields[4].strip())
    if consumed < workload.records:
        raise RuntimeError(f"ConsumerPerformance read {consumed} of {workload.records} records")
    consumer_rate = float(fields[9].strip())  # fetch rate: excludes the group join
    rate = min(producer_rate, consumer_rate)
    cpu = sum(tree.cpu_at(finished) for tree in trees)
    return {
        "records": workload.records,
        "records_per_second": rate,
        "megabytes_per_second": rate * workload.value_bytes / 1e6,
        "producer_records_per_second": producer_rate,
        "consumer_records_per_second": consumer_rate,
        "wall_seconds": finished - started,
        "cpu_seconds": cpu,
        "cpu_seconds_per_million": cpu / workload.records * 1e6,
        "peak_rss_megabytes": sum(tree.peak_rss_bytes() for tree in trees) / 1e6,
        "complete": True,
    }
