"""Quick catch-up throughput of `mirror run` against the clusters of `mirror local up`.

    mirror local up
    python bench/quick_throughput.py --records 1600000 --value-bytes 100 --exactly-once
    python bench/quick_throughput.py --records 400000 --value-bytes 1000 --no-exactly-once

Seeds a fresh 8-partition topic on A, starts `mirror run` for it, and reports records/s and MB/s of
the copy phase (first committed range to the last), plus the wall time including Spark start-up.
Completion is read from the flow's positions on B. This is a probe for development; the
side-by-side comparison with MirrorMaker 2 is the job of the benchmark harness (issue 5).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 8


def seed(bootstrap: str, topic: str, records: int, value_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    value = b"x" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def copied(target: str, source_flow: str, remote: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": target,
            "group.id": f"__mirror-positions.{source_flow}",
            "isolation.level": "read_committed",
        }
    )
    try:
        result = consumer.committed([TopicPartition(remote, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return sum(max(0, tp.offset) for tp in result)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_600_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--exactly-once", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--source", default="127.0.0.1:19092")
    parser.add_argument("--target", default="127.0.0.1:29092")
    args = parser.parse_args()

    topic = f"bench-{args.value_bytes}b-{int(time.time())}"
    seed(args.source, topic, args.records, args.value_bytes)
    state = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    config = state / "mm2.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "A": {"bootstrap_servers": args.source},
                    "B": {"bootstrap_servers": args.target},
                },
                "flows": {"A->B": {"topics": [topic], "exactly_once": args.exactly_once}},
                "spark": {"checkpoint_dir": str(state / "spark")},
                "metrics": {"enabled": False},
            }
        ),
        encoding="utf-8",
    )
    started = time.monotonic()
    run = subprocess.Popen(
        [sys.executable, "-m", "mirror", "run", str(config)],
        stdout=(state / "run.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    first: tuple[float, int] | None = None  # (when, records) at the first observed commit
    try:
        while True:
            done = copied(args.target, "A-B", f"A.{topic}")
            if done and first is None:
                first = (time.monotonic(), done)
            if done >= args.records:
                break
            if run.poll() is not None:
                print(f"mirror run exited with {run.returncode}; see {state / 'run.log'}")  # noqa: T201
                return 1
            time.sleep(0.2)
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=120)
    finished = time.monotonic()
    if first is None:
        first = (started, 0)
    # Steady state: what was copied after the first observed commit, over the time it took.
    copy_seconds = max(finished - first[0], 1e-6)
    rate = (args.records - first[1]) / copy_seconds
    mode = "exactly-once" if args.exactly_once else "at-least-once"
    print(  # noqa: T201
        f"{args.records:,} records x {args.value_bytes} B, {PARTITIONS} partitions, {mode}: "
        f"{rate:,.0f} records/s, {rate * args.value_bytes / 1e6:,.1f} MB/s "
        f"(steady phase {copy_seconds:.1f} s; wall {finished - started:.1f} s including Spark start-up)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
