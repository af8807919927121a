"""`mirror migrate plan | groups | cutover | status`: a cluster migration along one flow."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DEFAULT_STATE_DIR = Path(".mirror-migrate")


def add_migrate_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = commands.add_parser(
        "migrate", help="move consumers and producers from a flow's source onto its target (runbook 1)"
    )
    sub = migrate.add_subparsers(dest="migrate_command", required=True, metavar="COMMAND")
    plan = sub.add_parser("plan", help="what a cutover would move, and what blocks it (exit 1 on blockers)")
    groups = sub.add_parser(
        "groups", help="translate stopped groups' offsets exactly and write them on the target"
    )
    cutover = sub.add_parser(
        "cutover", help="lag gate, fence, verify the fence, drain, verify, move groups; resumable"
    )
    status = sub.add_parser("status", help="where a cutover stands, with the flow's lag now")
    for parser in (plan, groups, cutover, status):
        parser.add_argument("config", type=Path, help="path to mm2.yaml")
        parser.add_argument("--flow", help="SOURCE->TARGET; needed when the file has several flows")
    for parser in (cutover, status):
        parser.add_argument(
            "--state-dir", type=Path, default=DEFAULT_STATE_DIR, help="where the cutover's state file lives"
        )
    groups.add_argument("--group", action="append", required=True, help="a consumer group (repeatable)")
    groups.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the flow to copy up to the groups"
    )
    cutover.add_argument(
        "--lag-threshold", type=int, default=1000, help="records left to copy to pass the gate"
    )
    cutover.add_argument("--lag-timeout", type=float, default=600.0, help="seconds to wait at the lag gate")
    cutover.add_argument(
        "--producer-principal",
        action="append",
        default=[],
        help="a principal writing to the source topics, fenced with a deny-write ACL (repeatable)",
    )
    cutover.add_argument(
        "--producers-stopped",
        action="store_true",
        help="the source has no authorizer (or you fence otherwise): you stopped every producer yourself",
    )
    cutover.add_argument("--fence-seconds", type=float, default=10.0, help="how long the ends must stay put")
    cutover.add_argument(
        "--fence-timeout", type=float, default=300.0, help="seconds to wait for a quiet source"
    )
    cutover.add_argument(
        "--drain-timeout", type=float, default=600.0, help="seconds to wait for the last copies"
    )
    cutover.add_argument("--dry-run", action="store_true", help="say what each step would do; change nothing")
    plan.set_defaults(handler=_plan)
    groups.set_defaults(handler=_groups)
    cutover.set_defaults(handler=_cutover)
    status.set_defaults(handler=_status)


def _plan(args: argparse.Namespace) -> int:
    from mirror.cli.flows import flow_from_args
    from mirror.migrate.plan import plan_migration, render_plan

    plan = plan_migration(flow_from_args(args))
    print(render_plan(plan))
    return 1 if plan.blockers else 0


def _groups(args: argparse.Namespace) -> int:
    from mirror.cli.flows import flow_from_args
    from mirror.errors import MigrationIncompleteError
    from mirror.migrate.groups import SETTLE_TRIES, move_groups, settle_moved
    from mirror.topics.sync import TopicSync

    settings = flow_from_args(args)
    move = move_groups(settings, args.group, TopicSync(settings).selected_topics(), timeout=args.timeout)
    for group in move.still_consuming:
        print(f"warning: {group} still has members on {settings.source}; moved as committed now")
    for group, offsets in sorted(move.moved.items()):
        partitions = ", ".join(f"{t}-{p}@{offset}" for (t, p), offset in sorted(offsets.items()))
        print(f"{group}: {partitions or 'already at least this far on the target'}")
    settled = settle_moved(settings, move.moved, print)
    problems = [
        f"group {g} not moved: {why}" for g, why in sorted({**move.not_moved, **settled.joined}.items())
    ]
    problems += [
        f"group {g} moved back again and again by the running flow's group sync ({SETTLE_TRIES} checks); "
        "stop `mirror run`, then move it again"
        for g in settled.unsettled
    ]
    if problems:
        raise MigrationIncompleteError(problems)
    return 0


def _cutover(args: argparse.Namespace) -> int:
    from mirror.cli.flows import flow_from_args
    from mirror.migrate.cutover import CutoverOptions, run_cutover

    options = CutoverOptions(
        lag_threshold=args.lag_threshold,
        lag_timeout=args.lag_timeout,
        producer_principals=tuple(args.producer_principal),
        producers_stopped=args.producers_stopped,
        fence_seconds=args.fence_seconds,
        fence_timeout=args.fence_timeout,
        drain_timeout=args.drain_timeout,
        dry_run=args.dry_run,
    )
    run_cutover(
        flow_from_args(args), args.config, args.state_dir, options, lambda line: print(line, flush=True)
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    from mirror.cli.flows import flow_from_args
    from mirror.migrate.state import STEPS, load_state, state_path
    from mirror.source.offsets_admin import list_positions

    settings = flow_from_args(args)
    path = state_path(args.state_dir, settings.name)
    state = load_state(path)
    if state is None:
        print(f"no cutover of flow {settings.name} started ({path} does not exist)")
    else:
        print(f"cutover of flow {settings.name} ({path}):")
        for step in STEPS:
            record = state.steps[step]
            when = time.strftime("%H:%M:%S", time.localtime(record.finished_at)) if record.finished_at else ""
            print(f"  {step:<13} {record.status:<8} {when:>8}  {record.detail}")
    rows = list_positions(settings, not_yet_on_target=True)
    lag = sum(row.to_copy for row in rows)
    print(f"flow {settings.name}: {lag} records not yet copied, over {len(rows)} partitions")
    return 0
