"""`kafkalite brokers list|describe [--broker N]`: each broker's address, rack and controller mark with the
partitions it leads, the replicas it holds and how many of those are under-replicated (Metadata + DescribeCluster).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from kafkalite.cli.admin_common import (
    add_connection_arguments,
    add_output_argument,
    connect,
    print_json,
    print_table,
)
from kafkalite.cli.wire import CliError, WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import DescribeClusterRequest

TP = tuple[str, int]


@dataclass
class BrokerView:
    """One broker as the cluster metadata shows it; `alive` False: named in replica sets only."""

    broker_id: int
    host: str | None
    port: int | None
    rack: str | None
    controller: bool
    alive: bool = True
    led: list[TP] = field(default_factory=list)
    replicas: list[TP] = field(default_factory=list)
    under_replicated: list[TP] = field(default_factory=list)
    out_of_isr: list[TP] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.broker_id,
            "host": self.host,
            "port": self.port,
            "rack": self.rack,
            "controller": self.controller,
            "alive": self.alive,
            "leaders": len(self.led),
            "replicas": len(self.replicas),
            "underReplicated": len(self.under_replicated),
        }


def cluster_view(
    brokers: list[Any], controller_id: int, topics: list[Any]
) -> dict[int, BrokerView]:
    """Broker id -> its view, from DescribeCluster-like brokers (broker_id, host, port, rack) and the
    Metadata topics (partitions with leader, replicas and ISR). Pure; the commands print it."""
    views = {
        b.broker_id: BrokerView(b.broker_id, b.host, b.port, b.rack, b.broker_id == controller_id)
        for b in brokers
    }
    for t in topics:
        if t.error_code:
            continue
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            replicas, isr = list(p.replica_nodes), list(p.isr_nodes)
            under = len(isr) < len(replicas)
            for r in replicas:
                v = views.get(r)
                if v is None:
                    v = views[r] = BrokerView(r, None, None, None, r == controller_id, alive=False)
                v.replicas.append(tp)
                if under:
                    v.under_replicated.append(tp)
                if r not in isr:
                    v.out_of_isr.append(tp)
            if p.leader_id in views:
                views[p.leader_id].led.append(tp)
    return dict(sorted(views.items()))


def fetch_view(c: WireClient) -> dict[int, BrokerView]:
    md = c.metadata(None)
    controller_id = md.controller_id
    if 60 in c.versions:
        dc = c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        if dc.error_code:
            raise CliError(f"DescribeCluster: {ErrorCode.name_of(dc.error_code)}")
        brokers: list[Any] = list(dc.brokers)
        controller_id = dc.controller_id
    else:
        brokers = [_AsClusterBroker(b) for b in md.brokers]
    return cluster_view(brokers, controller_id, list(md.topics))


class _AsClusterBroker:
    """A Metadata broker seen as a DescribeCluster broker."""

    def __init__(self, b: Any) -> None:
        self.broker_id, self.host, self.port, self.rack = b.node_id, b.host, b.port, b.rack


def _address(v: BrokerView) -> str:
    return f"{v.host}:{v.port}" if v.host is not None else "(not alive)"


def _list(a: argparse.Namespace, views: dict[int, BrokerView]) -> None:
    if a.output == "json":
        print_json([v.summary() for v in views.values()])
        return
    print_table(
        ["ID", "ADDRESS", "RACK", "CONTROLLER", "LEADERS", "REPLICAS", "UNDER-REPLICATED"],
        [
            [
                v.broker_id,
                _address(v),
                v.rack,
                "*" if v.controller else "",
                len(v.led),
                len(v.replicas),
                len(v.under_replicated),
            ]
            for v in views.values()
        ],
    )


def _describe(a: argparse.Namespace, views: dict[int, BrokerView]) -> None:
    if a.broker is not None:
        if a.broker not in views:
            raise CliError(
                f"broker {a.broker} is not in the cluster (brokers: {','.join(map(str, views))})"
            )
        views = {a.broker: views[a.broker]}
    if a.output == "json":
        docs = []
        for v in views.values():
            d = v.summary()
            d["partitions"] = [
                {
                    "topic": t,
                    "partition": p,
                    "leader": (t, p) in v.led,
                    "inIsr": (t, p) not in v.out_of_isr,
                    "underReplicated": (t, p) in v.under_replicated,
                }
                for t, p in sorted(v.replicas)
            ]
            docs.append(d)
        print_json(docs)
        return
    for i, v in enumerate(views.values()):
        if i:
            print()
        mark = " (controller)" if v.controller else ""
        print(f"Broker {v.broker_id}{mark}\tAddress: {_address(v)}\tRack: {v.rack or '-'}")
        print(
            f"\tLeaders: {len(v.led)}\tReplicas: {len(v.replicas)}\t"
            f"UnderReplicated: {len(v.under_replicated)}"
        )
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(v.replicas):
            by_topic.setdefault(t, []).append(p)
        for t, parts in by_topic.items():
            cols = [
                ("leader", [p for p in parts if (t, p) in v.led]),
                ("follower", [p for p in parts if (t, p) not in v.led]),
                ("out of ISR", [p for p in parts if (t, p) in v.out_of_isr]),
                ("under-replicated", [p for p in parts if (t, p) in v.under_replicated]),
            ]
            print(f"\tTopic: {t}\t" + "\t".join(f"{k}: {ranges(ps)}" for k, ps in cols if ps))


def ranges(ids: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    out: list[str] = []
    for i in sorted(ids):
        if out and "-" not in out[-1].lstrip("-") and int(out[-1]) == i - 1:
            out[-1] = f"{i - 1}-{i}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _run(a: argparse.Namespace) -> int:
    with connect(a) as c:
        try:
            views = fetch_view(c)
        except OSError as exc:  # the broker stopped answering (timeout, reset)
            raise CliError(
                f"{a.bootstrap_server} stopped answering: {exc.strerror or exc}"
            ) from None
    (_list if a.action == "list" else _describe)(a, views)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "brokers",
        help="the brokers: address, rack, controller, partitions led, replicas, under-replicated",
    )
    bsub = p.add_subparsers(dest="action", required=True)
    ls = bsub.add_parser("list", help="one line per broker")
    add_connection_arguments(ls)
    add_output_argument(ls)
    d = bsub.add_parser("describe", help="each broker (or --broker N) with its partitions")
    add_connection_arguments(d)
    d.add_argument("--broker", type=int, metavar="N", help="only this broker")
    add_output_argument(d)
    p.set_defaults(func=_run)
