"""`mirror acls`: the ACLs mirror's principal needs on each cluster, as kafka-acls.sh commands."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_acls_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = commands.add_parser(
        "acls", help="the ACLs mirror's principal needs on each cluster, as kafka-acls.sh commands"
    )
    acls.add_argument("config", type=Path, help="path to mm2.yaml")
    acls.set_defaults(handler=_acls)


def _acls(args: argparse.Namespace) -> int:
    from mirror.config import load_config
    from mirror.security import kafka_acls_commands, principals, required_acls

    config = load_config(args.config)
    bootstrap = {alias: cluster.bootstrap_servers for alias, cluster in config.clusters.items()}
    principal = principals(config)
    acls = required_acls(config)
    for alias in dict.fromkeys(acl.cluster for acl in acls):
        print(f"# cluster {alias} ({bootstrap[alias]}), for {principal[alias]}:")
        for line in kafka_acls_commands([a for a in acls if a.cluster == alias], bootstrap, principal):
            print(line)
    return 0
