"""Fixtures for the PySpark connector tests: one local[2] SparkSession, one kafkalite broker and one Spark
standalone cluster for the whole test session (a cold SparkSession or cluster takes seconds), plus topic
helpers.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
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


@pytest.fixture(scope="session")
def shared_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A standalone master with two workers (1 core, 1g each) whose executors import the kafkalite under
    test; the tests take it through `standalone`."""
    from standalone_support import standalone_cluster

    import kafkalite

    src = str(Path(kafkalite.__file__).resolve().parents[1])
    python_path = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    work = tmp_path_factory.mktemp("standalone")
    with standalone_cluster(work, workers=2, cores=1, python_path=python_path) as cluster:
        yield cluster


@pytest.fixture
def standalone(shared_standalone: Any) -> Iterator[Any]:
    """The session's standalone cluster, all workers registered; a worker the test killed is restarted
    afterwards (the executors of the test's application go with its driver)."""
    shared_standalone.restart_dead_workers()
    yield shared_standalone
    shared_standalone.restart_dead_workers()


@pytest.fixture
def topic() -> str:
    return f"spark-{uuid.uuid4().hex[:10]}"
