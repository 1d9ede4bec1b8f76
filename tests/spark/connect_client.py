"""A Spark Connect client for the Connect test, as its own program (a Connect session in the test process
would switch PySpark there into Connect mode): registers the kafkalite source, reads and writes through it.
"""

from __future__ import annotations

import json
import sys


def _input_rows(progress: object) -> int:
    rows = getattr(progress, "numInputRows", None)
    return int(rows if rows is not None else progress["numInputRows"])  # type: ignore[index]


def main(argv: list[str]) -> int:
    """argv: CONNECT_URL BOOTSTRAP SOURCE BATCH_SINK STREAM_SINK CHECKPOINT; prints one JSON line."""
    url, bootstrap, source, batch_sink, stream_sink, checkpoint = argv[:6]
    from pyspark.sql.connect.session import SparkSession

    import kafkalite.spark

    spark = SparkSession.builder.remote(url).create()
    try:
        kafkalite.spark.register(spark)  # a Python data source, shipped to the server by Connect

        def read(topic: str) -> object:
            return (
                spark.read.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load()
            )

        batch = read(source)
        values = sorted(int(r.value) for r in batch.select("value").collect())
        (
            batch.selectExpr("key", "value")
            .write.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", batch_sink)
            .mode("append")
            .save()
        )
        query = (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", stream_sink)
            .option("kafkalite.sink.exactlyOnce", "true")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        finished = query.awaitTermination(120)
        error = query.exception()
        progress = query.recentProgress
        print(
            json.dumps(
                {
                    "session": type(spark).__module__,
                    "values": values,
                    "stream_finished": bool(finished),
                    "stream_error": None if error is None else str(error),
                    "stream_rows": sum(_input_rows(p) for p in progress),
                }
            ),
            flush=True,
        )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
