"""`python -m bench [--quick] [--only NAME ...]`: one side-by-side run, results in bench/results/."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient

from bench import ceiling, measure, processes, report, rounds, steady, warm_up, workloads
from bench.contenders import CONTENDERS, Clusters, Contender, Stoppable, start_clusters
from bench.measure import wait_for
from mirror.local.broker import LocalBroker
from mirror.local.jars import KAFKA_VERSION

RESULTS = Path(__file__).parent / "results"
NAMES = ["ceiling", *(c.name for c in CONTENDERS)]
# After a contender's topics are deleted: how many more files than before it the brokers may hold,
# and how long they get to close the rest.
OPEN_FILES_SLACK = 500
DELETE_TIMEOUT_SECONDS = 300.0


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        with contextlib.suppress(Exception):  # already gone, or never created by a failed contender
            future.result(timeout=60)


def _commit() -> str:
    """The measured commit, marked "+dirty" when the working tree has uncommitted changes."""
    here = Path(__file__).parent
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=here, check=False
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], capture_output=True, text=True, cwd=here, check=False
    )
    return (head.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


def _run_ceiling(clusters: Clusters, mode: workloads.Mode, work: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"name": "ceiling", "label": "broker ceiling (perf tools)", "catch_up": {}}
    for workload in mode.catch_up:
        _say(f"ceiling: {workload.records:,} x {workload.value_bytes} B")
        row["catch_up"][workload.name] = ceiling.measure(clusters, workload, work / "ceiling" / workload.name)
        _delete_topics(clusters.target, [f"ceiling-{workload.name}"])
    # The perf tools take one topic each, so there is no ceiling for the many-partitions workload.
    _say("ceiling: steady latency, one hop (source to its own consumer)")
    setup = steady.prepare_steady(clusters, "ceiling", mode.steady)
    row.update(
        steady.steady_and_translation(
            None, None, clusters, mode.steady, setup, checkpoint_seconds=mode.checkpoint_seconds
        )
    )
    return row


def _run_contender(
    contender: Contender, clusters: Clusters, mode: workloads.Mode, work: Path, brokers: list[Stoppable]
) -> dict[str, Any]:
    """One process per catch-up workload; the first one, once caught up, also carries the steady load.
    Then one more for the many-partitions catch-up and its steady load."""
    name = contender.name
    row: dict[str, Any] = {"name": name, "label": contender.label, "catch_up": {}}
    if contender.flow_overrides:
        row["flow_overrides"] = dict(contender.flow_overrides)
    for index, workload in enumerate(mode.catch_up):
        setup = steady.prepare_steady(clusters, name, mode.steady) if index == 0 else None
        topics = [workload.topic_set.pattern, *([setup.topics.pattern] if setup else [])]
        _say(f"{contender.label}: catch-up {workload.records:,} x {workload.value_bytes} B")
        running = steady.launch_beside(
            setup,
            contender,
            clusters,
            topics,
            work / name / workload.name,
            checkpoint_seconds=mode.checkpoint_seconds,
        )
        try:
            try:
                result = measure.catch_up(running, contender, clusters, workload)
            except measure.ContenderFailedError as exc:
                result = {"error": str(exc), "complete": False}
            row["catch_up"][workload.name] = result
            _say(f"  {_summary(result)}")
            if setup is not None and "error" not in result:
                row.update(_steady(running, contender, clusters, mode, setup))
        finally:
            running.stop()
            if setup is not None:
                setup.producer.close()
        _delete_topics(clusters.target, [contender.remote_topic(workload.topic)])
    _run_many(contender, clusters, mode, work, row, brokers=brokers)
    return row


def _run_in_round(
    contender: Contender,
    index: int,
    *,
    clusters: Clusters,
    mode: workloads.Mode,
    work: Path,
    brokers: list[Stoppable],
) -> dict[str, Any]:
    """_run_contender under the round's own name (rounds.run_name); its row under the contender's."""
    playing = replace(contender, name=rounds.run_name(contender.name, index))
    return {**_run_contender(playing, clusters, mode, work, brokers), "name": contender.name}


def _run_many(
    contender: Contender,
    clusters: Clusters,
    mode: workloads.Mode,
    work: Path,
    row: dict[str, Any],
    *,
    brokers: list[Stoppable],
) -> None:
    """The many-partitions catch-up, then its steady load on a fresh set of topics, in one process.

    Both topic sets are deleted from the target afterwards and the steady set from the source, so
    the brokers hold at most one contender's 1,000-partition sets besides the seeded one. The next
    contender starts once the brokers have closed the deleted partitions' files: at 10,000
    partitions, a target still holding the last contender's ran out of open files.
    """
    pids = _broker_pids(brokers)
    files_before = [processes.open_files(pid) for pid in pids]
    many = mode.many
    workload, load = many.catch_up, many.steady
    layout, steady_topics = workload.topic_set, many.steady_topics(contender.name)
    _say(
        f"{contender.label}: creating {steady_topics.total:,} partitions for the many-partitions steady load"
    )
    setup = steady.prepare(clusters, steady_topics, load)
    _say(
        f"{contender.label}: catch-up {workload.records:,} x {workload.value_bytes} B over "
        f"{layout.topics} topics x {layout.partitions} partitions"
    )
    running = steady.launch_beside(
        setup,
        contender,
        clusters,
        [layout.pattern, steady_topics.pattern],
        work / contender.name / workload.name,
        checkpoint_seconds=mode.checkpoint_seconds,
    )
    try:
        try:
            result = measure.catch_up(
                running,
                contender,
                clusters,
                workload,
                timeout=mode.catch_up_timeout,
                poll_seconds=mode.poll_seconds,
            )
        except measure.ContenderFailedError as exc:
            error = f"{exc}; last error logged: {measure.last_error(running.run_dir)}"
            result = {"error": error, "complete": False}
        row["catch_up"][workload.name] = result
        _say(f"  {_summary(result)}")
        if contender.family == "mirror" and "error" not in result:
            row["metrics_page"] = measure.metrics_page(running.run_dir)
            _say(f"  /metrics: {row['metrics_page']}")
        if "error" not in result:
            over = f"over {steady_topics.total:,} partitions"
            _say(f"{contender.label}: steady {load.rate:,}/s {over} for {load.seconds} s")
            try:
                row["latency_many"] = steady.latency(running, contender, clusters, load, setup)
            except measure.ContenderFailedError as exc:
                row["latency_many_error"] = str(exc)
            _say(f"  latency {row.get('latency_many', row.get('latency_many_error'))}")
    finally:
        running.stop()
        setup.producer.close()
    _delete_topics(
        clusters.target, [contender.remote_topic(t) for t in [*layout.names, *steady_topics.names]]
    )
    _delete_topics(clusters.source, steady_topics.names)
    _say(f"{contender.label}: waiting for the brokers to close the deleted partitions' files")
    cleanup_error = _wait_for_closed_files(pids, files_before)
    if cleanup_error is not None:
        row["cleanup_error"] = cleanup_error  # the next contender may then fail: its row will say so


def _broker_pids(brokers: list[Stoppable]) -> list[int]:
    return [broker.pid for broker in brokers if isinstance(broker, LocalBroker) and broker.pid]


def _wait_for_closed_files(pids: list[int], files_before: list[int]) -> str | None:
    """Wait until the brokers hold about as many open files as before topics were made and
    deleted: at 10,000 partitions, a target still holding the last contender's ran out of them.
    The error if they did not in time (said, not raised: the next contender's row will show it)."""
    try:
        wait_for(
            lambda: all(
                processes.open_files(pid) <= before + OPEN_FILES_SLACK
                for pid, before in zip(pids, files_before, strict=True)
            ),
            DELETE_TIMEOUT_SECONDS,
            "the brokers kept the deleted partitions' files open",
            lambda: None,
        )
    except measure.ContenderFailedError as exc:
        _say(f"  {exc}")
        return str(exc)
    return None


def _warm_up(
    clusters: Clusters, mode: workloads.Mode, work: Path, brokers: list[Stoppable], seconds: int
) -> dict[str, Any]:
    """bench.warm_up, its topics deleted after it: what the results say of it."""
    pids = _broker_pids(brokers)
    files_before = [processes.open_files(pid) for pid in pids]
    layout = mode.many.catch_up.topic_set
    _say(
        f"warm-up, unmeasured: the floor copies {mode.many.steady.rate:,} records/s over "
        f"{layout.total:,} partitions for {seconds} s"
    )
    outcome: dict[str, Any] = {"seconds": seconds}
    try:
        outcome["latency"], source_topics, target_topics = warm_up.warm_up(clusters, mode, work, seconds)
    except measure.ContenderFailedError as exc:
        outcome["error"] = str(exc)
        _say(f"  warm-up failed, the contenders run anyway: {exc}")
        return outcome
    _say(f"  latency {outcome['latency']}")
    _delete_topics(clusters.target, target_topics)
    _delete_topics(clusters.source, source_topics)
    _wait_for_closed_files(pids, files_before)
    return outcome


def _steady(
    running: measure.Running,
    contender: Contender,
    clusters: Clusters,
    mode: workloads.Mode,
    setup: steady.SteadySetup,
) -> dict[str, Any]:
    _say(f"{contender.label}: steady {mode.steady.rate:,}/s for {mode.steady.seconds} s, then translation")
    try:
        result = steady.steady_and_translation(
            running, contender, clusters, mode.steady, setup, checkpoint_seconds=mode.checkpoint_seconds
        )
    except measure.ContenderFailedError as exc:
        result = {"latency_error": str(exc)}
    _say(f"  latency {result.get('latency')}, translation {result.get('translation')}")
    return result


def _steady_description(load: workloads.Steady, partitions: int) -> dict[str, Any]:
    return {
        "rate": load.rate,
        "seconds": load.seconds,
        "wait_seconds": load.wait_seconds,
        "partitions": partitions,
    }


def _summary(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"FAILED: {result['error']}"
    return (
        f"{result['records_per_second']:,.0f} records/s, {result['megabytes_per_second']:.1f} MB/s, "
        f"start-up {result['startup_seconds']:.1f} s, CPU {result['cpu_seconds_copy']:.1f} s, "
        f"complete={result['complete']} {result['verdict']}"
    )


def _options() -> tuple[argparse.Namespace, list[tuple[str, Any]]]:
    """The command line, checked, and the --mirror-flow settings as (key, value) pairs."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small workloads, about 12 minutes")
    parser.add_argument(
        "--huge",
        action="store_true",
        help="10,000 partitions (1,000 topics x 10) in one flow: half caught up, half under load; ~40 min",
    )
    parser.add_argument(
        "--only", nargs="+", choices=NAMES, help="contenders to run, in this order (default: all)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the contenders this many times, in the order given then reversed, and so on; "
        "the tables give medians, then each round's own figures",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results are written")
    parser.add_argument(
        "--brokers",
        type=int,
        choices=(1, 3),
        default=1,
        help="brokers per cluster: 3 runs every workload on replicated clusters (RF 3, min ISR 2)",
    )
    parser.add_argument(
        "--wan",
        type=int,
        default=0,
        metavar="RTT_MS",
        help="the contenders reach the source through Toxiproxy with this round-trip time (a WAN link)",
    )
    parser.add_argument(
        "--mirror-flow",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a flow setting for the mirror contenders (a YAML value), e.g. tasks_max=8; repeatable",
    )
    parser.add_argument(
        "--warm-up",
        type=int,
        default=None,
        metavar="SECONDS",
        help="before the first contender, the floor copies the many-partitions steady load this long, "
        f"unmeasured, so no contender meets brokers just started (0: none; default "
        f"{warm_up.WARM_UP_SECONDS}, none with --huge)",
    )
    parser.add_argument(
        "--mm2-premade-topics",
        action="store_true",
        help="make MM2's remote topics before it starts (it cannot make 10,000 partitions itself)",
    )
    args = parser.parse_args()
    overrides = []
    for setting in args.mirror_flow:
        key, equals, value = setting.partition("=")
        if not equals or not key:
            parser.error(f"--mirror-flow takes KEY=VALUE, e.g. tasks_max=8, not {setting!r}")
        overrides.append((key, yaml.safe_load(value)))
    if args.warm_up is None:
        # The floor reads through one consumer. As a --huge contender over 10,000 partitions, it
        # filled the 1 GiB source broker's heap, which stayed full (375 full GCs) for the contender
        # after it (a run of 2026-11-29 that did not finish); mirror's own consumers did so at
        # 5,000 partitions each (README, the copy task), the warm-up's size here. The report
        # shows each side's full GCs per contender.
        args.warm_up = 0 if args.huge else warm_up.WARM_UP_SECONDS
    if args.warm_up < 0:
        parser.error(f"--warm-up takes a number of seconds, 0 for none, not {args.warm_up}")
    if args.rounds < 1:
        parser.error(f"--rounds takes a positive number of rounds, not {args.rounds}")
    if args.huge and args.brokers > 1:
        parser.error("--huge runs on single brokers: 3 brokers of 10,000 partitions idle at ~2 cores")
    if args.wan and (args.brokers > 1 or args.huge):
        parser.error("--wan proxies single-broker clusters in the quick or full mode")
    if args.wan < 0 or args.wan % 2:
        parser.error(f"--wan takes an even round-trip time in ms (half of it each way), not {args.wan}")
    return args, overrides


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    # A bench run died once of a segfault in a C extension (2026-12-06, in the 10,000-partition
    # catch-up), with nothing but "Segmentation fault" and its brokers left running: this prints
    # every thread's Python stack, so the next one says where it was.
    faulthandler.enable()
    args, overrides = _options()
    # `kill` stops the brokers as Ctrl-C does, through the `finally` below: by default SIGTERM ended
    # the bench and left its brokers running for minutes beside the next run.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    contenders = {
        c.name: replace(c, flow_overrides=(*c.flow_overrides, *overrides))
        if c.family == "mirror"
        else replace(c, premade_topics=args.mm2_premade_topics)
        if c.family == "mm2"
        else c
        for c in CONTENDERS
    }
    mode = workloads.HUGE if args.huge else workloads.QUICK if args.quick else workloads.FULL
    # No ceiling at 10,000 partitions (the perf tools take one topic each), nor over a WAN link (it
    # measures the brokers, not the link).
    names = args.only or [name for name in NAMES if not ((args.huge or args.wan) and name == "ceiling")]

    work = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    started = datetime.now(UTC)
    link = f", the source {args.wan} ms away (round trip) through Toxiproxy" if args.wan else ""
    _say(f"{mode.name} mode, {args.brokers} broker(s) per cluster{link}; brokers, logs, configs: {work}")
    brokers, clusters = start_clusters(work, args.brokers, wan_ms=args.wan // 2)
    played_rounds: list[list[dict[str, Any]]] = []
    try:
        for workload in (*mode.catch_up, mode.many.catch_up):
            layout = workload.topic_set
            _say(
                f"seeding {workload.records:,} records of {workload.value_bytes} B into "
                f"{layout.topics} topic(s) x {layout.partitions} partitions ({layout.pattern})"
            )
            workloads.seed(clusters.source, workload)
        warmed = _warm_up(clusters, mode, work, brokers, args.warm_up) if args.warm_up else None
        for index in range(args.rounds):
            if args.rounds > 1:
                _say(f"round {index + 1} of {args.rounds}: {', '.join(rounds.order(names, index))}")
            played_rounds.append(
                [
                    _run_ceiling(clusters, mode, work)
                    if name == "ceiling"
                    else _run_in_round(
                        contenders[name], index, clusters=clusters, mode=mode, work=work, brokers=brokers
                    )
                    for name in rounds.order(names, index)
                ]
            )
    finally:
        for broker in brokers:
            broker.stop()

    results = {
        "mode": mode.name,
        "started": started.isoformat(timespec="seconds"),
        "seconds": round((datetime.now(UTC) - started).total_seconds()),
        "kafka_version": KAFKA_VERSION,
        "brokers": args.brokers,
        "wan_rtt_ms": args.wan,
        "mirror_commit": _commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.platform(),
        },
        "workloads": [
            {
                "name": w.name,
                "records": w.records,
                "value_bytes": w.value_bytes,
                "topics": w.topic_set.topics,
                "partitions": w.topic_set.total,
            }
            for w in (*mode.catch_up, mode.many.catch_up)
        ],
        "steady": _steady_description(mode.steady, workloads.PARTITIONS),
        "steady_many": {
            "workload": mode.many.catch_up.name,
            # The flow: the catch-up set and the steady load's own set.
            "flow_partitions": 2 * mode.many.catch_up.topic_set.total,
            **_steady_description(mode.many.steady, mode.many.catch_up.topic_set.total),
        },
        "checkpoint_seconds": mode.checkpoint_seconds,
        "warm_up": warmed,
        "contenders": rounds.medians(played_rounds),
    }
    if args.rounds > 1:
        results["rounds"] = [
            {"order": rounds.order(names, index), "contenders": played}
            for index, played in enumerate(played_rounds)
        ]
    name = started.strftime("%Y%m%dT%H%M%SZ") + f"-{mode.name}"
    if args.brokers > 1:
        name += f"-{args.brokers}brokers"
    if args.wan:
        name += f"-wan{args.wan}ms"
    name += "".join(re.sub(r"[^\w.=-]", "_", f"-{key}={value}") for key, value in overrides)
    if args.mm2_premade_topics:
        name += "-mm2-premade-topics"
    if args.rounds > 1:
        name += f"-{args.rounds}rounds"
    paths = report.write(results, args.out, name)
    sys.stdout.write(report.markdown(results))
    _say("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
