"""`mirror verify`: compare a flow's copy with its source, partition by partition."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mirror.verify.job import FlowReport, PartitionReport

EXIT_DIFFERS = 1


def add_verify_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser(
        "verify",
        help="compare what a flow copied with its source: counts, and key, value, headers and timestamp "
        "of every record (exit 1 on a difference)",
    )
    verify.add_argument("config", type=Path, help="path to mm2.yaml")
    verify.add_argument("--flow", help="SOURCE->TARGET; needed when the file has several flows")
    verify.add_argument("--topic", action="append", default=[], help="a source topic (repeatable)")
    verify.add_argument(
        "--complete",
        action="store_true",
        help="also fail while the source holds records the flow has not copied yet, heartbeats aside "
        "(once the producers stopped)",
    )
    verify.add_argument("--workers", type=int, help="reader processes per cluster (default: CPU count)")
    verify.add_argument("--json", action="store_true", help="one JSON object per partition, then the summary")
    verify.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    from mirror.cli.flows import flow_from_args
    from mirror.verify.job import verify_flow

    report = verify_flow(flow_from_args(args), args.topic, workers=args.workers)
    if args.json:
        for part in report.partitions:
            print(json.dumps(_partition_json(part)))
        print(json.dumps(_summary_json(report)))
    else:
        for part in report.partitions:
            line = _partition_line(part)
            if line:
                print(line)
        print(_summary_line(report))
    waiting = report.waiting()
    failed = report.differs or report.uncompared or (args.complete and waiting)
    return EXIT_DIFFERS if failed else 0


def _partition_line(part: PartitionReport) -> str | None:
    name = f"{part.topic}-{part.partition} -> {part.remote_topic}-{part.partition}"
    if part.differs:
        d = part.diff
        problems = [
            f"{n} {what}"
            for n, what in ((d.missing, "missing"), (d.extra, "extra"), (d.changed, "changed"))
            if n
        ]
        where = ""
        if d.first_source_offset is not None or d.first_target_offset is not None:
            src = "-" if d.first_source_offset is None else d.first_source_offset
            dst = "-" if d.first_target_offset is None else d.first_target_offset
            where = f"; first difference at source offset {src} (target offset {dst})"
        if part.extra_after:
            after = f"from target offset {part.first_extra_after}"
            problems.append(f"{part.extra_after} extra past the flow's last copy, {after}")
        return f"DIFFERS {name}: {', '.join(problems)}{where}"
    if part.uncompared:
        return f"NOT COMPARED {name}: {part.skipped}"
    return None


def _summary_line(report: FlowReport) -> str:
    differing = sum(1 for p in report.partitions if p.differs)
    return (
        f"flow {report.flow}: {len(report.partitions)} partitions, {report.total('records')} records "
        f"compared, {differing} partitions differ ({report.diff_total('missing')} missing, "
        f"{report.diff_total('extra') + report.total('extra_after')} extra, {report.diff_total('changed')} "
        f"changed); {report.uncompared} partitions not compared; {report.total('not_yet_copied')} records "
        f"not yet copied; {report.total('unverified')} before the oldest offset sync, not compared"
    )


def _partition_json(part: PartitionReport) -> dict[str, Any]:
    d = part.diff
    return {
        "topic": part.topic,
        "partition": part.partition,
        "remote_topic": part.remote_topic,
        "differs": part.differs,
        "records": part.records,
        "missing": d.missing,
        "extra": d.extra + part.extra_after,
        "changed": d.changed,
        "first_source_offset": d.first_source_offset,
        "first_target_offset": d.first_target_offset if d.differs else part.first_extra_after,
        "not_yet_copied": part.not_yet_copied,
        "unverified": part.unverified,
        "anchor": part.anchor,
        "skipped": part.skipped,
    }


def _summary_json(report: FlowReport) -> dict[str, Any]:
    return {
        "flow": report.flow,
        "partitions": len(report.partitions),
        "differing_partitions": sum(1 for p in report.partitions if p.differs),
        "uncompared_partitions": report.uncompared,
        "records": report.total("records"),
        "missing": report.diff_total("missing"),
        "extra": report.diff_total("extra") + report.total("extra_after"),
        "changed": report.diff_total("changed"),
        "not_yet_copied": report.total("not_yet_copied"),
        "unverified": report.total("unverified"),
    }
