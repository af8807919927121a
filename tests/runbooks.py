"""Run a Markdown runbook as written: its ```sh blocks in order, and its hooks for the application.

A hook is an HTML comment, `<!-- runbook: stop-consumers A -->`, where the runbook asks the reader
to act on their own applications (stop consumers, move producers); the test does those. Blocks
run in `bash -euo pipefail` with the test's environment, and share state only through files in
$WORK, as a reader's terminal would. So the document cannot drift from the commands it gives.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from tests.kafka_backends import KafkaCluster
from tests.reliability.traffic import process_tree

_REBALANCED = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}
# A group coordinator that moved or is loading after its broker came back: the next commit succeeds.
_COORDINATOR_MOVING = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError._TIMED_OUT,
}
_STEP = re.compile(r"^```sh\n(?P<code>.*?)^```$|<!-- runbook: (?P<hook>[^>]*?) -->", re.MULTILINE | re.DOTALL)
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Step:
    code: str | None  # a shell block
    hook: str | None  # or a hook's words, e.g. "stop-consumers A"


def extract_steps(markdown: str) -> list[Step]:
    return [Step(m.group("code"), m.group("hook")) for m in _STEP.finditer(markdown)]


def run_runbook(
    path: Path, env: Mapping[str, str], hooks: Mapping[str, Callable[[], None]], log: Path
) -> list[str]:
    """Every step of the runbook at `path`, in order; returns what each shell block printed.
    A block that exits non-zero, or a hook the test does not know, fails the test."""
    outputs = []
    shell_env = {**os.environ, **env, "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    with log.open("a", encoding="utf-8") as out:
        for number, step in enumerate(extract_steps(path.read_text(encoding="utf-8")), 1):
            if step.hook is not None:
                assert step.hook in hooks, f"{path.name}: step {number}: no hook for {step.hook!r}"
                out.write(f"--- step {number}: hook {step.hook}\n")
                hooks[step.hook]()
                continue
            assert step.code is not None
            out.write(f"--- step {number}:\n{step.code}")
            out.flush()
            started = time.monotonic()
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", step.code],
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            out.write(
                f"{done.stdout}{done.stderr}--- exit {done.returncode} in {time.monotonic() - started:.1f}s\n"
            )
            printed = f"{done.stdout}\n{done.stderr}"
            assert done.returncode == 0, (
                f"{path.name}: step {number} exited {done.returncode}:\n{step.code}\n{printed}"
            )
            outputs.append(done.stdout)
    return outputs


def stop_background(work: Path) -> None:
    """Kill whatever a runbook left running (its *.pid files), with every process under it."""
    for pid_file in work.glob("*.pid"):
        try:
            pid = int(pid_file.read_text().strip())
        except ValueError:
            continue
        for member in reversed(process_tree(pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)


class SharedCounter:
    """Record numbers for every producer of a test, whichever cluster it writes to."""

    def __init__(self) -> None:
        self._next = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            n, self._next = self._next, self._next + 1
            return n


class SequencedProducer:
    """Writes records numbered from a shared counter into `topic`, partition n % partitions, with
    keys, headers and recent timestamps, until stopped; keeps what was acknowledged."""

    def __init__(
        self,
        counter: SharedCounter,
        topic: str,
        partitions: int,
        *,
        per_second: int = 200,
        fenced: bool = False,
    ) -> None:
        """`fenced`: refusals are expected (a deny-write fence); they are counted in `refused`."""
        self._counter, self._topic, self._partitions, self._fenced = counter, topic, partitions, fenced
        self.refused = 0
        self._flush_seconds = 60.0
        self._per_tick = max(1, per_second // 20)
        self._epoch_ms = int(time.time() * 1000)
        self.acked: list[int] = []
        self._failed: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, cluster: KafkaCluster) -> None:
        # An event per start: a thread a crash gave up waiting for must never be woken by the next.
        self._stop = threading.Event()
        producer = Producer(cluster.properties(**{"enable.idempotence": "true", "linger.ms": "10"}))
        self._thread = threading.Thread(target=self._run, args=(producer, self._stop), daemon=True)
        self._thread.start()

    def _run(self, producer: Producer, stop: threading.Event) -> None:
        while not stop.wait(0.05):
            for _ in range(self._per_tick):
                n = self._counter.next()
                try:
                    self._produce(producer, n)
                except KafkaException as exc:
                    if not (self._fenced and "authoriz" in str(exc).lower()):
                        raise
                    self.refused += 1  # refused before sending: the producer knows it is denied
            producer.poll(0)
        remaining = producer.flush(self._flush_seconds)
        if remaining:
            self._failed.append(f"{remaining} records not acknowledged")

    def _produce(self, producer: Producer, n: int) -> None:
        producer.produce(
            self._topic,
            key=b"k%d" % n,
            value=b"%d" % n,
            partition=n % self._partitions,
            headers=[("n", b"%d" % n)],
            timestamp=self._epoch_ms + n,
            on_delivery=self._delivered(n),
        )

    def _delivered(self, n: int) -> Callable[[object, object], None]:
        def report(error: object, _message: object) -> None:
            if error is None:
                self.acked.append(n)
            elif self._fenced and "authoriz" in str(error).lower():
                self.refused += 1
            else:
                self._failed.append(str(error))

        return report

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=90)
        assert not self._failed, self._failed[:3]

    def crash(self) -> None:
        """The producer dies with its cluster: records not acknowledged by then never count as written."""
        self._flush_seconds = 1.0  # its cluster is dead: nothing in flight can be acknowledged now
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=90)
        self._failed.clear()
        self._flush_seconds = 60.0


class Read(NamedTuple):
    """One record a GroupReader read: where (cluster, topic, partition, offset) and which (number)."""

    cluster: str
    topic: str
    partition: int
    offset: int
    number: int


class GroupReader:
    """One consumer of `group` on `topic`, read_committed, committing after every batch; logs what it
    read, in order, and how much of that it had committed."""

    def __init__(self, group: str, topic: str) -> None:
        self.group, self.topic = group, topic
        self.log: list[Read] = []
        self.committed_reads = 0  # len(log) at the last commit the broker acknowledged
        self._subscription = topic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: list[str] = []

    def start(self, cluster: KafkaCluster, subscription: str | None = None) -> None:
        """Consume on `cluster`, from `subscription` (a topic, or a ^regex) if given, else the topic."""
        # An event per start. A crashed reader's thread can outlive crash()'s wait (a synchronous
        # commit to a killed coordinator blocks until the cluster is back); with one shared event,
        # the next start cleared it and that thread read on from the restarted cluster (CI run of
        # 2026-11-28: a read from A logged while the group was on B).
        self._stop = threading.Event()
        self._subscription = subscription or self.topic
        self._thread = threading.Thread(target=self._run, args=(cluster, self._stop), daemon=True)
        self._thread.start()

    def crash(self) -> None:
        """The consumer dies with its cluster: what it could not commit is lost, errors are expected."""
        self._stop.set()
        assert self._thread is not None
        # Not until a commit blocked on the dead coordinator returns (up to two minutes): once
        # stopped, the thread adds nothing to the log or the committed count, and the next start
        # runs on an event of its own.
        self._thread.join(timeout=10)
        self._failed.clear()

    def _run(self, cluster: KafkaCluster, stop: threading.Event) -> None:
        consumer = Consumer(
            cluster.properties(
                **{
                    "group.id": self.group,
                    "enable.auto.commit": "false",
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                    # A consumer that dies with its cluster leaves the group this long after it is back.
                    "session.timeout.ms": "10000",
                }
            )
        )
        consumer.subscribe([self._subscription])
        try:
            while not stop.is_set():
                batch = [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
                if stop.is_set():
                    break  # crashed meanwhile: a dead application reads nothing more
                for m in batch:
                    self.log.append(Read(cluster.alias, m.topic(), m.partition(), m.offset(), int(m.value())))
                if batch:
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException as exc:
                        # The group rebalanced under it (a member that died with its cluster timed
                        # out), or its coordinator is still loading after the cluster came back: as
                        # any application, it goes on, commits with the next batch, and reads again
                        # what a rebalance left uncommitted.
                        error = exc.args[0]
                        if error.code() not in _REBALANCED | _COORDINATOR_MOVING and not error.retriable():
                            raise
                        continue
                    if not stop.is_set():  # a commit that returns after the crash tells nothing more
                        self.committed_reads = len(self.log)
        except Exception as exc:  # noqa: BLE001 - reported by stop(), in the test's thread
            if not stop.is_set():
                self._failed.append(repr(exc))
        finally:
            consumer.close()  # leaves the group: it has no members once stopped

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=60)
        assert not self._failed, self._failed

    def numbers(self, since: int = 0, until: int | None = None) -> list[int]:
        """The numbers of log entries [since, until), in the order read."""
        return [read.number for read in self.log[since:until]]

    def read_twice(self) -> list[int]:
        seen: dict[int, int] = defaultdict(int)
        for read in self.log:
            seen[read.number] += 1
        return sorted(n for n, times in seen.items() if times > 1)

    def out_of_order(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, record, the record before it) wherever a record read for the first time
        comes after a later one of its topic partition; a topic of the same name on either cluster
        counts as one (a move keeps names). A replay of records read before is read_twice's business."""
        last: dict[tuple[str, int], int] = {}
        seen: set[int] = set()
        found = []
        for read in self.log:
            if read.number in seen:
                continue
            seen.add(read.number)
            where = (read.topic, read.partition)
            if where in last and read.number <= last[where]:
                found.append((*where, read.number, last[where]))
            last[where] = read.number
        return found
