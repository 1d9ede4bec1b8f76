"""PeriodicTask: a daemon thread that calls one function every interval until its stop event is set
(the LogManager's retention, flush, checkpoint, file-delete, log-dir-move and cleaner threads).

A failing call is logged and the next one runs on time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("kafkalite.storage.manager")


class PeriodicTask(threading.Thread):
    def __init__(
        self, name: str, interval_ms: int, fn: Callable[[], object], stop: threading.Event
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = max(interval_ms, 1) / 1000.0
        self.fn = fn
        self.stop_event = stop

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.fn()
            except Exception:
                log.exception("background task %s failed", self.name)
