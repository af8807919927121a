"""One registration of a Python data source per streaming query, never one shared by two queries.

Spark keeps one environment map (a java.util.HashMap) per registered Python data source and hands
that same map to every query reading from it. Each streaming query's source runner writes its
settings into the map when it starts (PySpark 4.3's `PythonStreamingSourceRunner.init`), while
the queries already running serialize the map into their tasks. Two queries of one data source
starting together (two flows' sources; one flow's checkpoint and heartbeat) can leave the map's
size out of step with its entries, and from then on every task that carries it fails to
deserialize (`java.io.OptionalDataException`): the flows stop copying until the process restarts.
A registration of its own gives each query a map no other thread touches.
"""

from __future__ import annotations

import itertools
import threading

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource

_serial = itertools.count(1)
_serial_lock = threading.Lock()


def register_for_one_query(spark: SparkSession, source: type[DataSource]) -> str:
    """Register a subclass of `source` under a name of its own; the name goes to `.format()`."""
    with _serial_lock:
        serial = next(_serial)
    name = f"{source.name()}_{serial}"
    # A class made here is not importable by name, so cloudpickle ships it by value, `name` with
    # it; its base (`source`) is pickled by reference as usual.
    private = type(source.__name__, (source,), {"name": classmethod(lambda _cls: name)})
    spark.dataSource.register(private)
    return name
