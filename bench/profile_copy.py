"""Where `mirror run` spends its CPU while catching up: py-spy over the driver and every Python worker.

    python -m bench.profile_copy --records 1000000 --exactly-once
    python -m bench.profile_copy --records 1000000 --no-exactly-once --top 40

Starts two local clusters, seeds one workload, runs `mirror run` under `py-spy record --subprocesses`
until the target holds every record, and prints the functions with the most samples (self and
total) across all Python processes of the run. The raw stacks stay in the work directory.
"""

from __future__ import annotations

import argparse
import collections
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench import processes
from bench.contenders import Clusters, Contender
from bench.measure import ends_of
from bench.workloads import PARTITIONS, CatchUp, seed
from mirror.local.broker import BrokerSpec, free_port
from mirror.local.environment import start_brokers
from mirror.local.jars import kafka_libs


def _top(raw: Path, count: int) -> str:
    """Self and total samples per function from py-spy's raw (collapsed) stacks."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, weight = line.rpartition(" ")
        if not stack:
            continue
        frames = [frame.split(" (")[0] + " " + frame.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1]
                  for frame in stack.split(";")[1:]]  # fmt: skip
        n = int(weight)
        samples += n
        if frames:
            own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    lines = [f"{samples} samples", "", "self %  function"]
    lines += [f"{100 * n / samples:5.1f}  {name}" for name, n in own.most_common(count)]
    lines += ["", "total %  function"]
    lines += [f"{100 * n / samples:5.1f}  {name}" for name, n in total.most_common(count)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile_copy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--exactly-once", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mirror-profile-"))
    libs = kafka_libs()
    specs = [BrokerSpec(alias, work / alias, free_port(), free_port()) for alias in ("source", "target")]
    brokers = start_brokers(specs, libs=libs)
    try:
        clusters = Clusters(brokers[0].bootstrap_servers, brokers[1].bootstrap_servers, libs)
        workload = CatchUp("profile", args.records, args.value_bytes)
        seed(clusters.source, workload)
        contender = Contender(
            "mirror-eos" if args.exactly_once else "mirror-alo", "mirror", args.exactly_once
        )
        run = contender.start(clusters, [workload.topic], work / "run", checkpoint_seconds=5)
        raw = work / "stacks.txt"
        spy = subprocess.Popen(
            ["py-spy", "record", "--subprocesses", "--nonblocking", "-r", "50", "-f", "raw",
             "-o", str(raw), "--pid", str(run.pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        admin = AdminClient({"bootstrap.servers": clusters.target})
        wanted = args.records - PARTITIONS  # markers aside, the ends pass this only near the end
        started = time.monotonic()
        while sum(ends_of(admin, contender.remote_topic(workload.topic)).values()) < wanted:
            if run.poll() is not None or time.monotonic() - started > 900:
                print(f"mirror run stopped or stalled; see {work / 'run'}")
                return 1
            time.sleep(0.5)
        print(f"caught up after {time.monotonic() - started:.1f} s (including start-up)")
        spy.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
        spy.wait(60)
        processes.stop(run)
    finally:
        for broker in brokers:
            broker.stop()
    print(_top(raw, args.top))
    print(f"raw stacks: {raw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
