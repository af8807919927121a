"""`mirror run`: replicate every enabled flow of an mm2.yaml until stopped."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from mirror.logs import LOG_FORMATS, configure


def add_run_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="replicate every enabled flow of an mm2.yaml")
    run.add_argument("config", type=Path, help="path to mm2.yaml")
    run.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text (default), or json: one object per line with time, level, logger, message, flow, "
        "component, task and partition(s), from the driver and every Spark worker",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # A stop may come before Spark and Kafka are even imported; remember it instead of dying.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    from mirror.config import load_config

    config = load_config(args.config)
    # Only now: a config error is said before Spark and the Kafka clients are imported (~0.7 s).
    from mirror.runner.supervisor import Supervisor

    configure(args.log_format, config.logging, debug=args.debug)
    out = _progress_lines(args.log_format)
    return Supervisor(config, out=out, stop=stop, log_format=args.log_format, log_debug=args.debug).run()


def _progress_lines(log_format: str) -> Callable[[str], None]:
    """Where the run's progress lines go: standard error as they are, or as JSON log lines."""
    if log_format == "json":
        progress = logging.getLogger("mirror.progress")
        return progress.info
    return lambda line: print(line, file=sys.stderr, flush=True)
