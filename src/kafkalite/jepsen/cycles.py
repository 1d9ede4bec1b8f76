"""Transactional dependency cycles over a history: the ww / wr / rw graph and its G0, G1c, G-single cycles.

Elle's list-append reasoning with each partition a list: offsets order the writes, polls observe them.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

# edge kinds
WW, WR, RW = "ww", "wr", "rw"
WW_SCAN = 64  # how far along a partition a ww edge looks for a writer that did not overlap


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


@dataclass
class Graph:
    """Transactions (op indexes) and their dependency edges, each labelled with its kinds."""

    edges: dict[int, dict[int, set[str]]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, a: int, b: int, kind: str) -> None:
        if a != b:
            self.edges[a].setdefault(b, set()).add(kind)

    def nodes(self) -> set[int]:
        out = set(self.edges)
        for succ in self.edges.values():
            out.update(succ)
        return out

    def successors(self, a: int, kinds: frozenset[str]) -> list[int]:
        return [b for b, k in self.edges.get(a, {}).items() if k & kinds]


@dataclass(frozen=True)
class Read:
    """One poll of one partition by a committed transaction `txn`; `at_end` says that it read up to the
    partition's (stable) end as the broker reported it, so the next write must have come after it."""

    txn: int
    key: str
    records: tuple[tuple[int, int], ...]  # (offset, value), offsets ascending
    at_end: bool


def build_graph(
    version_order: dict[str, list[int]],
    writer: dict[int, int],
    reads: Iterable[Read],
    *,
    rw_from_every_poll: bool = False,
    spans: dict[int, tuple[float, float]] | None = None,
) -> Graph:
    """The dependency graph of committed transactions.

    version_order: per key, the values in offset order (committed and observed writes only);
    writer: value -> the transaction (op index) that wrote it.
    ww: T1 wrote a value and T2 the next one in the same partition. Kafka has no write isolation: two
    producers' open transactions interleave in the partitions they share, so their offsets order
    nothing between them. Given `spans` (op index -> (invoke, completion) times), the edge goes from
    T1 to the next writer that did not overlap T1 in time (looking WW_SCAN values ahead); then a
    write cycle means an order against real time, not an interleaving (Jepsen's Redpanda 21.10.1
    analysis found such interleavings, allowed by Kafka's model).
    wr: T2 polled a value T1 wrote.
    rw: T1 polled a partition up to value v and T2 wrote the value after v: T1 did not see it, so T2
    came after. A Kafka poll returns what one fetch had, not the whole list, so by default this edge is
    drawn only from reads that reached the end the broker reported (`at_end`); `rw_from_every_poll`
    draws it from every poll, Elle's strict prefix reading.
    """
    g = Graph()
    position: dict[str, dict[int, int]] = {}
    for key, values in version_order.items():
        position[key] = {v: i for i, v in enumerate(values)}
        for i, a in enumerate(values):
            for b in values[i + 1 : i + 1 + WW_SCAN]:
                if writer[b] == writer[a]:
                    break  # b's own successors carry the order on
                if spans is None or not _overlap(spans[writer[a]], spans[writer[b]]):
                    g.add(writer[a], writer[b], WW)
                    break
    for r in reads:
        for _, v in r.records:
            if v in writer:
                g.add(writer[v], r.txn, WR)
        if not r.records or not (r.at_end or rw_from_every_poll):
            continue
        last = r.records[-1][1]
        pos = position.get(r.key, {}).get(last)
        if pos is None:
            continue
        values = version_order[r.key]
        for nxt in values[pos + 1 :]:
            if writer[nxt] != r.txn:
                g.add(r.txn, writer[nxt], RW)
                break
    return g


def strongly_connected(nodes: Iterable[int], succ: dict[int, list[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components (iterative), only those of two nodes or more."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            children = succ.get(v, [])
            descended = False
            while i < len(children):
                w = children[i]
                i += 1
                if w not in index:
                    work.append((v, i))
                    work.append((w, 0))
                    descended = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if descended:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def _subgraph(g: Graph, nodes: set[int], kinds: frozenset[str]) -> dict[int, list[int]]:
    return {a: [b for b in g.successors(a, kinds) if b in nodes] for a in nodes}


def _path(succ: dict[int, list[int]], start: int, goal: int) -> list[int] | None:
    """A shortest path start -> goal (breadth first), or None."""
    prev: dict[int, int] = {start: start}
    frontier = [start]
    while frontier:
        nxt: list[int] = []
        for a in frontier:
            for b in succ.get(a, []):
                if b not in prev:
                    prev[b] = a
                    if b == goal:
                        path = [b]
                        while path[-1] != start:
                            path.append(prev[path[-1]])
                        return path[::-1]
                    nxt.append(b)
        frontier = nxt
    return None


def _cycle_in(succ: dict[int, list[int]], comp: list[int]) -> list[int]:
    """One cycle through the first node of a strongly connected component: [a, ..., a]."""
    a = comp[0]
    for b in succ[a]:
        back = _path(succ, b, a)
        if back is not None:
            return [a, *back]
    return [a]


@dataclass(frozen=True)
class Cycle:
    kind: str  # "G0" | "G1c" | "G-single" | "G2"
    ops: tuple[int, ...]  # op indexes around the cycle, first == last
    edges: tuple[str, ...]  # the edge kinds along it


def _describe(g: Graph, kind: str, path: list[int]) -> Cycle:
    kinds = tuple("/".join(sorted(g.edges[a][b])) for a, b in itertools.pairwise(path))
    return Cycle(kind, tuple(path), kinds)


def find_cycles(g: Graph) -> list[Cycle]:
    """Cycles, at most one of each kind per strongly connected component of the whole graph:
    G0 (ww edges only), G1c (ww and wr, at least one wr), G-single (exactly one rw edge),
    G2 (a cycle that needs two rw edges or more)."""
    ww, www = frozenset({WW}), frozenset({WW, WR})
    every = frozenset({WW, WR, RW})
    nodes = g.nodes()
    found: list[Cycle] = []
    for comp in strongly_connected(sorted(nodes), _subgraph(g, nodes, every)):
        members = set(comp)
        classified = False
        ww_succ = _subgraph(g, members, ww)
        for sub in strongly_connected(comp, ww_succ):
            found.append(_describe(g, "G0", _cycle_in(ww_succ, sub)))
            classified = True
        dep_succ = _subgraph(g, members, www)
        ww_sccs = {frozenset(s) for s in strongly_connected(comp, ww_succ)}
        for sub in strongly_connected(comp, dep_succ):
            if frozenset(sub) in ww_sccs:
                continue  # a pure write cycle, already G0
            found.append(_describe(g, "G1c", _cycle_in(dep_succ, sub)))
            classified = True
        for a in comp:  # an rw edge a -> b closed by a ww/wr path b -> a
            for b in g.successors(a, frozenset({RW})):
                if b not in members:
                    continue
                back = _path(dep_succ, b, a)
                if back is not None:
                    found.append(_describe(g, "G-single", [a, *back]))
                    classified = True
                    break
            else:
                continue
            break
        if not classified:
            found.append(_describe(g, "G2", _cycle_in(_subgraph(g, members, every), comp)))
    return found
