"""`mirror run`: replicate every enabled flow of an mm2.yaml until stopped."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path


def add_run_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="replicate every enabled flow of an mm2.yaml")
    run.add_argument("config", type=Path, help="path to mm2.yaml")
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # A stop may come before Spark and Kafka are even imported; remember it instead of dying.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    from mirror.config import load_config
    from mirror.runner.supervisor import Supervisor

    config = load_config(args.config)
    return Supervisor(config, out=lambda line: print(line, file=sys.stderr, flush=True), stop=stop).run()
