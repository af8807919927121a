"""Offset translation accuracy and checkpoint delay of `mirror run`, against `mirror local up` clusters.

    mirror local up
    python bench/checkpoint_accuracy.py --seconds 60 --rate 2000

While records flow into a 4-partition topic on A, consumer groups consume it on A and commit
every ~100 ms: "live" groups keep up, "slow" groups fall further behind. A watcher reads the
checkpoints topic on B and, per checkpoint, measures the checkpoint delay: from the moment the
group committed that upstream offset on A to the moment its checkpoint was readable on B.

Then production stops, the groups stop where they are (live ones at the end, slow ones mid-stream),
and after their last checkpoint is synced into B's groups, one consumer per group resumes on B.
Translation accuracy: records it re-reads (consumed on A already) and records it skips (never
consumed on A, never read on B). Results print as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror.flow.tail import PartitionTail
from mirror.kafka.wire import Checkpoint

PARTITIONS = 4


def produce(bootstrap: str, topic: str, rate: int, stop: threading.Event, sent: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        started = time.monotonic()
        for _ in range(rate // 10):
            producer.produce(topic, value=b"%d" % i, key=b"%d" % i, partition=i % PARTITIONS)
            i += 1
        producer.poll(0)
        time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
    producer.flush(60)
    sent.append(i)


class Group(threading.Thread):
    """Consumes on A and commits every ~100 ms; records when each position was first committed."""

    def __init__(self, bootstrap: str, name: str, topic: str, per_poll: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.name_, self.topic, self.per_poll, self.stop = name, topic, per_poll, stop
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.committed_at: dict[tuple[int, int], float] = {}  # (partition, offset) -> first commit time
        self.positions: dict[int, int] = {}
        self.consumed: dict[int, set[bytes]] = {p: set() for p in range(PARTITIONS)}

    def run(self) -> None:
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(PARTITIONS)])
        while not self.stop.is_set():
            for message in self.consumer.consume(self.per_poll, timeout=0.1):
                if message.error() is None:
                    self.consumed[message.partition()].add(message.value())
                    self.positions[message.partition()] = message.offset() + 1
            offsets = [TopicPartition(self.topic, p, o) for p, o in self.positions.items()]
            if offsets:
                self.consumer.commit(offsets=offsets, asynchronous=False)
                now = time.time()
                for p, o in self.positions.items():
                    self.committed_at.setdefault((p, o), now)
            time.sleep(0.1)
        self.consumer.close()


def watch_checkpoints(bootstrap: str, stop: threading.Event, seen: dict[tuple[str, int, int], float]) -> None:
    """Records when each (group, partition, upstream offset) checkpoint became readable on B."""
    tail = None
    while not stop.is_set():
        try:
            tail = tail or PartitionTail({"bootstrap.servers": bootstrap}, "A.checkpoints.internal")
            for record in tail.catch_up(timeout_seconds=10):
                c = Checkpoint.decode(record.key, record.value)
                seen.setdefault((c.group, c.partition, c.upstream_offset), time.time())
        except Exception:  # noqa: BLE001 - the topic appears when the flow starts
            tail = None
        time.sleep(0.05)


def resume_on_target(bootstrap: str, group: str, topic: str) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "isolation.level": "read_committed",
        }
    )
    committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    consumer.assign(committed)
    read: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 5:
        for message in consumer.consume(1000, timeout=0.5):
            if message.error() is None:
                read[message.partition()].append(message.value())
                quiet_since = time.monotonic()
    consumer.close()
    return read


def all_values(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-all", "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    done: set[int] = set()
    while len(done) < PARTITIONS:
        message = consumer.poll(5)
        if message is None:
            break
        if message.error() is not None:
            done.add(message.partition())
            continue
        values[message.partition()].append(message.value())
    consumer.close()
    return values


def report(
    groups: list[Group], seen: dict[tuple[str, int, int], float], source: str, target: str, topic: str
) -> dict[str, object]:
    """Checkpoint delays, and what each group re-reads and skips when it resumes on the target."""
    delays = [
        seen_at - group.committed_at[(p, o)]
        for group in groups
        for (name, p, o), seen_at in seen.items()
        if name == group.name_ and (p, o) in group.committed_at
    ]
    source_values = all_values(source, topic)
    accuracy = {}
    for group in groups:
        read = resume_on_target(target, group.name_, f"A.{topic}")
        re_read = skipped = 0
        for p in range(PARTITIONS):
            consumed = group.consumed[p]
            unread = [v for v in source_values[p] if v not in consumed]
            got = set(read[p])
            re_read += sum(1 for v in read[p] if v in consumed)
            skipped += sum(1 for v in unread if v not in got)
        kind = "caught-up" if "live" in group.name_ else "mid-stream"
        accuracy[group.name_] = {
            "kind": kind,
            "consumed_on_source": sum(len(c) for c in group.consumed.values()),
            "re_read_on_target": re_read,
            "skipped_on_target": skipped,
        }
    return {
        "checkpoint_delay_seconds": {
            "checkpoints": len(delays),
            "p50": round(statistics.median(delays), 3) if delays else None,
            "p95": round(sorted(delays)[int(0.95 * (len(delays) - 1))], 3) if delays else None,
            "max": round(max(delays), 3) if delays else None,
        },
        "translation": accuracy,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path("mm2.local.yaml"))
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=2000, help="records/s produced into A")
    parser.add_argument("--checkpoint-interval", type=float, default=5.0)
    args = parser.parse_args()

    local = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    source = local["clusters"]["A"]["bootstrap_servers"]
    target = local["clusters"]["B"]["bootstrap_servers"]
    run_id = uuid.uuid4().hex[:6]
    topic = f"bench-ckpt-{run_id}"
    admin = AdminClient({"bootstrap.servers": source})  # kept: its futures die with it
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    work = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    config = {
        **local,
        "flows": {
            "A->B": {
                "topics": [topic],
                "groups": [f"bench-{run_id}-.*"],
                "emit_checkpoints_interval_seconds": args.checkpoint_interval,
                "sync_group_offsets_interval_seconds": args.checkpoint_interval,
            }
        },
        "spark": {"checkpoint_dir": str(work / "state")},
    }
    config_path = work / "mm2.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    log = (work / "run.log").open("wb")
    mirror = subprocess.Popen(
        [sys.executable, "-m", "mirror", "run", str(config_path)], stdout=log, stderr=log
    )

    stop_producing, stop_groups, stop_watch = threading.Event(), threading.Event(), threading.Event()
    sent: list[int] = []
    seen: dict[tuple[str, int, int], float] = {}
    producer = threading.Thread(target=produce, args=(source, topic, args.rate, stop_producing, sent))
    watcher = threading.Thread(target=watch_checkpoints, args=(target, stop_watch, seen), daemon=True)
    groups = [Group(source, f"bench-{run_id}-live-{i}", topic, 5000, stop_groups) for i in range(2)] + [
        Group(source, f"bench-{run_id}-slow-{i}", topic, 20 + 30 * i, stop_groups) for i in range(2)
    ]
    producer.start()
    watcher.start()
    for group in groups:
        group.start()
    time.sleep(args.seconds)
    stop_producing.set()
    producer.join()
    time.sleep(3)  # live groups reach the end
    stop_groups.set()
    for group in groups:
        group.join()

    # Wait until every group's final position is checkpointed and synced into B.
    deadline = time.monotonic() + 120
    final = {g.name_: dict(g.positions) for g in groups}
    while time.monotonic() < deadline:
        if all((name, p, o) in seen for name, positions in final.items() for p, o in positions.items()):
            break
        time.sleep(0.5)
    time.sleep(2 * args.checkpoint_interval + 1)  # one more group-sync interval
    mirror.terminate()
    mirror.wait(120)
    stop_watch.set()

    result = {
        "records_produced": sent[0] if sent else 0,
        "seconds": args.seconds,
        "checkpoint_interval_seconds": args.checkpoint_interval,
        **report(groups, seen, source, target, topic),
        "log": str(work / "run.log"),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
