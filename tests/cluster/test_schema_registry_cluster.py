"""The Schema Registry in a 3-broker cluster: writes sent to any broker are forwarded to the leader of
`_schemas`; the leader is SIGKILLed while schemas are being registered, and every registration answered
with an id is still there with that id on the survivors, and no id was given out twice. Then a record
framed with an id registered a moment before is accepted by a validating topic's partition leaders.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastavro")
from confluent_kafka.admin import AdminClient

from kafkalite.local_cluster import LocalCluster, free_port
from kafkalite.zkserver import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
MEDIA = "application/vnd.schemaregistry.v1+json"


def _call(method: str, url: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": MEDIA})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")
    except OSError as exc:
        return 0, str(exc)


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[tuple[LocalCluster, dict[int, str]]]:  # fmt: skip
    urls = {i: f"http://127.0.0.1:{free_port()}" for i in (1, 2, 3)}
    c = LocalCluster(
        tmp_path / "cluster",
        3,
        zookeeper=zookeeper,
        chroot=f"/{tmp_path.name}",
        config={
            "replica.lag.time.max.ms": 2000,
            "zookeeper.session.timeout.ms": 6000,
            "replica.fetch.backoff.ms": 200,
        },
        broker_config={i: {"http.listeners": url} for i, url in urls.items()},
    )
    with c:
        yield c, urls


def _wait(condition: Any, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _schema(n: int) -> dict[str, str]:
    return {"schema": json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": f"f{n}", "type": "int"}]})}  # fmt: skip


def _schemas_leader(bootstrap: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("_schemas", timeout=10)
    topic = md.topics.get("_schemas")
    if topic is None or topic.error is not None or 0 not in topic.partitions:
        return -1
    return int(topic.partitions[0].leader)


def errors_of(errors: list[Any]) -> Any:
    return lambda err, _msg: errors.append(err)


def test_leader_killed_while_registering(cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    c, urls = cluster
    _wait(lambda: all(_call("GET", f"{u}/subjects")[0] == 200 for u in urls.values()), what="HTTP")
    # the first write creates _schemas; every broker then forwards to its leader
    assert _call("POST", f"{urls[2]}/subjects/first/versions", _schema(0))[0] == 200
    _wait(lambda: _schemas_leader(c.bootstrap_servers) > 0, what="a _schemas leader")
    for n, url in enumerate(urls.values(), start=1):
        status, body = _call("POST", f"{url}/subjects/warm-{n}/versions", _schema(n))
        assert status == 200, body
    acked: dict[str, int] = {}
    stop = threading.Event()
    alive = dict(urls)

    def register() -> None:
        n = 100
        while not stop.is_set():
            for url in list(alive.values()):
                n += 1
                status, body = _call("POST", f"{url}/subjects/s{n}/versions", _schema(n), 10)
                if status == 200:
                    acked[f"s{n}"] = body["id"]

    writer = threading.Thread(target=register, daemon=True)
    writer.start()
    _wait(lambda: len(acked) >= 10, what="registrations before the kill")
    leader = _schemas_leader(c.bootstrap_servers)
    assert leader in urls
    del alive[leader]
    c.brokers[leader].kill()
    before = len(acked)
    _wait(lambda: len(acked) >= before + 10, timeout=90, what="registrations after the kill")
    stop.set()
    writer.join(30)
    survivor = next(iter(alive.values()))
    ids = list(acked.values())
    assert len(set(ids)) == len(ids), "an id was given out twice"
    for url in alive.values():
        for subject, schema_id in acked.items():
            path = f"{url}/subjects/{subject}/versions/1"
            _wait(lambda p=path: _call("GET", p)[0] == 200, 30, path)
            status, body = _call("GET", path)
            assert body["id"] == schema_id, (url, subject, body)
    status, body = _call("GET", f"{survivor}/schemas/ids/{max(ids)}")
    assert status == 200 and "schema" in body

    # validation on produce: an id registered a moment ago is known to every partition leader
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    configs = {"confluent.value.schema.validation": "true"}
    admin.create_topics([NewTopic("validated", 2, 2, config=configs)])["validated"].result(30)
    producer = Producer({"bootstrap.servers": c.bootstrap_servers, "linger.ms": 0})
    for n, url in enumerate(alive.values()):
        schema = {"type": "record", "name": f"V{n}", "fields": [{"name": "a", "type": "int"}]}
        status, body = _call("POST", f"{url}/subjects/validated-value/versions?normalize=false", {"schema": json.dumps(schema), "schemaType": "AVRO"})  # fmt: skip
        assert status == 200, body
        frame = b"\x00" + int(body["id"]).to_bytes(4, "big") + b"\x02"
        errors: list[Any] = []
        for partition in (0, 1):
            producer.produce("validated", frame, partition=partition, on_delivery=errors_of(errors))
        producer.flush(30)
        assert errors == [None, None], errors
        _call("PUT", f"{url}/config/validated-value", {"compatibility": "NONE"})
