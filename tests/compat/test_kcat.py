"""kcat (librdkafka's command-line client) against kafkalite: produce with keys, headers and every codec,
consume to end, metadata listing, and offset lookup by timestamp."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

pytestmark = pytest.mark.compat


ALSO_ON_CLUSTER = True  # every test here runs on one broker and on an RF=3 cluster


def run(kcat: str, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    r = subprocess.run([kcat, *args], input=data, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_every_codec(broker, topic, kcat, codec):
    bs = broker.bootstrap_servers
    lines = [f"key{i}:value{i}" for i in range(200)] + [":empty-key", "k-empty:"]
    run(
        kcat,
        "-b",
        bs,
        "-P",
        "-t",
        topic,
        "-K:",
        "-z",
        codec,
        "-H",
        "src=kcat",
        data="\n".join(lines).encode() + b"\n",
    )
    out = run(
        kcat, "-b", bs, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%k:%s|%h|%o\n"
    ).stdout.decode()
    rows = out.splitlines()
    assert [r.split("|")[0] for r in rows] == lines
    assert all(r.split("|")[1] == "src=kcat" for r in rows)
    assert [int(r.split("|")[2]) for r in rows] == list(range(len(lines)))


def test_metadata_listing(broker, topic, kcat):
    run(kcat, "-b", broker.bootstrap_servers, "-P", "-t", topic, data=b"x\n")
    out = run(kcat, "-b", broker.bootstrap_servers, "-L", "-t", topic).stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in out
    leader = re.search(r"partition 0, leader (\d+)", out)
    assert leader is not None and f"broker {leader.group(1)} at " in out  # a broker it listed


def test_consume_from_timestamp(broker, topic, kcat):
    bs = broker.bootstrap_servers
    run(kcat, "-b", bs, "-P", "-t", topic, data=b"old1\nold2\n")
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    run(kcat, "-b", bs, "-P", "-t", topic, data=b"new1\nnew2\n")
    out = run(
        kcat, "-b", bs, "-C", "-t", topic, "-e", "-o", f"s@{cut}", "-f", "%s\n"
    ).stdout.decode()
    assert out.split() == ["new1", "new2"]
