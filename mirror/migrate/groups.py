"""Move consumer groups from a flow's source to its target: exact offsets, inactive groups only,
never backwards. Used by `mirror migrate groups` (runbook 1's consumer move) and the cutover."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field

from mirror.config.flow_settings import FlowSettings
from mirror.kafka.clients import admin_client
from mirror.kafka.group_admin import alter_group_offsets, group_offsets, groups_with_members
from mirror.migrate.translate import Translation, translate_groups

Partition = tuple[str, int]
POLL_SECONDS = 1.0


@dataclass
class GroupMove:
    moved: dict[str, dict[Partition, int]] = field(default_factory=dict)  # written, per remote partition
    not_moved: dict[str, str] = field(default_factory=dict)  # group -> why, one line
    still_consuming: list[str] = field(default_factory=list)  # members on the source while translated


def move_groups(
    settings: FlowSettings, groups: Collection[str], topics: Collection[str], *, timeout: float
) -> GroupMove:
    """Translate `groups`' offsets on `topics` and write them on the target. A group ahead of the
    flow's copy is waited for up to `timeout` seconds (the flow is expected to be running)."""
    source = f"source cluster {settings.source}"
    target = f"target cluster {settings.target}"
    source_admin = admin_client(settings.source_admin)
    target_admin = admin_client(settings.target_admin)
    result = GroupMove()
    chosen = set(topics)
    found = group_offsets(source_admin, groups, what=source) if groups else {}
    offsets = {g: {tp: c.offset for tp, c in o.items() if tp[0] in chosen} for g, o in found.items()}
    for group in sorted(set(groups) - {g for g, o in offsets.items() if o}):
        result.not_moved[group] = f"it has no committed offsets on {settings.source} for the flow's topics"
    offsets = {g: o for g, o in offsets.items() if o}
    for group in sorted(groups_with_members(target_admin, offsets, what=target)):
        result.not_moved[group] = f"it has members on {settings.target}; stop them, then move it again"
        offsets.pop(group)
    result.still_consuming = sorted(groups_with_members(source_admin, offsets, what=source))

    deadline = time.monotonic() + timeout
    translation = translate_groups(settings, offsets)
    while translation.not_copied_yet and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        translation = translate_groups(settings, offsets)
    _record_untranslated(result, translation, timeout)

    current = group_offsets(target_admin, translation.offsets, what=target) if translation.offsets else {}
    for group, wanted in sorted(translation.offsets.items()):
        if group in result.not_moved:
            continue
        now = current.get(group, {})
        # Never backwards: where the group is at or past the translation on the target already (it
        # was moved before, or has read on), it stays.
        forward = {tp: o for tp, o in wanted.items() if tp not in now or now[tp].offset < o}
        if forward:
            alter_group_offsets(target_admin, group, forward, what=target)
        result.moved[group] = forward
    return result


def _record_untranslated(result: GroupMove, translation: Translation, timeout: float) -> None:
    for group, partitions in translation.not_copied_yet.items():
        t, p = partitions[0]
        result.not_moved[group] = (
            f"its offset on {t}-{p} is past what the flow copied within {timeout:g}s; "
            "is `mirror run` running?"
        )
    for group, why in translation.untranslatable.items():
        (t, p), reason = next(iter(why.items()))
        result.not_moved.setdefault(group, f"{t}-{p}: {reason}")
