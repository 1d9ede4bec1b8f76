"""A streaming query for the exactly-once fault tests, as its own program (own SparkSession, killable):
source topic -> kafkalite exactly-once sink, Trigger.AvailableNow; exits 0 once everything is written."""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    """argv: BOOTSTRAP SOURCE SINK CHECKPOINT MAX_OFFSETS_PER_TRIGGER [MASTER]"""
    bootstrap, source, sink, checkpoint, max_offsets = argv[:5]
    master = argv[5] if len(argv) > 5 else "local[2]"
    from pyspark.sql import SparkSession
    from spark_support import SPARK_TEST_JAVA_OPTIONS

    import kafkalite.spark

    builder = (
        SparkSession.builder.master(master)
        .appName("kafkalite-eos-fault")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .config("spark.driver.extraJavaOptions", SPARK_TEST_JAVA_OPTIONS)
    )
    if not master.startswith("local"):
        builder = (
            builder.config("spark.executor.memory", "512m")
            .config("spark.executor.extraJavaOptions", SPARK_TEST_JAVA_OPTIONS)
            .config("spark.task.maxFailures", "8")
            .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    df = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
        .selectExpr("value", "partition")
    )
    query = (
        df.writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("kafkalite.sink.exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()
    if query.exception() is not None:
        print(f"query failed: {query.exception()}", flush=True)
        return 1
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
