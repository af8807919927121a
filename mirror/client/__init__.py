"""Read a cluster's replication state as MM2's MirrorClient does: for runbooks, scripts and the CLI.

from mirror.client import MirrorClient
client = MirrorClient.from_config("mm2.yaml", "B")
client.translate_offsets("A", "orders-service")   # {("A.orders", 0): 1234, ...}
"""

from mirror.client.mirror_client import HeartbeatPath, MirrorClient, translate_offsets

__all__ = ["HeartbeatPath", "MirrorClient", "translate_offsets"]
