"""`mirror offsets list | alter | reset`: a flow's source positions (MM2's KIP-875 offsets API)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.cli.flows import flow_from_args

if TYPE_CHECKING:  # the CLI starts fast: Kafka clients and config models load in the handlers
    from mirror.config.flow_settings import FlowSettings
    from mirror.source.offsets_admin import PositionRow


def add_offsets_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    offsets = commands.add_parser(
        "offsets", help="a flow's source positions: list them, or move them while the flow is stopped"
    )
    sub = offsets.add_subparsers(dest="offsets_command", required=True, metavar="COMMAND")
    listing = sub.add_parser("list", help="per source partition: the flow's position, the source range, lag")
    alter = sub.add_parser("alter", help="set positions of a stopped flow (a re-copy, or a skip ahead)")
    reset = sub.add_parser("reset", help="positions back to where a new flow starts (auto.offset.reset)")
    for parser in (listing, alter, reset):
        parser.add_argument("config", type=Path, help="path to mm2.yaml")
        parser.add_argument("--flow", help="SOURCE->TARGET; needed when the file has several flows")
        parser.add_argument("--topic", action="append", default=[], help="a source topic (repeatable)")
    for parser in (alter, reset):
        parser.add_argument("--partition", type=int, action="append", default=[], help="only this partition")
        parser.add_argument(
            "--force", action="store_true", help="fence the flow's owner even if it may still be running"
        )
    listing.add_argument("--json", action="store_true", help="one JSON object per partition")
    where = alter.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-offset", type=int, help="the next source offset to copy")
    where.add_argument("--to-earliest", action="store_true", help="the source partition's first offset")
    where.add_argument("--to-latest", action="store_true", help="the source partition's end (skip the rest)")
    listing.set_defaults(handler=_list)
    alter.set_defaults(handler=_alter)
    reset.set_defaults(handler=_reset)


def _list(args: argparse.Namespace) -> int:
    from mirror.source.offsets_admin import list_positions

    rows = list_positions(flow_from_args(args), args.topic)
    if args.json:
        for row in rows:
            print(json.dumps({**row.__dict__, "lag": row.lag}))
        return 0
    print(f"{'TOPIC':<40} {'PARTITION':>9} {'POSITION':>12} {'EARLIEST':>12} {'END':>12} {'LAG':>10}")
    for row in rows:
        position = "-" if row.position is None else str(row.position)
        lag = "-" if row.lag is None else str(row.lag)
        print(f"{row.topic:<40} {row.partition:>9} {position:>12} {row.earliest:>12} {row.end:>12} {lag:>10}")
    return 0


def _alter(args: argparse.Namespace) -> int:
    def target(row: PositionRow) -> int:
        if args.to_earliest:
            return row.earliest
        if args.to_latest:
            return row.end
        return int(args.to_offset)

    return _move(args, flow_from_args(args), target)


def _reset(args: argparse.Namespace) -> int:
    settings = flow_from_args(args)
    latest = settings.auto_offset_reset == "latest"
    return _move(args, settings, lambda row: row.end if latest else row.earliest)


def _move(args: argparse.Namespace, settings: FlowSettings, target: Callable[[PositionRow], int]) -> int:
    from mirror.errors import ConfigError
    from mirror.source.offsets_admin import check_in_range, list_positions, move_positions

    rows = {(row.topic, row.partition): row for row in list_positions(settings, args.topic)}
    chosen = {tp: row for tp, row in rows.items() if not args.partition or tp[1] in args.partition}
    if not chosen:
        what = ", ".join(args.topic) if args.topic else "any topic"
        problem = (
            f"flow {settings.name} copies no partition of {what} matching --partition {args.partition}; "
            "`mirror offsets list` shows what it copies"
        )
        raise ConfigError([problem])
    wanted = {tp: target(row) for tp, row in chosen.items()}
    check_in_range(rows, wanted)
    move_positions(settings, wanted, force=args.force)
    for (topic, partition), position in sorted(wanted.items()):
        before = chosen[(topic, partition)].position
        print(f"{topic}-{partition}: {'-' if before is None else before} -> {position}")
    print(f"flow {settings.name}: {len(wanted)} positions set; the next `mirror run` copies from them")
    return 0
