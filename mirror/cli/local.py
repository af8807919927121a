"""`mirror local up|down|status|seed|jars` and the fault drills `stop-broker|kill-broker|start-broker`:
Apache Kafka clusters on 127.0.0.1 for trying mirror and for its tests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_local_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """local up, down, status, seed, jars: clusters on 127.0.0.1 for trying mirror and for tests."""
    local = commands.add_parser("local", help="local Apache Kafka clusters on 127.0.0.1 (no Docker)")
    local_commands = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND")
    dir_help = "where the clusters keep data, logs and pids (default: ./.mirror-local)"
    up = local_commands.add_parser("up", help="start clusters A and B and write mm2.local.yaml")
    up.add_argument("--dir", type=Path, default=Path(".mirror-local"), help=dir_help)
    up.add_argument("--base-port", type=int, default=19092, help="A listens here, B 10000 higher")
    up.add_argument("--config-out", type=Path, default=Path("mm2.local.yaml"), help="the mm2.yaml to write")
    up.add_argument(
        "--brokers",
        type=_broker_count,
        default=None,
        help="brokers per cluster: 1 (the default for new clusters) or 3, replicated clusters: RF 3, "
        "min ISR 2, small heaps; clusters started before keep theirs",
    )
    up.set_defaults(handler=_local_up)
    for name, what in (
        ("stop-broker", "stop one broker of a cluster (SIGTERM: a controlled shutdown)"),
        ("kill-broker", "kill one broker of a cluster (SIGKILL: a crash)"),
        ("start-broker", "start a stopped or killed broker again, with its data"),
    ):
        drill = local_commands.add_parser(name, help=what)
        drill.add_argument("--dir", type=Path, default=Path(".mirror-local"), help=dir_help)
        drill.add_argument("--cluster", required=True, help="the cluster's alias, e.g. B")
        drill.add_argument(
            "--id", type=int, required=True, dest="node_id", help="the broker's node id (1..N)"
        )
        drill.set_defaults(handler=_local_broker_drill, drill=name)
    down = local_commands.add_parser("down", help="stop the local clusters")
    down.add_argument("--dir", type=Path, default=Path(".mirror-local"), help=dir_help)
    down.add_argument("--purge", action="store_true", help="also delete their data and logs")
    down.set_defaults(handler=_local_down)
    status = local_commands.add_parser("status", help="show the local clusters")
    status.add_argument("--dir", type=Path, default=Path(".mirror-local"), help=dir_help)
    status.set_defaults(handler=_local_status)
    seed = local_commands.add_parser("seed", help="write sample records into a topic of cluster A")
    seed.add_argument("--dir", type=Path, default=Path(".mirror-local"), help=dir_help)
    seed.add_argument("--topic", default="orders", help="topic to create or append to (default: orders)")
    seed.add_argument("--records", type=int, default=10_000, help="how many records (default: 10000)")
    seed.add_argument("--partitions", type=int, default=4, help="partitions if the topic is new (default: 4)")
    seed.set_defaults(handler=_local_seed)
    jars = local_commands.add_parser("jars", help="resolve the Apache Kafka jars from Maven Central")
    jars.set_defaults(handler=_local_jars)


def _local_up(args: argparse.Namespace) -> int:
    from mirror.local.environment import LocalEnvironment, write_local_config

    environment = LocalEnvironment(args.dir)
    current = environment.status()
    if not current or not all(cluster.running for cluster in current):
        print("starting local Kafka clusters (a first run downloads the Kafka jars)...", file=sys.stderr)
    clusters, started = environment.up(base_port=args.base_port, brokers=args.brokers)
    if not started:
        print(f"local clusters already running under {args.dir}; nothing started", file=sys.stderr)
    write_local_config(args.config_out, clusters, args.dir)
    for cluster in clusters:
        pids = ",".join(str(broker.pid) for broker in cluster.brokers)
        print(f"{cluster.alias}  {cluster.bootstrap_servers}  pid {pids}")
    print(f"wrote {args.config_out}; run: mirror run {args.config_out}", file=sys.stderr)
    return 0


def _local_down(args: argparse.Namespace) -> int:
    from mirror.local.environment import LocalEnvironment

    stopped = LocalEnvironment(args.dir).down(purge=args.purge)
    print(
        f"stopped: {', '.join(stopped) or 'nothing was running'}" + (" (data deleted)" if args.purge else "")
    )
    return 0


def _local_status(args: argparse.Namespace) -> int:
    from mirror.local.environment import LocalEnvironment

    clusters = LocalEnvironment(args.dir).status()
    if not clusters:
        print(f"no local clusters under {args.dir}; start them with: mirror local up")
        return 1
    for cluster in clusters:
        if len(cluster.brokers) > 1:
            up = sum(broker.running for broker in cluster.brokers)
            print(f"{cluster.alias}  {up} of {len(cluster.brokers)} brokers running  {cluster.directory}")
            for broker in cluster.brokers:
                state = f"running (pid {broker.pid})" if broker.running else "stopped"
                print(f"  broker {broker.node_id}  {broker.bootstrap_servers}  {state}")
            continue
        state = f"running (pid {cluster.pid})" if cluster.running else "stopped"
        print(f"{cluster.alias}  {cluster.bootstrap_servers}  {state}  {cluster.directory}")
    return 0 if all(cluster.running for cluster in clusters) else 1


def _broker_count(text: str) -> int:
    if text not in ("1", "3"):
        raise argparse.ArgumentTypeError(f"{text!r}: use 1 (single-node clusters) or 3 (replicated, RF 3)")
    return int(text)


def _local_broker_drill(args: argparse.Namespace) -> int:
    from mirror.local.environment import LocalEnvironment

    environment = LocalEnvironment(args.dir)
    if args.drill == "start-broker":
        broker = environment.start_broker(args.cluster, args.node_id)
        print(
            f"{args.cluster} broker {args.node_id} running (pid {broker.pid}) at {broker.bootstrap_servers}"
        )
        return 0
    done = environment.stop_broker(args.cluster, args.node_id, kill=args.drill == "kill-broker")
    verb = "killed" if args.drill == "kill-broker" else "stopped"
    print(
        f"{args.cluster} broker {args.node_id} {verb}"
        if done
        else f"{args.cluster} broker {args.node_id} was not running"
    )
    return 0


def _local_seed(args: argparse.Namespace) -> int:
    from mirror.errors import LocalClusterError
    from mirror.local.environment import LocalEnvironment
    from mirror.local.seed import seed_topic

    running = [cluster for cluster in LocalEnvironment(args.dir).status() if cluster.running]
    if not running:
        raise LocalClusterError(
            f"no local cluster is running under {args.dir}; start them with: mirror local up"
        )
    source = running[0]
    written = seed_topic(source.bootstrap_servers, args.topic, args.records, args.partitions)
    print(f"wrote {written:,} records to {args.topic} on {source.alias} ({source.bootstrap_servers})")
    return 0


def _local_jars(args: argparse.Namespace) -> int:
    from mirror.local.jars import kafka_libs

    print(kafka_libs())
    return 0
