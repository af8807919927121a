"""Topic and group filters with MM2's defaults and full-match regex semantics.

MM2 joins a list of patterns with `|` and full-matches the name; an exclude match wins over an
include match, and an empty include list matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from mirror.policy.replication_policy import ReplicationPolicy

DEFAULT_TOPICS: tuple[str, ...] = (".*",)
DEFAULT_TOPICS_EXCLUDE: tuple[str, ...] = (r".*[\-\.]internal", r".*\.replica", r"__.*")
DEFAULT_GROUPS: tuple[str, ...] = (".*",)
DEFAULT_GROUPS_EXCLUDE: tuple[str, ...] = (r"console-consumer-.*", r"connect-.*", r"__.*")
DEFAULT_CONFIG_PROPERTIES_EXCLUDE: tuple[str, ...] = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)


def compile_patterns(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One alternation of `patterns`, or None for an empty list (which matches nothing)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def _full_match(pattern: re.Pattern[str] | None, name: str) -> bool:
    return pattern is not None and pattern.fullmatch(name) is not None


@dataclass(frozen=True)
class NameFilter:
    """Include/exclude full-match regex lists; exclude wins."""

    include: Sequence[str]
    exclude: Sequence[str]
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", compile_patterns(self.include))
        object.__setattr__(self, "_exclude", compile_patterns(self.exclude))

    def matches(self, name: str) -> bool:
        return _full_match(self._include, name) and not _full_match(self._exclude, name)


class TopicFilter(NameFilter):
    """MM2's DefaultTopicFilter (`topics`, `topics.exclude`)."""

    def __init__(
        self, include: Sequence[str] = DEFAULT_TOPICS, exclude: Sequence[str] = DEFAULT_TOPICS_EXCLUDE
    ) -> None:
        super().__init__(tuple(include), tuple(exclude))


class GroupFilter(NameFilter):
    """MM2's DefaultGroupFilter (`groups`, `groups.exclude`)."""

    def __init__(
        self, include: Sequence[str] = DEFAULT_GROUPS, exclude: Sequence[str] = DEFAULT_GROUPS_EXCLUDE
    ) -> None:
        super().__init__(tuple(include), tuple(exclude))


def should_replicate_topic(
    topic: str,
    *,
    topic_filter: TopicFilter,
    policy: ReplicationPolicy,
    target_alias: str,
    heartbeats_replication_enabled: bool = True,
) -> bool:
    """MirrorSourceConnector.shouldReplicateTopic: the filter (or KIP-1089's heartbeats rule),
    minus internal topics and topics that would cycle back to the target."""
    selected = topic_filter.matches(topic) or (
        heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    return selected and not policy.is_internal_topic(topic) and not policy.is_cycle(topic, target_alias)
