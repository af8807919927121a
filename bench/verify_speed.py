"""How fast `mirror verify` checks a large copy: 10 million records over 1,000 partitions by default.

python -m bench.verify_speed [--records N] [--partitions P] [--value-bytes B]

Starts two fresh local clusters (data in memory), writes the records with Kafka's ProducerPerformance,
lets `mirror run` copy them, then times `mirror verify` over the whole copy and reports its wall time,
records per second and the peak memory of its processes. Not a test: timings vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, TopicPartition

from bench import processes
from bench.ceiling import _java
from bench.contenders import start_clusters
from bench.workloads import create_topic
from mirror.local.ports import free_port

TOPIC = "verify-speed"
# Runs `mirror verify` and prints, last on stderr, the largest resident set (KiB) of any process under
# it (the CLI or a reader): a process's RUSAGE_CHILDREN covers the descendants it waited for.
_MEASURED = (
    "import resource, subprocess, sys; "
    "code = subprocess.run([sys.executable, '-m', 'mirror', 'verify', *sys.argv[1:]]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)"
)


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-speed-ends"})
    try:
        return {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        reader.close()


def _copied(target: str, partitions: int) -> int:
    reader = Consumer({"bootstrap.servers": target, "group.id": "__mirror-positions.source-target"})
    try:
        found = reader.committed(
            [TopicPartition(f"source.{TOPIC}", p) for p in range(partitions)], timeout=30
        )
    finally:
        reader.close()
    return sum(max(0, tp.offset) for tp in found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mirror-verify-speed-"))
    brokers, clusters = start_clusters(work)
    result: dict[str, object] = {"records": args.records, "partitions": args.partitions}
    try:
        create_topic(clusters.source, TOPIC, args.partitions)
        started = time.monotonic()
        producer = processes.start(
            _java(clusters, "ProducerPerformance", "--topic", TOPIC, "--num-records", str(args.records),
                  "--record-size", str(args.value_bytes), "--throughput", "-1", "--producer-props",
                  f"bootstrap.servers={clusters.source}", "acks=1", "linger.ms=20", "batch.size=262144"),
            work / "producer.log",
        )  # fmt: skip
        if producer.wait(1800) != 0:
            raise RuntimeError(f"ProducerPerformance failed; see {work / 'producer.log'}")
        result["produce_seconds"] = round(time.monotonic() - started, 1)
        total = sum(_ends(clusters.source, TOPIC, args.partitions).values())

        config = work / "mm2.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "clusters": {"source": {"bootstrap_servers": clusters.source},
                                 "target": {"bootstrap_servers": clusters.target}},
                    "flows": {"source->target": {"topics": [TOPIC], "emit_checkpoints": False}},
                    "spark": {"checkpoint_dir": str(work / "state")},
                    "metrics": {"port": free_port()},
                }
            ),
            encoding="utf-8",
        )  # fmt: skip
        started = time.monotonic()
        run = processes.start([sys.executable, "-m", "mirror", "run", str(config)], work / "run.log")
        try:
            while _copied(clusters.target, args.partitions) < total:
                if run.poll() is not None:
                    raise RuntimeError(f"mirror run exited {run.returncode}; see {work / 'run.log'}")
                if time.monotonic() - started > 3600:
                    raise RuntimeError("the copy took over an hour")
                time.sleep(2)
            result["copy_seconds"] = round(time.monotonic() - started, 1)
        finally:
            processes.stop(run)

        started = time.monotonic()
        verify = subprocess.run(
            [sys.executable, "-c", _MEASURED, str(config), "--json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
        summary = json.loads(verify.stdout.splitlines()[-1]) if verify.stdout else {}
        result.update(
            verify_exit=verify.returncode,
            verify_seconds=round(seconds, 1),
            verified_records=summary.get("records"),
            records_per_second=round((summary.get("records") or 0) / seconds),
            summary=summary,
            not_compared=[line for line in verify.stdout.splitlines() if '"skipped": "' in line][:3],
            peak_rss_mib=round(int(verify.stderr.split()[-1]) / 1024) if verify.stderr.strip() else None,
            stderr_tail=verify.stderr[-500:],
        )
    finally:
        for broker in brokers:
            broker.stop()
    print(json.dumps(result, indent=2))
    out = (
        Path(__file__).parent
        / "results"
        / f"verify-speed-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    )
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result.get("verify_exit") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
