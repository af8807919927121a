"""What `mirror` needs from secured clusters: the ACLs of its principal on each cluster."""

from mirror.security.acls import RequiredAcl, kafka_acls_commands, principals, required_acls

__all__ = ["RequiredAcl", "kafka_acls_commands", "principals", "required_acls"]
