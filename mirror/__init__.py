"""mirror: a MirrorMaker 2-compatible Kafka replicator on Apache Spark."""

__version__ = "0.1.0"
