"""Can Spark's real-time trigger (`trigger(realTime=...)`, Spark 4.1+) run this pipeline?

Starts the `autosizer-kafka` source under the real-time trigger with the sinks the pipeline could
use, and prints what Spark answers. Run: .venv/bin/python benchmarks/probe_realtime.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from autosizer.embedded import EmbeddedBroker  # noqa: E402
from autosizer.pipeline.agent import summarize_error  # noqa: E402
from autosizer.pipeline.kafka_source import register  # noqa: E402


def main() -> None:
    import pyspark
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    register(spark)
    print(f"## real-time trigger, pyspark {pyspark.__version__}, source autosizer-kafka")
    with EmbeddedBroker() as broker:
        broker.create_topic("t", 2)
        broker.produce("t", [(i % 2, b"k%d" % i, b"v") for i in range(100)])
        stream = (spark.readStream.format("autosizer-kafka")
                  .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "t").load())
        sinks = {
            "foreachBatch (the pipeline's sink)": lambda w: w.foreachBatch(lambda df, i: None),
            "foreach writer": lambda w: w.foreach(lambda row: None),
            "console": lambda w: w.format("console"),
        }
        for name, attach in sinks.items():
            writer = (stream.writeStream.outputMode("update").trigger(realTime="5 seconds")
                      .option("checkpointLocation", tempfile.mkdtemp()))
            try:
                query = attach(writer).start()
                time.sleep(5)
                error = query.exception()
                query.stop()
                answer = "ran" if error is None else f"failed: {summarize_error(str(error))}"
            except Exception as exc:  # refused at start
                answer = f"refused: {summarize_error(str(exc))}"
            print(f"- {name}: {answer[:400]}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
