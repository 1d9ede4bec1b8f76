"""Fixtures for the PySpark connector tests: one local[2] SparkSession and one kafkalite broker for the
whole test session (a cold SparkSession takes seconds), plus producing and topic helpers.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.testing import Broker

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import kafkalite.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalite-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "600s")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("spark-broker")) as b:
        yield b


@pytest.fixture
def topic() -> str:
    return f"spark-{uuid.uuid4().hex[:10]}"
