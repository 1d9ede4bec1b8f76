"""What the producer and consumer load tests share: which client drives them (confluent-kafka or
kafkalite's), Java-only flags they refuse, latency percentiles and the progress line.
"""

from __future__ import annotations

import math
from typing import Any

from kafkalite.cli.wire import CliError

MB = 1024 * 1024
# Kafka's Java names librdkafka does not take (the kafkalite client does): dropped for confluent-kafka
JAVA_ONLY = {
    "buffer.memory",
    "max.block.ms",
    "delivery.timeout.ms",
    "retries",
    "key.serializer",
    "value.serializer",
}


def have_confluent() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def pick_client(choice: str) -> str:
    if choice == "auto":
        return "confluent" if have_confluent() else "kafkalite"
    if choice == "confluent" and not have_confluent():
        raise CliError("confluent-kafka is not installed (pip install confluent-kafka)")
    return choice


def percentile(sorted_ms: Any, q: float) -> float:
    """The q-quantile (0..1) of sorted values, nearest rank."""
    n = len(sorted_ms)
    if n == 0:
        return 0.0
    return float(sorted_ms[min(n - 1, max(0, math.ceil(q * n) - 1))])


class Progress:
    """A rich progress bar on a terminal (stdout a tty, text output); plain prints otherwise."""

    def __init__(self, total: float, what: str, enabled: bool) -> None:
        self.bar: Any = None
        self.task: Any = None
        if not enabled:
            return
        try:
            from rich.progress import (
                BarColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
        except ImportError:
            return
        self.bar = Progress(
            TextColumn(f"[bold]{what}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=True,
        )
        self.task = self.bar.add_task(what, total=total, rate="")
        self.bar.start()

    def update(self, completed: float, rate: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=completed, rate=rate)

    def line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text, highlight=False, markup=False)
        else:
            print(text, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
