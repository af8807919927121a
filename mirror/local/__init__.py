"""Real Apache Kafka clusters on 127.0.0.1 from Maven Central jars: no Docker needed.

Used by `mirror local ...`, the pytest fixtures, the demo and the benchmarks.
"""
