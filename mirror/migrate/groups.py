"""Move consumer groups from a flow's source to its target: exact offsets, inactive groups only,
never backwards. Used by `mirror migrate groups` (runbook 1's consumer move) and the cutover."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from mirror.config.flow_settings import FlowSettings
from mirror.errors import KafkaClientError
from mirror.kafka.clients import admin_client
from mirror.kafka.group_admin import alter_group_offsets, group_offsets, groups_with_members
from mirror.migrate.translate import Translation, translate_groups

Partition = tuple[str, int]
POLL_SECONDS = 1.0
# After a move, how long past a group-sync interval a check waits, how many checks in a row must
# find nothing to write back, and how many checks there are at most.
SYNC_ROUND_GRACE_SECONDS = 2.0
CLEAN_CHECKS = 2
SETTLE_TRIES = 5


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


@dataclass
class Restored:
    rewritten: dict[str, int] = field(default_factory=dict)  # group -> partitions written again
    joined: dict[str, str] = field(default_factory=dict)  # group -> one line: members came, not written


def restore_moved(settings: FlowSettings, moved: Mapping[str, Mapping[Partition, int]]) -> Restored:
    """Write again what a move wrote into the target's groups and something took back since.

    The running flow's group sync reads a group's offsets on the target, then writes its own
    translation where that is ahead. A round that read before the move wrote, and wrote after it,
    puts the group back to the last checkpoint: its consumers would read again what they had read.
    A group that has members by now is not written (the broker refuses): said, never skipped
    silently. Any other refusal is raised.
    """
    target = f"target cluster {settings.target}"
    target_admin = admin_client(settings.target_admin)
    groups = [group for group, offsets in moved.items() if offsets]
    current = group_offsets(target_admin, groups, what=target) if groups else {}
    result = Restored()
    for group in groups:
        now = current.get(group, {})
        back = {tp: o for tp, o in moved[group].items() if tp not in now or now[tp].offset < o}
        if not back:
            continue
        try:
            alter_group_offsets(target_admin, group, back, what=target)
        except KafkaClientError:
            if group not in groups_with_members(target_admin, [group], what=target):
                raise
            (t, p), offset = min(back.items())
            result.joined[group] = (
                f"its consumers started on {settings.target} after the group sync moved it back "
                f"({len(back)} partitions, e.g. {t}-{p} to {now[(t, p)].offset if (t, p) in now else 'none'} "
                f"instead of {offset}): they re-read from there"
            )
            continue
        result.rewritten[group] = len(back)
    return result


@dataclass
class Settled:
    joined: dict[str, str] = field(default_factory=dict)  # group -> one line (Restored.joined)
    unsettled: list[str] = field(default_factory=list)  # still moved back after SETTLE_TRIES checks


def settle_moved(
    settings: FlowSettings, moved: Mapping[str, Mapping[Partition, int]], say: Callable[[str], None]
) -> Settled:
    """Check, a sync interval apart, that the running flow's group sync leaves the moved groups
    where they were moved, writing back what it took, until CLEAN_CHECKS checks in a row find
    nothing to write back (a round that read a group before the move may write it a few seconds
    after: its writes go group by group, each retried for seconds)."""
    result = Settled()
    if not (settings.emit_checkpoints and settings.sync_group_offsets) or not any(moved.values()):
        return result  # no group sync runs in this flow
    wait = settings.sync_group_offsets_interval_seconds + SYNC_ROUND_GRACE_SECONDS
    pending = {group: offsets for group, offsets in moved.items() if offsets}
    clean = 0
    for _ in range(SETTLE_TRIES):
        say(f"checking in {wait:g}s that the running flow's group sync leaves the groups where they are")
        time.sleep(wait)
        restored = restore_moved(settings, pending)
        for group, why in sorted(restored.joined.items()):
            say(f"{group}: {why}")
            result.joined[group] = why
            pending.pop(group)
        for group, partitions in sorted(restored.rewritten.items()):
            say(f"{group}: {partitions} partitions moved back by the group sync; written again")
        clean = 0 if restored.rewritten else clean + 1
        if clean == CLEAN_CHECKS or not pending:
            return result
    result.unsettled = sorted(pending)
    return result
