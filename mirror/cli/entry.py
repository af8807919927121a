"""The `mirror` parser and the boundary every command passes through: logging, one-line errors, exit codes."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
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
from mirror.logs import configure, emits_json

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
    # A crash in a C extension (librdkafka, the JVM gateway's sockets) would otherwise end the run
    # with a bare signal and no trace of where it was; this prints every thread's Python stack. A
    # caller in the same process whose stderr is no file (pytest's capture) goes without.
    with contextlib.suppress(io.UnsupportedOperation, ValueError):
        faulthandler.enable()
    parser = build_parser()
    args = parser.parse_args(argv)
    # In the run's format from the start: a bad mm2.yaml is reported before its levels are known.
    configure(getattr(args, "log_format", "text"), debug=args.debug)
    try:
        return int(args.handler(args))
    except MirrorError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            _error(line)
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted; anything this command had started was stopped")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI boundary: a bug gets one line, not a traceback
        if args.debug:
            traceback.print_exc()
        _error(f"internal error ({type(exc).__name__}: {exc}); rerun with --debug and report it")
        return 1


def _error(line: str) -> None:
    """One line of the error that ends the command; a JSON log line when the run logs JSON."""
    if emits_json():
        logging.getLogger("mirror").error(line)
    else:
        print(f"mirror: {line}", file=sys.stderr)
