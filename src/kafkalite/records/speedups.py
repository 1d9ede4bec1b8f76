"""Picks the record-building implementation: the optional C accelerator `_speedups` when it is built,
else the pure-Python twins in `builder` (forced with the environment variable KAFKALITE_NO_SPEEDUPS=1).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import ModuleType
from typing import cast

from kafkalite.records.builder import PyRecordBuffer, py_now_ms


def _load() -> ModuleType | None:
    if os.environ.get("KAFKALITE_NO_SPEEDUPS", "") not in ("", "0"):
        return None
    try:
        from kafkalite.records import _speedups
    except ImportError:
        return None
    if not hasattr(_speedups.RecordBuffer, "seal"):  # built from an older _speedups.c
        logging.getLogger(__name__).warning(
            "kafkalite.records._speedups is stale (no RecordBuffer.seal): using the pure-Python "
            "record buffer; rebuild it (pip install -e .)"
        )
        return None
    return _speedups


speedups_module = _load()
SPEEDUPS = speedups_module is not None
"""True when the C accelerator is in use."""

RecordBuffer: type[PyRecordBuffer] = (
    PyRecordBuffer
    if speedups_module is None
    else cast(type[PyRecordBuffer], speedups_module.RecordBuffer)
)
now_ms: Callable[[], int] = py_now_ms if speedups_module is None else speedups_module.now_ms
# Kafka's murmur2 in C, or None (the client's partitioner then uses its own Python one)
murmur2: Callable[[bytes], int] | None = (
    None if speedups_module is None else speedups_module.murmur2
)


def _load_columns() -> type | None:
    """The C ColumnBuilder (v2 records -> Arrow column buffers), or None: not built, or
    KAFKALITE_NO_SPEEDUPS set (kafkalite.spark.columnar then decodes in Python)."""
    if os.environ.get("KAFKALITE_NO_SPEEDUPS", "") not in ("", "0"):
        return None
    try:
        from kafkalite.records._columns import ColumnBuilder
    except ImportError:
        return None
    return ColumnBuilder


ColumnBuilder: type | None = _load_columns()
