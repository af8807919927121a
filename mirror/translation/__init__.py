"""Consumer-group offset translation: MM2's OffsetSyncStore and checkpoint rules, as pure code."""

from mirror.translation.checkpoints import CheckpointStore, GroupSyncPlan, plan_group_sync
from mirror.translation.sync_store import OffsetSyncStore

__all__ = ["CheckpointStore", "GroupSyncPlan", "OffsetSyncStore", "plan_group_sync"]
