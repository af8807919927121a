"""A topic ACL binding as mirror reads it from one cluster and writes it to another. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TopicAcl:
    """A LITERAL topic ACL binding, the only kind MM2 syncs. Operation and permission by name."""

    topic: str
    principal: str
    host: str
    operation: str
    permission: str
