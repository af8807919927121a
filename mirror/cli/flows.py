"""Which flow of an mm2.yaml a command means: the commands that act on one flow share this."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mirror.config.flow_settings import FlowSettings


def flow_from_args(args: argparse.Namespace) -> FlowSettings:
    """The flow named by --flow in args.config, or its only flow."""
    from mirror.config import load_config
    from mirror.config.flow_settings import flow_settings
    from mirror.errors import ConfigError

    config = load_config(args.config)
    flows = {f"{s}->{t}": (s, t, flow) for s, t, flow in config.flow_endpoints()}
    known = ", ".join(flows)
    if args.flow is None and len(flows) != 1:
        raise ConfigError([f"{args.config} has {len(flows)} flows; name one with --flow ({known})"])
    name = args.flow or next(iter(flows))
    if name not in flows:
        raise ConfigError([f"no flow {name} in {args.config}; its flows: {known}"])
    source, target, flow = flows[name]
    return flow_settings(config, source, target, flow)
