"""`mirror validate` and `mirror config import`: check an mm2.yaml, convert an mm2.properties."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.errors import ConfigError

if TYPE_CHECKING:
    from mirror.config.models import MirrorConfig


def add_validate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    validate = commands.add_parser("validate", help="check an mm2.yaml and print the effective configuration")
    validate.add_argument("config", type=Path, help="path to mm2.yaml")
    validate.set_defaults(handler=_validate)


def add_config_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = commands.add_parser("config", help="configuration tools")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    imp = config_commands.add_parser("import", help="convert an MM2 mm2.properties file into mm2.yaml")
    imp.add_argument("properties", type=Path, help="path to the MM2 dedicated-mode properties file")
    imp.add_argument("-o", "--output", type=Path, help="write the YAML here instead of standard output")
    imp.set_defaults(handler=_config_import)


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
