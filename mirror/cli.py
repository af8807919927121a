"""The `mirror` command: parse arguments, load config, hand off. Nothing else lives here."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mirror import __version__
from mirror.cli_migrate import add_migrate_commands
from mirror.cli_offsets import add_offsets_commands
from mirror.cli_verify import add_verify_command
from mirror.errors import ConfigError, MirrorError

if TYPE_CHECKING:
    from mirror.config.models import MirrorConfig

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirror",
        description="Replicate Kafka topics between clusters, MirrorMaker 2-compatible, on Apache Spark.",
    )
    parser.add_argument("--version", action="version", version=f"mirror {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="replicate every enabled flow of an mm2.yaml")
    run.add_argument("config", type=Path, help="path to mm2.yaml")
    run.set_defaults(handler=_run)

    validate = commands.add_parser("validate", help="check an mm2.yaml and print the effective configuration")
    validate.add_argument("config", type=Path, help="path to mm2.yaml")
    validate.set_defaults(handler=_validate)

    acls = commands.add_parser(
        "acls", help="the ACLs mirror's principal needs on each cluster, as kafka-acls.sh commands"
    )
    acls.add_argument("config", type=Path, help="path to mm2.yaml")
    acls.set_defaults(handler=_acls)

    status = commands.add_parser(
        "status", help="each flow's state, lag, last copy, heartbeat age and groups, from the clusters"
    )
    status.add_argument("config", type=Path, help="path to mm2.yaml")
    status.add_argument("--flow", help="SOURCE->TARGET: only this flow")
    status.add_argument("--json", action="store_true", help="one JSON object per flow")
    status.add_argument(
        "--until-lag",
        type=int,
        metavar="N",
        help="first wait until each flow has at most N records left to copy",
    )
    status.add_argument(
        "--until-stopped", action="store_true", help="first wait until each flow's last owner stopped cleanly"
    )
    status.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds to wait with --until-* (default 600; then exit 1)",
    )
    status.set_defaults(handler=_status)

    _add_monitoring_commands(commands)
    add_offsets_commands(commands)
    add_verify_command(commands)
    add_migrate_commands(commands)

    config = commands.add_parser("config", help="configuration tools")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    imp = config_commands.add_parser("import", help="convert an MM2 mm2.properties file into mm2.yaml")
    imp.add_argument("properties", type=Path, help="path to the MM2 dedicated-mode properties file")
    imp.add_argument("-o", "--output", type=Path, help="write the YAML here instead of standard output")
    imp.set_defaults(handler=_config_import)

    _add_local_commands(commands)
    return parser


def _add_local_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """local up, down, status, seed, jars: clusters on 127.0.0.1 for trying mirror and for tests."""
    local = commands.add_parser("local", help="local Apache Kafka clusters on 127.0.0.1 (no Docker)")
    local_commands = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND")
    dir_help = "where the clusters keep data, logs and pids (default: ./.mirror-local)"
    up = local_commands.add_parser("up", help="start clusters A and B and write mm2.local.yaml")
    up.add_argument("--dir", type=Path, default=Path(".mirror-local"), help=dir_help)
    up.add_argument("--base-port", type=int, default=19092, help="A listens here, B 10000 higher")
    up.add_argument("--config-out", type=Path, default=Path("mm2.local.yaml"), help="the mm2.yaml to write")
    up.set_defaults(handler=_local_up)
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


def _add_monitoring_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _run(args: argparse.Namespace) -> int:
    # A stop may come before Spark and Kafka are even imported; remember it instead of dying.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    from mirror.config import load_config
    from mirror.runner.supervisor import Supervisor

    config = load_config(args.config)
    return Supervisor(config, out=lambda line: print(line, file=sys.stderr, flush=True), stop=stop).run()


def _validate(args: argparse.Namespace) -> int:
    from mirror.config import load_config, render_effective_config

    config = load_config(args.config)
    _check_client_properties(config, args.config)
    print(f"# {args.config}: valid. Effective configuration, defaults included, secrets masked:")
    print(render_effective_config(config), end="")
    return 0


def _check_client_properties(config: MirrorConfig, path: Path) -> None:
    """librdkafka's own check of every cluster's client properties, as `mirror run` makes at start.

    It builds each client without using it (milliseconds, no broker needed), so `validate` also
    refuses what only librdkafka knows: an unknown property name, a bad value, a missing CA file.
    """
    from mirror.kafka.clients import check_properties

    problems: list[str] = []
    for alias, cluster in config.clusters.items():
        roles = {
            "admin": cluster.client_properties("admin"),
            "producer": cluster.client_properties("producer"),
            "consumer": cluster.client_properties("consumer"),
        }
        try:
            check_properties(roles, what=f"{path}: clusters.{alias}")
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)


def _acls(args: argparse.Namespace) -> int:
    from mirror.config import load_config
    from mirror.security import kafka_acls_commands, required_acls

    config = load_config(args.config)
    bootstrap = {alias: cluster.bootstrap_servers for alias, cluster in config.clusters.items()}
    principal = {}
    for alias, cluster in config.clusters.items():
        username = cluster.client_properties("admin").get("sasl.username")
        principal[alias] = f"User:{username}" if username else "User:MIRROR_PRINCIPAL"
    acls = required_acls(config)
    for alias in dict.fromkeys(acl.cluster for acl in acls):
        print(f"# cluster {alias} ({bootstrap[alias]}), for {principal[alias]}:")
        for line in kafka_acls_commands([a for a in acls if a.cluster == alias], bootstrap, principal):
            print(line)
    return 0


def _status(args: argparse.Namespace) -> int:
    import json

    from mirror.client import MirrorClient
    from mirror.config import load_config
    from mirror.config.flow_settings import flow_settings
    from mirror.runner.status import flow_status, render, wait_for_flow

    config = load_config(args.config)
    flows = [(s, t, flow) for s, t, flow in config.flow_endpoints() if flow.enabled]
    if args.flow is not None:
        flows = [(s, t, flow) for s, t, flow in flows if f"{s}->{t}" == args.flow]
        if not flows:
            known = ", ".join(f"{s}->{t}" for s, t, _ in config.flow_endpoints())
            raise ConfigError([f"no enabled flow {args.flow} in {args.config}; its flows: {known}"])
    for source, target, flow in flows:
        settings = flow_settings(config, source, target, flow)
        if args.until_lag is not None or args.until_stopped:
            wait_for_flow(settings, lag=args.until_lag, stopped=args.until_stopped, timeout=args.timeout)
        status = flow_status(settings, MirrorClient.from_config(config, target))
        print(json.dumps(status.to_json()) if args.json else render(status))
    return 0


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


def _config_import(args: argparse.Namespace) -> int:
    from mirror.config.mm2_properties import import_properties

    result = import_properties(args.properties)
    if args.output is not None:
        args.output.write_text(result.yaml, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(result.yaml, end="")
    for note in result.not_carried_over:
        print(f"not carried over: {note}", file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _local_up(args: argparse.Namespace) -> int:
    from mirror.local.environment import LocalEnvironment, write_local_config

    environment = LocalEnvironment(args.dir)
    current = environment.status()
    if not current or not all(cluster.running for cluster in current):
        print("starting local Kafka clusters (a first run downloads the Kafka jars)...", file=sys.stderr)
    clusters, started = environment.up(base_port=args.base_port)
    if not started:
        print(f"local clusters already running under {args.dir}; nothing started", file=sys.stderr)
    write_local_config(args.config_out, clusters, args.dir)
    for cluster in clusters:
        print(f"{cluster.alias}  {cluster.bootstrap_servers}  pid {cluster.pid}")
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
        state = f"running (pid {cluster.pid})" if cluster.running else "stopped"
        print(f"{cluster.alias}  {cluster.bootstrap_servers}  {state}  {cluster.directory}")
    return 0 if all(cluster.running for cluster in clusters) else 1


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.debug:
        logging.getLogger("mirror.librdkafka").setLevel(logging.DEBUG)
    else:
        # Their INFO lines (every job run, every py4j call) drown mirror's own progress lines. And
        # py4j logs, with a traceback, every exception a foreachBatch callback passes back to Spark;
        # the query fails with it and the supervisor reports it in one line, so those stay quiet.
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        # A job still running at its next interval (a cluster not answering) is expected; the
        # progress line says so instead of a warning every interval.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)

    try:
        return int(args.handler(args))
    except MirrorError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"mirror: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("mirror: interrupted; anything this command had started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI boundary: a bug gets one line, not a traceback
        if args.debug:
            traceback.print_exc()
        print(
            f"mirror: internal error ({type(exc).__name__}: {exc}); rerun with --debug and report it",
            file=sys.stderr,
        )
        return 1
