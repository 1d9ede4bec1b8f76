"""Embedded broker for tests and notebooks: `with Broker(tmp_path) as b: b.bootstrap_servers`, plus pytest
fixtures (`kafkalite_broker`, `kafkalite_session_broker`, and `kafkalite_cluster` for a ZooKeeper cluster).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("kafkalite.testing")


def new_event_loop(use_uvloop: bool | None = None) -> asyncio.AbstractEventLoop:
    """uvloop when installed (unless `use_uvloop` is False), the stdlib loop otherwise."""
    if use_uvloop is False:
        return asyncio.new_event_loop()
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Broker:
    """A kafkalite broker in this process, on 127.0.0.1 and an ephemeral port unless told otherwise.

    Extra keyword arguments and `config` are Kafka property names (`num_partitions=3` or
    `config={"num.partitions": "3"}`). `use_uvloop=False` forces the stdlib event loop.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        config: dict[str, Any] | None = None,
        use_uvloop: bool | None = None,
        **props: Any,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kafkalite-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        merged: dict[str, str] = {
            "listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(self.data_dir),
        }
        for k, v in (config or {}).items():
            merged[k] = _prop_str(v)
        for k, v in props.items():
            merged[k.replace("_", ".")] = _prop_str(v)
        self.properties = merged
        self.use_uvloop = use_uvloop
        self.server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self.http: Any = None  # the HTTP listener (kafkalite.web) when http.listeners is set

    # -- lifecycle
    def start(self) -> Broker:
        from kafkalite.broker.config.broker_config import BrokerConfig
        from kafkalite.broker.server import BrokerServer

        if self._thread is not None:
            raise RuntimeError("broker already started")
        from kafkalite import web

        self.server = BrokerServer(BrokerConfig(self.properties))
        self.http = web.attach(self.server)
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = new_event_loop(self.use_uvloop)
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def main() -> None:
                self._stop = asyncio.Event()
                try:
                    await self.server.start()
                except BaseException as exc:
                    failure.append(exc)
                    ready.set()
                    return
                ready.set()
                await self._stop.wait()
                await self.server.stop()

            try:
                loop.run_until_complete(main())
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="kafkalite-broker", daemon=True)
        self._thread.start()
        if not ready.wait(60):
            raise TimeoutError("kafkalite broker did not start within 60 s")
        if failure:
            self._thread.join(5)
            self._thread = None
            raise RuntimeError(f"kafkalite broker failed to start: {failure[0]!r}") from failure[0]
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        self._thread.join(60)
        self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients need
    @property
    def port(self) -> int:
        return int(self.server.port)

    @property
    def host(self) -> str:
        return str(self.server.advertised[0].host)

    @property
    def http_url(self) -> str:
        """http://HOST:PORT of the HTTP listener (set `http.listeners`, e.g. http://127.0.0.1:0)."""
        if self.http is None:
            raise RuntimeError("this broker has no HTTP listener (http.listeners is unset)")
        return str(self.http.url)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def cluster_id(self) -> str:
        return str(self.server.cluster_id)

    def call(self, fn: Any, *args: Any, timeout: float = 30) -> Any:
        """Run `fn(*args)` on the broker's loop thread and return its result (coroutines are awaited)."""
        assert self._loop is not None

        async def run() -> Any:
            res = fn(*args)
            if asyncio.iscoroutine(res):
                res = await res
            return res

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def create_topic(self, name: str, partitions: int = 1, **configs: Any) -> None:
        cfg = {k.replace("_", "."): _prop_str(v) for k, v in configs.items()}
        self.call(self.server.create_topic, name, partitions, cfg)

    def topics(self) -> list[str]:
        return sorted(t.name for t in self.server.metadata_store.topics())


def _prop_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional for embedded use
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def kafkalite_broker(tmp_path: Path) -> Iterator[Broker]:
        """A fresh broker per test, data in the test's tmp_path."""
        with Broker(tmp_path / "kafkalite-data") as b:
            yield b

    @pytest.fixture(scope="session")
    def kafkalite_session_broker(tmp_path_factory: Any) -> Iterator[Broker]:
        """One broker for the whole test session."""
        with Broker(tmp_path_factory.mktemp("kafkalite")) as b:
            yield b

    @pytest.fixture
    def kafkalite_cluster(tmp_path: Path) -> Iterator[Any]:
        """A real ZooKeeper and three broker processes (a `kafkalite.local_cluster.LocalCluster`):
        `.bootstrap_servers`, `.brokers[i].kill()` / `.pause()` / `.start()`, data in tmp_path."""
        from kafkalite.local_cluster import LocalCluster

        with LocalCluster(tmp_path / "cluster", 3) as cluster:
            yield cluster
