"""Starting a contender and timing its catch-up; the steady load is in bench.steady, translation in
bench.translation."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench import processes
from bench.contenders import Clusters, Contender
from bench.workloads import PARTITIONS, CatchUp, matching_topics, verify
from mirror.errors import MirrorError
from mirror.kafka.admin import create_topics
from mirror.kafka.offsets import Partition, last_stable_offsets

POLL_SECONDS = 0.1
STABLE_SECONDS = 2.0  # an end offset unchanged this long means the contender stopped writing
CATCH_UP_TIMEOUT_SECONDS = 1200.0
START_TIMEOUT_SECONDS = 180.0


class ContenderFailedError(RuntimeError):
    pass


def ends_of(admin: AdminClient, topic: str) -> dict[int, int]:
    """The read_committed end of every partition; zeros while the remote topic does not exist."""
    try:
        offsets = last_stable_offsets(admin, [(topic, p) for p in range(PARTITIONS)])
    except MirrorError:
        return dict.fromkeys(range(PARTITIONS), 0)
    return {partition: offset for (_, partition), offset in offsets.items()}


class TargetEnds:
    """The read_committed ends of every partition of some topics, all in one ListOffsets request.

    One partition the broker does not know fails the whole request, so until every topic exists
    (with a leader for each partition) a read first lists the cluster's topics and asks only for
    those; the others read as zero.
    """

    def __init__(self, bootstrap: str, topics: list[str], partitions: int) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._topics = topics
        self._partitions = partitions
        self._ready: set[str] = set()

    def read(self) -> dict[Partition, int] | None:
        """Every partition's end, or None when the broker could not answer this time."""
        if len(self._ready) < len(self._topics):
            self._ready = self._existing()
        ends = {(topic, p): 0 for topic in self._topics for p in range(self._partitions)}
        asked = [
            (topic, p) for topic in self._topics if topic in self._ready for p in range(self._partitions)
        ]
        if asked:
            try:
                ends.update(last_stable_offsets(self._admin, asked))
            except MirrorError:
                return None  # e.g. a leader moving between the metadata and the request
        return ends

    def _existing(self) -> set[str]:
        try:
            metadata = self._admin.list_topics(timeout=10)
        except KafkaException:
            return self._ready
        ready = set()
        for name in self._topics:
            topic = metadata.topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == self._partitions
                and all(p.error is None and p.leader >= 0 for p in topic.partitions.values())
            ):
                ready.add(name)
        return ready


@dataclass
class Running:
    """A started contender: its process, the sampler of its process tree, and when it started."""

    process: subprocess.Popen[bytes]
    tree: processes.ProcessTree
    run_dir: Path
    started: float

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            log = self.run_dir / "run.log"
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
            raise ContenderFailedError(
                f"exited with {self.process.returncode}; see {self.run_dir}: {' | '.join(lines[-5:])}"
            )

    def stop(self) -> None:
        processes.stop(self.process)
        self.tree.stop()


def last_error(run_dir: Path) -> str:
    """The last ERROR line a contender logged (MM2's log, or mirror's output), else its last WARN
    line, each with the exception on the line after it: for a failed row. MM2 logs a topic it
    could not create as a WARN."""
    for name in ("mm2.log", "run.log"):
        log = run_dir / name
        if not log.exists():
            continue
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        for level in ("ERROR", "WARN"):
            found = [index for index, line in enumerate(lines) if level in line]
            if found:
                index = found[-1]
                cause = lines[index + 1] if index + 1 < len(lines) and "Exception" in lines[index + 1] else ""
                return f"{lines[index][:300]} {cause[:300]}".strip()
    return "none"


def metrics_page(run_dir: Path) -> dict[str, float]:
    """Size and fetch time of a `mirror run`'s /metrics page (its port is in run_dir/mm2.yaml)."""
    port = yaml.safe_load((run_dir / "mm2.yaml").read_text(encoding="utf-8"))["metrics"]["port"]
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
        size = len(response.read())
    return {"bytes": size, "seconds": round(time.monotonic() - started, 3)}


def premake_remote_topics(contender: Contender, clusters: Clusters, topics: list[str]) -> None:
    """Make the remote topic of every source topic matching `topics` on the target, as it is on
    the source (partitions), in requests the controller accepts."""
    remote: list[tuple[str, int, dict[str, str]]] = [
        (contender.remote_topic(name), partitions, {})
        for name, partitions in matching_topics(clusters.source, topics).items()
    ]
    create_topics(AdminClient({"bootstrap.servers": clusters.target}), remote, replication_factor=None)


def launch(
    contender: Contender, clusters: Clusters, topics: list[str], run_dir: Path, *, checkpoint_seconds: int
) -> Running:
    """Start `contender` replicating the source topics that full-match one of the regexes `topics`."""
    if contender.premade_topics:
        premake_remote_topics(contender, clusters, topics)
    started = time.monotonic()
    process = contender.start(clusters, topics, run_dir, checkpoint_seconds=checkpoint_seconds)
    return Running(process, processes.ProcessTree(process.pid).start(), run_dir, started)


def catch_up(
    running: Running,
    contender: Contender,
    clusters: Clusters,
    workload: CatchUp,
    *,
    timeout: float = CATCH_UP_TIMEOUT_SECONDS,
    poll_seconds: float = POLL_SECONDS,
) -> dict[str, Any]:
    """Time a contender just launched on a loaded source until the target holds every record.

    The target's read_committed end offsets of every remote partition are polled every 100 ms
    (one request per poll). Once they cover the workload and stop moving, the target is read and
    verified record by record; the copy counts as done at the first poll that saw the final end
    offsets, so the verification read does not count. The rate counts only the records copied
    after the first poll that saw one: a first transaction of 50,000 records, already there at that
    poll, made a quick 300,000-record run read 270,000 records/s over a 1.1 s window.
    """
    layout = workload.topic_set
    remote = [contender.remote_topic(topic) for topic in layout.names]
    target = TargetEnds(clusters.target, remote, layout.partitions)
    wanted = {
        (topic, p): len(range(position * layout.partitions + p, workload.records, layout.total))
        for position, topic in enumerate(remote)
        for p in range(layout.partitions)
    }
    started, tree = running.started, running.tree
    first: float | None = None  # the first poll that saw a record on the target
    # The records on the target at that poll (end offsets: a few transaction markers count too),
    # copied before the window opened.
    at_first = 0
    ends: dict[Partition, int] = {}
    seen = started  # the first poll that saw `ends`; end offsets only grow, so they cannot come back
    verified: dict[Partition, int] | None = None
    while True:
        running.check_alive()
        now = time.monotonic()
        if now - started > timeout:
            raise ContenderFailedError(f"not caught up after {timeout:g} s")
        reading = target.read()
        if reading is not None:
            if reading != ends:
                ends, seen = reading, now
            if first is None and any(ends.values()):
                first, at_first = now, sum(ends.values())
            if (
                all(ends[tp] >= wanted[tp] for tp in wanted)
                and now - seen >= STABLE_SECONDS
                and ends != verified
            ):
                verdict = verify(clusters.target, remote, workload, ends)
                verified = ends
                if verdict.complete:
                    break
        time.sleep(poll_seconds)
    done = seen
    if first is None:  # cannot happen: the ends cover the workload, so some poll saw a record
        raise ContenderFailedError("caught up without a record ever seen on the target")
    copy_seconds = max(done - first, poll_seconds)
    cpu = tree.cpu_at(done)
    cpu_copy = cpu - tree.cpu_at(first)
    # Everything there at the first poll: no window to time, so from launch (start-up included).
    copied = workload.records - at_first
    rate = copied / copy_seconds if copied > 0 else workload.records / max(done - started, poll_seconds)
    return {
        "records": workload.records,
        "records_per_second": rate,
        "megabytes_per_second": rate * workload.value_bytes / 1e6,
        "copy_seconds": copy_seconds,
        "startup_seconds": first - started,
        "wall_seconds": done - started,
        "cpu_seconds": cpu,
        "cpu_seconds_copy": cpu_copy,
        "records_in_window": copied,
        "records_per_second_from_launch": workload.records / max(done - started, poll_seconds),
        "cpu_seconds_per_million": cpu_copy / max(copied, 1) * 1e6,
        "peak_rss_megabytes": tree.peak_rss_bytes(until=done) / 1e6,
        "complete": verdict.complete,
        "verdict": asdict(verdict),
    }


def wait_for(condition: Callable[[], bool], timeout: float, what: str, check: Callable[[], None]) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        check()
        if time.monotonic() > deadline:
            raise ContenderFailedError(f"{what} within {timeout:g} s")
        time.sleep(POLL_SECONDS)
    return time.monotonic()
