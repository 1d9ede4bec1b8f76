"""Share-partition state through a real broker: SharePersister initializes, writes and reads it through the
share coordinator, `__share_group_state` is created on first need, and the state survives a restart.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from kafkalite.broker.coordinators.share_persister import PersisterStateBatch, ShareStateRead
from kafkalite.coordinator.share_records import SHARE_GROUP_STATE_TOPIC
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import Broker

E = ErrorCode
B = PersisterStateBatch
PROPS = {
    "share.coordinator.state.topic.num.partitions": "3",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
}


def _topic_id(b: Broker, name: str) -> uuid.UUID:
    b.create_topic(name, 2)
    meta = b.server.metadata_cache.topic(name)
    assert meta is not None
    topic_id: uuid.UUID = meta.topic_id
    return topic_id


def test_state_is_written_read_and_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Broker(data, config=PROPS) as b:
        assert SHARE_GROUP_STATE_TOPIC not in b.topics()  # created on first need only
        topic_id = _topic_id(b, "shared")
        persister = b.server.share_persister
        assert b.call(persister.read, "g", topic_id, 0, 0) == ShareStateRead(
            E.NO_ERROR, None, 0, -1
        )
        assert b.call(persister.initialize, "g", topic_id, 0, 1, 100) == E.NO_ERROR
        assert SHARE_GROUP_STATE_TOPIC in b.topics()
        batches = (B(100, 104, 2, 1), B(105, 109, 0, 2))
        assert b.call(persister.write, "g", topic_id, 0, 1, 3, 100, batches) == E.NO_ERROR
        assert (
            b.call(persister.write, "g", topic_id, 0, 1, 3, -1, [B(105, 106, 4, 3)]) == E.NO_ERROR
        )
        assert b.call(persister.write, "g", topic_id, 1, 2, 0, 7, []) == E.NO_ERROR
        assert b.call(persister.write, "g", topic_id, 0, 0, 3, -1, []) == E.FENCED_STATE_EPOCH
        assert b.call(persister.write, "g", topic_id, 0, 1, 2, -1, []) == E.FENCED_LEADER_EPOCH
        expected = ShareStateRead(
            E.NO_ERROR, None, 1, 100, (B(100, 104, 2, 1), B(105, 106, 4, 3), B(107, 109, 0, 2))
        )
        assert b.call(persister.read, "g", topic_id, 0, 3) == expected
        assert b.call(persister.initialize, "g2", topic_id, 0, 0, 5) == E.NO_ERROR
        assert b.call(persister.delete, "g2", topic_id, 0) == E.NO_ERROR
    with Broker(data, config=PROPS) as b:
        persister = b.server.share_persister
        assert b.call(persister.read, "g", topic_id, 0, 3) == expected
        assert b.call(persister.read_summary, "g", topic_id, 1, 0) == ShareStateRead(
            E.NO_ERROR, None, 2, 7
        )
        assert b.call(persister.read, "g2", topic_id, 0, 0) == ShareStateRead(
            E.NO_ERROR, None, 0, -1
        )
        # the fence by leader epoch was reloaded with the state
        assert b.call(persister.write, "g", topic_id, 0, 1, 2, -1, []) == E.FENCED_LEADER_EPOCH
