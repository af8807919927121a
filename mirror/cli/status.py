"""`mirror status`: each flow's state, lag, last copy, heartbeat age and groups, from the clusters."""

from __future__ import annotations

import argparse
from pathlib import Path

from mirror.errors import ConfigError


def add_status_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _status(args: argparse.Namespace) -> int:
    import json

    from mirror.client import MirrorClient
    from mirror.config import load_config
    from mirror.config.flow_settings import flow_settings
    from mirror.runner.preflight import reach_cluster
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
            # The wait rides out reads that fail (a cluster back from an outage): a cluster that
            # cannot be reached at all (a wrong address, refused credentials) is said at once instead.
            for alias in (target, source) if args.until_lag is not None else (target,):
                reach_cluster(config, alias)
            wait_for_flow(settings, lag=args.until_lag, stopped=args.until_stopped, timeout=args.timeout)
        status = flow_status(settings, MirrorClient.from_config(config, target))
        print(json.dumps(status.to_json()) if args.json else render(status))
    return 0
