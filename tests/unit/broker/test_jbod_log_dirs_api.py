"""AlterReplicaLogDirs and DescribeLogDirs on one broker with two log dirs: partitions spread over both,
a replica moved online (DescribeLogDirs shows it in its new dir, nothing lost), bad requests.
"""

from __future__ import annotations

import time
from pathlib import Path

from kafkalite.cli.wire import WireClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages.admin import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
)
from kafkalite.records.batch import build_batch, iter_batches
from kafkalite.testing import Broker

TOPIC = "jbod"
Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
Top = Dir.AlterReplicaLogDirTopic


def _where(wc: WireClient) -> dict[tuple[int, bool], str]:
    """(partition, is_future) -> log dir, from DescribeLogDirs."""
    resp = wc.send(DescribeLogDirsRequest(topics=None))
    out = {}
    for r in resp.results:
        assert r.error_code == 0
        for t in r.topics:
            if t.name == TOPIC:
                for p in t.partitions:
                    out[(p.partition_index, p.is_future_key)] = r.log_dir
    return out


def _alter(wc: WireClient, path: str, topic: str, parts: list[int]) -> dict[int, int]:
    resp = wc.send(
        AlterReplicaLogDirsRequest(
            dirs=[Dir(path=path, topics=[Top(name=topic, partitions=parts)])]
        )
    )
    return {p.partition_index: p.error_code for t in resp.results for p in t.partitions}


def test_replica_moves_between_log_dirs_while_written(tmp_path: Path) -> None:
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    with Broker(tmp_path / "unused", config={"log.dirs": f"{a},{b}"}) as broker:
        broker.create_topic(TOPIC, partitions=2)
        lm = broker.server.log_manager
        lg = lm.get_log(TOPIC, 0)
        assert lg is not None

        def append(n: int, tag: int) -> None:
            for i in range(n):
                recs = [(None, b"%d-%d" % (tag, i) + b"x" * 500, [], 1000)]
                broker.call(lambda r=recs: lg.append_as_leader(build_batch(r), 0))

        append(400, 0)
        with WireClient(broker.bootstrap_servers, timeout=10) as wc:
            where = _where(wc)
            assert {where[(0, False)], where[(1, False)]} == {str(a), str(b)}  # spread over both
            src = where[(0, False)]
            dest = str(b) if src == str(a) else str(a)
            with lg._lock:  # appends wait, so the copy catches up but cannot take the log's place
                assert _alter(wc, dest, TOPIC, [0]) == {0: ErrorCode.NO_ERROR}
                deadline = time.monotonic() + 20
                while (0, True) not in (where := _where(wc)) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert where[(0, True)] == dest and where[(0, False)] == src  # the future copy
            append(100, 1)  # written while the move may still be finishing
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                where = _where(wc)
                if where.get((0, False)) == dest and (0, True) not in where:
                    break
                time.sleep(0.05)
            assert where.get((0, False)) == dest, where
            append(10, 2)
            assert lg.log_end_offset == 510 and lg.dir.parent == Path(dest)
            # bad requests, per partition
            assert _alter(wc, str(tmp_path / "nope"), TOPIC, [1]) == {
                1: ErrorCode.LOG_DIR_NOT_FOUND
            }
            assert _alter(wc, dest, "no-such-topic", [0]) == {
                0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            }
            assert _alter(wc, dest, TOPIC, [7]) == {7: ErrorCode.NOT_LEADER_OR_FOLLOWER}
        values = []
        off = 0
        while off < lg.log_end_offset:
            info = lg.read(off, 1 << 20)
            assert info.slice is not None
            for batch in iter_batches(info.slice.read_bytes()):
                values += [r.value for r in batch.records]
                off = batch.last_offset + 1
        assert [v.split(b"x")[0] for v in values] == (
            [b"0-%d" % i for i in range(400)]
            + [b"1-%d" % i for i in range(100)]
            + [b"2-%d" % i for i in range(10)]
        )
