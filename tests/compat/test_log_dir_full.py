"""A full disk: one log dir on a small tmpfs fills up under a confluent-kafka producer. The broker answers
KAFKA_STORAGE_ERROR for that dir's partitions, keeps serving the other dir, and after space is freed and a
restart every acknowledged record is there exactly once at its offset.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kafkalite.testing import Broker

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TMPFS_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(mnt)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _produce(bs: str, topic: str, n: int, size: int) -> tuple[dict[int, bytes], int]:
    """(acknowledged offset -> value, failed deliveries)."""
    acked: dict[int, bytes] = {}
    failed = [0]

    def cb(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]
        else:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 4000, "retries": 2, "log_level": 0})  # fmt: skip
    for i in range(n):
        value = b"%08d" % i + os.urandom(size - 8)
        p.produce(topic, value, partition=0, on_delivery=cb)
        if i % 50 == 0:
            p.poll(0)
    p.flush(30)
    return acked, failed[0]


def _read(bs: str, topic: str) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    idle = 0
    while idle < 4:
        msgs = c.consume(500, timeout=1)
        idle = idle + 1 if not msgs else 0
        out += [(m.offset(), m.value()) for m in msgs if m.error() is None]
    c.close()
    return out


def test_a_full_log_dir_goes_offline_and_loses_no_acknowledged_record(
    small_disk: Path, tmp_path: Path
) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (TMPFS_BYTES // 2))
    big = tmp_path / "big"
    config = {"log.dirs": f"{small_disk / 'logs'},{big}", "num.partitions": "1"}
    with Broker(tmp_path / "unused", config=config) as b:
        bs = b.bootstrap_servers
        b.create_topic("on-small")  # the first topic lands in the first (emptier) dir
        b.create_topic("on-big")
        lm = b.server.log_manager
        assert lm._log_dir_of[("on-small", 0)].parent == small_disk
        # ~3 MB into a dir with ~2 MB free: the disk fills during the run
        acked, failed = _produce(bs, "on-small", 3000, 1000)
        assert failed > 0 and acked, (len(acked), failed)
        assert [d.parent for d in lm.offline_dirs] == [small_disk]
        # the other dir keeps serving, on the same broker and connections
        ok, bad = _produce(bs, "on-big", 200, 1000)
        assert bad == 0 and len(ok) == 200
    filler.unlink()  # space again; a restart recovers the dir from its last flushed state
    with Broker(tmp_path / "unused", config=config) as b:
        got = _read(b.bootstrap_servers, "on-small")
        big_got = _read(b.bootstrap_servers, "on-big")
    offsets = [o for o, _ in got]
    found = dict(got)
    lost = [o for o in acked if found.get(o) != acked[o]]
    dup = len(offsets) - len(set(offsets))
    print(f"acknowledged {len(acked)}, failed {failed}, lost {len(lost)}, duplicated {dup}")
    assert not lost and dup == 0
    assert offsets == list(range(len(offsets)))  # contiguous from 0, nothing torn served
    assert len(big_got) == 200
