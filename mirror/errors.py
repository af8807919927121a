"""The exceptions `mirror` raises, all rooted at MirrorError.

    MirrorError
    ├── ConfigError            a configuration file or value is wrong (usage error, exit 2)
    │   └── PropertiesImportError   an MM2 properties file cannot be read at all
    ├── WireFormatError        bytes that are not a valid MM2/Connect record
    ├── KafkaClientError       a Kafka operation failed (translated from KafkaException)
    │   ├── ClusterUnreachableError
    │   ├── ClusterAuthenticationError   wrong credentials (usage error, exit 2)
    │   ├── ClusterTlsError        a certificate refused by either side (usage error, exit 2)
    │   ├── NotAuthorizedError     an ACL is missing (usage error, exit 2)
    │   └── ProducerFencedError     a newer writer took over a transactional id (we are the zombie)
    │       └── ProducerStuckError  librdkafka blocked past its own timeout: drop the producer
    ├── ReplicationError       a flow cannot go on without the user (record too large, data lost)
    │   ├── RecordTooLargeError
    │   ├── SourceTruncatedError
    │   ├── RemoteTopicDeletedError
    │   └── RecordRejectedError
    ├── FlowTakenOverError     another `mirror run` instance now owns the flow
    ├── FlowInUseError         a command that needs a stopped flow (or a free cutover) found it in use
    ├── MigrationStepError     a cutover step failed or timed out; running it again resumes there
    ├── MigrationIncompleteError   groups a migration could not move, one line each
    └── LocalClusterError      the local broker launcher could not do its job
        └── JarResolutionError

Every message names the object and the remedy, so the CLI can print it as one line.
`retriable` tells retry loops whether trying again can help.
"""

from __future__ import annotations

from typing import ClassVar


class MirrorError(Exception):
    """Root of every error `mirror` raises on purpose."""

    retriable: ClassVar[bool] = False
    exit_code: ClassVar[int] = 1


class ConfigError(MirrorError):
    """One or more problems in a configuration; `problems` holds one line each."""

    exit_code: ClassVar[int] = 2

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class PropertiesImportError(ConfigError):
    """An MM2 properties file that cannot be converted."""


class WireFormatError(MirrorError):
    """Bytes that do not decode as the MM2 or Connect record they claim to be."""


class KafkaClientError(MirrorError):
    """A Kafka client operation failed; raised from the KafkaException that caused it."""


class ClusterUnreachableError(KafkaClientError):
    """No broker of a cluster answered within the timeout."""

    retriable: ClassVar[bool] = True


class ClusterAuthenticationError(KafkaClientError):
    """A cluster refused the configured credentials: only the user can fix them."""

    exit_code: ClassVar[int] = 2


class ClusterTlsError(KafkaClientError):
    """A TLS handshake failed over a certificate (CA, expiry, host name, client certificate): only the
    user, or whoever issues the certificates, can fix it."""

    exit_code: ClassVar[int] = 2


class NotAuthorizedError(KafkaClientError):
    """The cluster's authorizer refused an operation: an ACL mirror needs is missing."""

    exit_code: ClassVar[int] = 2


class ProducerFencedError(KafkaClientError):
    """A producer with the same transactional id and a newer epoch exists; this one must stop."""

    retriable: ClassVar[bool] = True


class ProducerStuckError(ProducerFencedError):
    """A transactional call did not return long after its timeout; the producer must be replaced."""


class ReplicationError(MirrorError):
    """A flow stopped for a reason only the user can fix."""


class RecordTooLargeError(ReplicationError):
    """A source record is larger than the target accepts."""


class SourceTruncatedError(ReplicationError):
    """Source records were deleted (retention, topic re-created) before they were copied."""


class RecordRejectedError(ReplicationError):
    """The target refused a record as invalid (e.g. no key for a compacted topic)."""


class RemoteTopicDeletedError(ReplicationError):
    """A remote topic the flow had copied into was deleted (or re-created empty) on the target."""


class FlowTakenOverError(MirrorError):
    """Another `mirror run` instance fenced this one for a flow."""

    exit_code: ClassVar[int] = 3


class FlowInUseError(MirrorError):
    """A command that needs a stopped flow found its last owner not marked as stopped."""

    exit_code: ClassVar[int] = 3


class MigrationStepError(MirrorError):
    """A `mirror migrate cutover` step failed or timed out; the state file keeps where it stood."""


class MigrationIncompleteError(MirrorError):
    """Some consumer groups could not be moved; `problems` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class LocalClusterError(MirrorError):
    """The local broker launcher failed (format, start, stop)."""


class JarResolutionError(LocalClusterError):
    """Maven could not resolve the Apache Kafka jars."""
