"""Where `mirror run` spends its CPU while catching up: py-spy over the driver and every Python worker.

    python -m bench.profile_copy --records 1000000 --exactly-once
    python -m bench.profile_copy --records 1000000 --no-exactly-once --top 40
    python -m bench.profile_copy --steady-many --top 40
    python -m bench.profile_copy --steady-many --huge --top 40
    python -m bench.profile_copy --steady-many --huge --debug   # and every commit's timings


Starts two local clusters, seeds one workload, runs `mirror run` under `py-spy record --subprocesses`
until the target holds every record (with --steady-many: over the full mode's 1,000-partition
steady load, 2,000 records/s for 60 s, or with --huge 5,000 records/s over 5,000 of a flow's
10,000 partitions, whose latency it prints too), and prints the functions
with the most samples (self and total) across all Python processes of the run. The raw stacks
stay in the work directory.
"""

from __future__ import annotations

import argparse
import collections
import signal
import subprocess
import tempfile
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench.contenders import Contender, start_clusters
from bench.measure import ContenderFailedError, ends_of, launch, wait_for
from bench.steady import latency, prepare
from bench.workloads import FULL, HUGE, PARTITIONS, CatchUp, Mode, seed


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


def _spy(pid: int, raw: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["py-spy", "record", "--subprocesses", "--nonblocking", "-r", "50", "-f", "raw",
         "-o", str(raw), "--pid", str(pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _profile_steady_many(top: int, exactly_once: bool, mode: Mode, debug: bool) -> int:
    """The mode's many-partitions steady load, profiled from its first paced record on."""
    work = Path(tempfile.mkdtemp(prefix="mirror-profile-"))
    brokers, clusters = start_clusters(work)
    load = mode.many.steady
    name = "mirror-eos" if exactly_once else "mirror-alo"
    try:
        setup = prepare(clusters, mode.many.steady_topics(name), load)
        contender = Contender(name, "mirror", exactly_once, debug=debug)
        running = launch(contender, clusters, [setup.topics.pattern], work / "run", checkpoint_seconds=5)
        raw = work / "stacks.txt"
        spy = _spy(running.process.pid, raw)
        try:
            print(latency(running, contender, clusters, load, setup))
        except ContenderFailedError as exc:
            print(f"mirror run failed: {exc}")
            return 1
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            running.stop()
    finally:
        for broker in brokers:
            broker.stop()
    print(_top(raw, top))
    print(f"raw stacks: {raw}")
    return 0


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
    parser.add_argument(
        "--steady-many", action="store_true", help="profile the 1,000-partition steady load instead"
    )
    parser.add_argument(
        "--huge", action="store_true", help="with --steady-many: 5,000 records/s over 5,000 partitions"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="with --steady-many: mirror run --debug (commit timings in run.log)",
    )
    args = parser.parse_args()
    if (args.huge or args.debug) and not args.steady_many:
        parser.error("--huge and --debug profile the steady load: give --steady-many too")
    if args.steady_many:
        return _profile_steady_many(args.top, args.exactly_once, HUGE if args.huge else FULL, args.debug)

    work = Path(tempfile.mkdtemp(prefix="mirror-profile-"))
    brokers, clusters = start_clusters(work)
    try:
        workload = CatchUp("profile", args.records, args.value_bytes)
        seed(clusters.source, workload)
        name = "mirror-eos" if args.exactly_once else "mirror-alo"
        contender = Contender(name, "mirror", args.exactly_once)
        running = launch(contender, clusters, [workload.topic], work / "run", checkpoint_seconds=5)
        raw = work / "stacks.txt"
        spy = _spy(running.process.pid, raw)
        admin = AdminClient({"bootstrap.servers": clusters.target})
        remote = contender.remote_topic(workload.topic)
        wanted = args.records - PARTITIONS  # markers aside, the ends pass this only near the end
        try:
            done = wait_for(
                lambda: sum(ends_of(admin, remote).values()) >= wanted,
                900,
                "not caught up",
                running.check_alive,
            )
            print(f"caught up after {done - running.started:.1f} s (including start-up)")
        except ContenderFailedError as exc:
            print(f"mirror run failed: {exc}")
            return 1
        finally:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
            spy.wait(60)
            running.stop()
    finally:
        for broker in brokers:
            broker.stop()
    print(_top(raw, args.top))
    print(f"raw stacks: {raw}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
