"""kafkalite's PySpark connector: the `kafkalite` data source (batch and streaming reads and writes with
Spark's Kafka source/sink schema and options), registered on a session with `register(spark)`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

FORMAT = "kafkalite"


def register(spark: Any) -> None:
    """Make `spark.read/readStream/write/writeStream.format("kafkalite")` available on this session."""
    from kafkalite.spark.source import KafkaliteDataSource

    spark.dataSource.register(KafkaliteDataSource)


def use_this_python() -> None:
    """Point PySpark's workers at the running interpreter (it has pyarrow and kafkalite installed)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


__all__ = ["FORMAT", "register", "use_this_python"]
