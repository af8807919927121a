"""`mirror heartbeats | topology | translate-offsets`: read-only views of one cluster, for runbooks and
for monitoring that outlives `mirror run`."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_monitoring_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """heartbeats, topology, translate-offsets: read-only views of one cluster, for runbooks."""
    config_help = "the mm2.yaml that defines the cluster (default: mm2.yaml)"
    heartbeats = commands.add_parser(
        "heartbeats", help="per replication path into a cluster: the newest heartbeat's age and delay"
    )
    heartbeats.add_argument("--cluster", required=True, help="alias of the cluster to read, e.g. B")
    heartbeats.add_argument("-c", "--config", type=Path, default=Path("mm2.yaml"), help=config_help)
    heartbeats.add_argument(
        "--watch", type=float, default=3.0, help="seconds to watch for arriving heartbeats (default: 3)"
    )
    heartbeats.add_argument(
        "--serve-metrics",
        metavar="[HOST:]PORT",
        help="keep watching and serve the paths' heartbeat age and delay at http://HOST:PORT/metrics "
        "(HOST defaults to 127.0.0.1): an RPO monitor that outlives `mirror run`; runs until Ctrl-C",
    )
    heartbeats.set_defaults(handler=_heartbeats)

    topology = commands.add_parser(
        "topology", help="the clusters replicating into a cluster, with hop counts"
    )
    topology.add_argument("--cluster", required=True, help="alias of the cluster to read, e.g. B")
    topology.add_argument("-c", "--config", type=Path, default=Path("mm2.yaml"), help=config_help)
    topology.set_defaults(handler=_topology)

    translate = commands.add_parser(
        "translate-offsets",
        help="a source group's offsets translated for a target cluster (from checkpoints)",
    )
    translate.add_argument("--cluster", required=True, help="alias of the target cluster, e.g. B")
    translate.add_argument("--source", required=True, help="alias of the cluster the group consumed from")
    translate.add_argument("--group", required=True, help="the consumer group")
    translate.add_argument("-c", "--config", type=Path, default=Path("mm2.yaml"), help=config_help)
    translate.add_argument(
        "--apply",
        action="store_true",
        help="also write them into the group on the cluster (a failover): only while it has no members "
        "there, never backwards, never past a partition's end; needs nothing of the source cluster",
    )
    translate.set_defaults(handler=_translate_offsets)


def _heartbeats(args: argparse.Namespace) -> int:
    from mirror.client import MirrorClient

    client = MirrorClient.from_config(args.config, args.cluster)
    if args.serve_metrics:
        from mirror.runner.heartbeat_monitor import monitor_heartbeats

        return monitor_heartbeats(client, args.serve_metrics)
    paths = client.heartbeats(watch_seconds=args.watch)
    if not paths:
        print(f"no heartbeats on {args.cluster}; is a flow into it running with emit_heartbeats: true?")
        return 1
    print(f"{'PATH':<16} {'TOPIC':<24} {'HOPS':>4} {'LAST HEARTBEAT':>15} {'DELAY':>8}")
    for path in paths:
        delay = f"{path.delay_seconds:.2f}s" if path.delay_seconds is not None else "-"
        print(f"{path.path:<16} {path.topic:<24} {path.hops:>4} {path.age_seconds:>12.2f}s ago {delay:>8}")
    return 0


def _topology(args: argparse.Namespace) -> int:
    from mirror.client import MirrorClient

    client = MirrorClient.from_config(args.config, args.cluster)
    upstream = client.upstream_clusters()
    if not upstream:
        print(f"no cluster replicates into {args.cluster} (no remote heartbeats topics on it)")
        return 0
    print(f"clusters replicating into {args.cluster}:")
    for alias in upstream:
        hops = client.replication_hops(alias)
        print(f"  {alias}  {hops} hop{'s' if hops != 1 else ''}")
    return 0


def _translate_offsets(args: argparse.Namespace) -> int:
    from mirror.client import MirrorClient
    from mirror.errors import MigrationIncompleteError

    client = MirrorClient.from_config(args.config, args.cluster)
    offsets = client.translate_offsets(args.source, args.group)
    if not offsets:
        print(f"no checkpoints for group {args.group} from {args.source} on {args.cluster}")
        return 1
    print(f"{'TOPIC':<40} {'PARTITION':>9} {'OFFSET':>12}")
    for (topic, partition), offset in offsets.items():
        print(f"{topic:<40} {partition:>9} {offset:>12}")
    if not args.apply:
        return 0
    plan = client.apply_translated_offsets(args.source, args.group)
    if plan.active:
        raise MigrationIncompleteError(
            [f"group {args.group} has members on {args.cluster}; stop them, then run this again"]
        )
    print(
        f"group {args.group} on {args.cluster}: {len(plan.write)} partitions written, {len(plan.ahead)} "
        f"already at or past their translation (left there)"
    )
    if plan.beyond_end:
        t, p = plan.beyond_end[0]
        raise MigrationIncompleteError(
            [
                f"group {args.group}: {len(plan.beyond_end)} translations lie past their partition's end on "
                f"{args.cluster} (first {t}-{p}; its remote topic was re-created or truncated); set them "
                "with kafka-consumer-groups.sh --reset-offsets"
            ]
        )
    return 0
