"""`mirror migrate plan`: what a cutover of a flow would move, and what stands in its way.

Read-only. A blocker is something that would leave data or consumers behind, or break them, if the
cutover ran now; each says how to clear it. Warnings are worth knowing but stop nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.admin import describe_topic_acls, list_topics
from mirror.kafka.clients import admin_client
from mirror.kafka.group_admin import group_offsets, groups_with_members, list_group_ids
from mirror.source.offsets_admin import list_positions, positions_and_landings
from mirror.topics.sync import TopicSync

Partition = tuple[str, int]


@dataclass
class MigrationPlan:
    flow: str
    policy: str
    topics: list[str]
    partitions: int
    lag: int  # source records not on the target yet
    groups: dict[str, dict[Partition, int]]  # groups to move: source partition -> committed offset
    authorizer: bool  # the source can fence producers with a deny-write ACL
    blockers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def plan_migration(settings: FlowSettings) -> MigrationPlan:
    source = f"source cluster {settings.source}"
    target = f"target cluster {settings.target}"
    source_admin = admin_client(settings.source_admin)
    target_admin = admin_client(settings.target_admin)
    policy = settings.policy()
    selected = TopicSync(settings).selected_topics()
    on_source = list_topics(source_admin, what=source)
    rows = list_positions(settings, not_yet_on_target=True)
    lag = sum(row.to_copy for row in rows)

    all_groups = list_group_ids(source_admin, what=source)
    committed = group_offsets(source_admin, all_groups, what=source) if all_groups else {}
    chosen = set(selected)
    consuming = {
        group: {tp: c.offset for tp, c in offsets.items() if tp[0] in chosen}
        for group, offsets in committed.items()
    }
    consuming = {group: offsets for group, offsets in consuming.items() if offsets}
    group_filter = settings.group_filter()
    moving = {group: offsets for group, offsets in consuming.items() if group_filter.matches(group)}
    plan = MigrationPlan(
        flow=settings.name,
        policy=settings.replication_policy,
        topics=selected,
        partitions=len(rows),
        lag=lag,
        groups=moving,
        authorizer=describe_topic_acls(source_admin) is not None,
    )

    if settings.replication_policy != "identity":
        plan.blockers.append(
            f"flow {settings.name} renames topics ({selected[0] if selected else 'orders'} becomes "
            f"{settings.remote_topic(selected[0] if selected else 'orders')}), so clients moved to "
            f"{settings.target} would need new topic names; set `replication_policy: identity` on the flow"
        )
    topic_filter = settings.topic_filter()
    for topic in sorted(on_source):
        if topic in chosen or policy.is_internal_topic(topic) or policy.is_heartbeats_topic(topic):
            continue
        if any(_matches(pattern, topic) for pattern in topic_filter.include):
            plan.warnings.append(
                f"topic {topic} is excluded by `topics_exclude`: it stays on {settings.source}"
            )
        else:
            plan.blockers.append(
                f"topic {topic} on {settings.source} is not copied by flow {settings.name}: add it to the "
                "flow's `topics`, or exclude it in `topics_exclude` if it is meant to stay behind"
            )
    for group in sorted(set(consuming) - set(moving)):
        plan.warnings.append(
            f"group {group} consumes copied topics but the flow's group filter leaves it out, so its "
            f"position does not move to {settings.target}; add it to `groups` if it should"
        )
    active = groups_with_members(target_admin, moving, what=target)
    for group in sorted(active):
        plan.blockers.append(
            f"group {group} already has members on {settings.target}; its offsets cannot be set while they "
            "run: stop them first"
        )
    copied = [(row.topic, row.partition) for row in rows if row.position is not None]
    unanchored = sorted(
        tp for tp, (_, landed) in positions_and_landings(settings, copied).items() if landed < 0
    )
    if unanchored:
        t, p = unanchored[0]
        plan.blockers.append(
            f"{len(unanchored)} partitions (first {t}-{p}) have positions written by MM2, which do not say "
            f"where their copies end on {settings.target}, so a cutover can neither verify them nor move "
            "groups exactly: let `mirror run` copy a record into each, or stop it and run `mirror offsets "
            "alter` with their current positions (`mirror offsets list`)"
        )
    if not plan.authorizer:
        plan.warnings.append(
            f"{settings.source} has no authorizer, so the cutover cannot fence producers with an ACL: "
            "stop them "
            "yourself and pass --producers-stopped"
        )
    return plan


def _matches(pattern: str, topic: str) -> bool:
    return re.fullmatch(pattern, topic) is not None


def render_plan(plan: MigrationPlan) -> str:
    fence = "deny-write ACLs (--producer-principal)" if plan.authorizer else "--producers-stopped"
    lines = [
        f"migration plan for flow {plan.flow} ({plan.policy} replication policy)",
        f"  topics:     {len(plan.topics)} ({plan.partitions} partitions): {', '.join(plan.topics) or '-'}",
        f"  lag:        {plan.lag} records not yet copied",
        f"  groups:     {len(plan.groups)} to move: {', '.join(sorted(plan.groups)) or '-'}",
        f"  fence:      {fence}",
    ]
    lines += [f"BLOCKER: {line}" for line in plan.blockers]
    lines += [f"warning: {line}" for line in plan.warnings]
    lines.append(
        "ready for `mirror migrate cutover`" if not plan.blockers else f"{len(plan.blockers)} blockers"
    )
    return "\n".join(lines)
