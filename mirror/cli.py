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
from mirror.cli_local import add_local_commands
from mirror.cli_migrate import add_migrate_commands
from mirror.cli_monitoring import add_monitoring_commands
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

    add_monitoring_commands(commands)
    add_offsets_commands(commands)
    add_verify_command(commands)
    add_migrate_commands(commands)

    config = commands.add_parser("config", help="configuration tools")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    imp = config_commands.add_parser("import", help="convert an MM2 mm2.properties file into mm2.yaml")
    imp.add_argument("properties", type=Path, help="path to the MM2 dedicated-mode properties file")
    imp.add_argument("-o", "--output", type=Path, help="write the YAML here instead of standard output")
    imp.set_defaults(handler=_config_import)

    add_local_commands(commands)
    return parser


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
    from mirror.security import kafka_acls_commands, principals, required_acls

    config = load_config(args.config)
    bootstrap = {alias: cluster.bootstrap_servers for alias, cluster in config.clusters.items()}
    principal = principals(config)
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
