"""A tiny in-memory stand-in for the REST v3 routes the console reads (canned cluster, topics, records,
one consumer group), served with the real console routes; used to check every page renders.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from typing import Any

from aiohttp import web

from kafkalite.web import console

CID = "fake-cluster"


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


class FakeRest:
    """State behind the fake: topics with configs and records, one group with a lag."""

    def __init__(self) -> None:
        now = int(time.time() * 1000)
        self.topics: dict[str, dict[str, Any]] = {
            "orders": {"partitions": 2, "configs": {"retention.ms": "604800000"}},
            "__consumer_offsets": {"partitions": 1, "configs": {}, "internal": True},
        }
        self.records: dict[tuple[str, int], list[dict[str, Any]]] = {
            ("orders", 0): [
                {
                    "partition_id": 0,
                    "offset": i,
                    "timestamp": now - (10 - i) * 1000,
                    "key": {"type": "STRING", "data": f"order-{i}"},
                    "value": {"type": "STRING", "data": json.dumps({"id": i, "total": i * 2.5})},
                    "headers": [{"name": "source", "value": _b64("web")}],
                }
                for i in range(10)
            ],
            ("orders", 1): [
                {
                    "partition_id": 1,
                    "offset": 0,
                    "timestamp": now,
                    "key": None,
                    "value": {"type": "BINARY", "data": base64.b64encode(b"\xff\x00").decode()},
                    "headers": [],
                }
            ],
        }
        self.lag = 4

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        base = f"/v3/clusters/{CID}"
        r.add_get("/v3/clusters", self.clusters)
        r.add_get(base + "/brokers", self.brokers)
        r.add_get(base + "/topics", self.list_topics)
        r.add_post(base + "/topics", self.create_topic)
        r.add_delete(base + "/topics/{t}", self.delete_topic)
        r.add_get(base + "/topics/{t}/configs", self.configs)
        r.add_put(base + "/topics/{t}/configs/{name}", self.set_config)
        r.add_get(base + "/topics/{t}/partitions", self.partitions)
        r.add_get(base + "/topics/{t}/partitions/{p}/records", self.read_records)
        r.add_post(base + "/topics/{t}/records", self.produce)
        r.add_get(base + "/consumer-groups", self.groups)
        r.add_get(base + "/consumer-groups/{g}", self.group)
        r.add_get(base + "/consumer-groups/{g}/consumers", self.consumers)
        r.add_get(base + "/consumer-groups/{g}/lags", self.lags)
        r.add_get(base + "/consumer-groups/{g}/lag-summary", self.lag_summary)
        r.add_post(base + "/consumer-groups/{g}/reset-offsets", self.reset)
        console.setup(app)
        return app

    @staticmethod
    def _list(kind: str, data: list[Any]) -> web.Response:
        return web.json_response({"kind": kind, "metadata": {}, "data": data})

    def _topic(self, request: web.Request) -> str:
        name = request.match_info["t"]
        if name not in self.topics:
            raise web.HTTPNotFound(
                text=json.dumps({"error_code": 404, "message": f"no topic {name}"}),
                content_type="application/json",
            )
        return name

    async def clusters(self, request: web.Request) -> web.Response:
        return self._list("KafkaClusterList", [{"cluster_id": CID}])

    async def brokers(self, request: web.Request) -> web.Response:
        return self._list(
            "KafkaBrokerList", [{"broker_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}]
        )

    async def list_topics(self, request: web.Request) -> web.Response:
        return self._list(
            "KafkaTopicList",
            [
                {
                    "topic_name": n,
                    "partitions_count": t["partitions"],
                    "replication_factor": 1,
                    "is_internal": bool(t.get("internal")),
                }
                for n, t in self.topics.items()
            ],
        )

    async def create_topic(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = body["topic_name"]
        if name in self.topics:
            return web.json_response(
                {"error_code": 400, "message": f"Topic '{name}' already exists."}, status=400
            )
        configs = {c["name"]: c["value"] for c in body.get("configs", [])}
        self.topics[name] = {"partitions": body.get("partitions_count", 1), "configs": configs}
        return web.json_response({"topic_name": name}, status=201)

    async def delete_topic(self, request: web.Request) -> web.Response:
        del self.topics[self._topic(request)]
        return web.Response(status=204)

    async def configs(self, request: web.Request) -> web.Response:
        t = self.topics[self._topic(request)]
        names = sorted({"cleanup.policy", "retention.ms", *t["configs"]})
        defaults = {"cleanup.policy": "delete", "retention.ms": "604800000"}
        return self._list(
            "KafkaTopicConfigList",
            [
                {
                    "name": n,
                    "value": t["configs"].get(n, defaults.get(n)),
                    "is_default": n not in t["configs"],
                    "is_read_only": False,
                    "source": "DYNAMIC_TOPIC_CONFIG" if n in t["configs"] else "DEFAULT_CONFIG",
                }
                for n in names
            ],
        )

    async def set_config(self, request: web.Request) -> web.Response:
        t = self.topics[self._topic(request)]
        t["configs"][request.match_info["name"]] = (await request.json())["value"]
        return web.Response(status=204)

    async def partitions(self, request: web.Request) -> web.Response:
        name = self._topic(request)
        out = []
        for p in range(self.topics[name]["partitions"]):
            recs = self.records.get((name, p), [])
            out.append(
                {
                    "partition_id": p,
                    "leader_id": 1,
                    "replicas": [1],
                    "isr": [1],
                    "earliest_offset": 0,
                    "latest_offset": len(recs),
                    "size_bytes": 70 * len(recs),
                    "under_replicated": False,
                }
            )
            if self.topics[name]["configs"].get("remote.storage.enable") == "true":
                out[-1]["remote_size_bytes"] = 1 << 20  # KIP-405: the broker's remote figure
        return self._list("KafkaPartitionList", out)

    async def read_records(self, request: web.Request) -> web.Response:
        name = self._topic(request)
        recs = self.records.get((name, int(request.match_info["p"])), [])
        limit = int(request.query.get("limit", "50"))
        if "offset" in request.query:
            start = int(request.query["offset"])
            page = [r for r in recs if r["offset"] >= start][:limit]
        elif "timestamp" in request.query:
            ts = int(request.query["timestamp"])
            page = [r for r in recs if r["timestamp"] >= ts][:limit]
        else:
            page = recs[-limit:]
        nxt = page[-1]["offset"] + 1 if page else len(recs)
        return web.json_response({"kind": "KafkaRecordList", "data": page, "next_offset": nxt})

    async def produce(self, request: web.Request) -> web.Response:
        name = self._topic(request)
        body = await request.json()
        p = body.get("partition_id", 0)
        recs = self.records.setdefault((name, p), [])
        rec = {
            "partition_id": p,
            "offset": len(recs),
            "timestamp": int(time.time() * 1000),
            "key": body.get("key"),
            "value": body.get("value"),
            "headers": body.get("headers", []),
        }
        recs.append(rec)
        return web.json_response({k: rec[k] for k in ("partition_id", "offset", "timestamp")})

    async def groups(self, request: web.Request) -> web.Response:
        return self._list(
            "KafkaConsumerGroupList",
            [
                {
                    "consumer_group_id": "billing",
                    "state": "STABLE",
                    "partition_assignor": "range",
                    "is_simple": False,
                    "protocol_type": "consumer",
                }
            ],
        )

    async def group(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"consumer_group_id": "billing", "state": "STABLE", "partition_assignor": "range"}
        )

    async def consumers(self, request: web.Request) -> web.Response:
        return self._list(
            "KafkaConsumerList",
            [
                {
                    "consumer_id": "rdkafka-1",
                    "client_id": "rdkafka",
                    "instance_id": None,
                    "assignments": [{"topic_name": "orders", "partition_id": 0}],
                }
            ],
        )

    async def lags(self, request: web.Request) -> web.Response:
        self.lag = max(0, self.lag - 2)
        end = len(self.records[("orders", 0)])
        return self._list(
            "KafkaConsumerLagList",
            [
                {
                    "topic_name": "orders",
                    "partition_id": 0,
                    "current_offset": end - self.lag,
                    "log_end_offset": end,
                    "lag": self.lag,
                    "consumer_id": "rdkafka-1",
                }
            ],
        )

    async def lag_summary(self, request: web.Request) -> web.Response:
        return web.json_response({"max_lag": self.lag, "total_lag": self.lag})

    async def reset(self, request: web.Request) -> web.Response:
        body = await request.json()
        end = len(self.records[("orders", 0)])
        row = {
            "topic_name": body["topic"],
            "partition_id": 0,
            "current_offset": end - self.lag,
            "new_offset": 0,
        }
        return web.json_response({"data": [row], "dry_run": body["dry_run"]})


class Served:
    """An aiohttp app on 127.0.0.1 and a free port, in a thread with its own loop."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(app, access_log=None)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> Served:
        self._thread.start()

        async def start() -> str:
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

        self.url = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
