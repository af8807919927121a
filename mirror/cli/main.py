"""The `mirror` parser and the boundary every command passes through: logging, one-line errors, exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence

from mirror import __version__
from mirror.cli.acls import add_acls_command
from mirror.cli.config import add_config_commands, add_validate_command
from mirror.cli.local import add_local_commands
from mirror.cli.migrate import add_migrate_commands
from mirror.cli.monitoring import add_monitoring_commands
from mirror.cli.offsets import add_offsets_commands
from mirror.cli.run import add_run_command
from mirror.cli.status import add_status_command
from mirror.cli.verify import add_verify_command
from mirror.errors import MirrorError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirror",
        description="Replicate Kafka topics between clusters, MirrorMaker 2-compatible, on Apache Spark.",
    )
    parser.add_argument("--version", action="version", version=f"mirror {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # In the order `mirror --help` has always listed them.
    add_run_command(commands)
    add_validate_command(commands)
    add_acls_command(commands)
    add_status_command(commands)
    add_monitoring_commands(commands)
    add_offsets_commands(commands)
    add_verify_command(commands)
    add_migrate_commands(commands)
    add_config_commands(commands)
    add_local_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
