"""Share sessions (KIP-932): a member's session on this share-partition leader, its epoch and the
share-partitions it fetched, kept in a cache that forgets sessions no request used for long.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode

E = ErrorCode


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class ShareSession:
    """One member's share session on this broker: the partitions it fetches and the next epoch."""

    group_id: str
    member_id: str
    next_epoch: int
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)
    last_used_ms: int = 0


class ShareSessionCache:
    """KIP-932 share sessions keyed by (group, member): epoch 0 opens one, -1 closes it, every other
    request must carry the next epoch."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> ShareSession:
        session = ShareSession(group_id, member_id, 1, last_used_ms=now_ms())
        self.sessions[(group_id, member_id)] = session
        return session

    def existing(
        self, group_id: str, member_id: str, epoch: int
    ) -> tuple[ShareSession | None, ErrorCode, str | None]:
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return (
                None,
                E.SHARE_SESSION_NOT_FOUND,
                f"no share session for member {member_id} of group {group_id} on this broker",
            )
        if epoch == -1:
            return session, E.NO_ERROR, None
        if epoch != session.next_epoch:
            return (
                None,
                E.INVALID_SHARE_SESSION_EPOCH,
                f"share session epoch {epoch}, expected {session.next_epoch}",
            )
        session.next_epoch = 1 if session.next_epoch >= 2**31 - 1 else session.next_epoch + 1
        session.last_used_ms = now_ms()
        return session, E.NO_ERROR, None

    def close(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)

    def expire(self, now: int, idle_ms: int) -> list[ShareSession]:
        """Sessions no request used for `idle_ms` (their client died without closing them)."""
        gone = [s for s in self.sessions.values() if now - s.last_used_ms > idle_ms]
        for s in gone:
            del self.sessions[(s.group_id, s.member_id)]
        return gone
