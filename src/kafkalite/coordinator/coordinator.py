"""GroupCoordinator: the classic-group coordinator a broker drives, combining membership, offsets and
administration with the clock-driven timers (`tick`) and the `__consumer_offsets` load/unload hooks.
"""

from __future__ import annotations

from kafkalite.coordinator.consumer_groups import ConsumerGroups
from kafkalite.coordinator.liveness import Liveness
from kafkalite.coordinator.offsets import Offsets
from kafkalite.coordinator.share_groups import ShareGroups


class GroupCoordinator(ConsumerGroups, ShareGroups, Liveness, Offsets):
    """Pure-logic group coordinator.

    The broker supplies `append(partition, records) -> Deferred[ErrorCode]` (write to
    `__consumer_offsets`, complete on the loop thread), a millisecond `clock`, and calls:

    - `load_partition(p, records)` (or begin_loading/replay/finish_loading) for each partition it leads,
      `unload(p)` when it stops leading one;
    - the operations: `join_group`, `sync_group` and `commit_offsets`, `delete_offsets`, `delete_groups`
      return a `Deferred` to await; `heartbeat`, `leave_group`, `fetch_offsets`, `describe_groups`,
      `list_groups` answer at once;
    - `tick()` whenever `next_deadline()` is reached (or simply every ~100 ms) to run session,
      rebalance, initial-delay and pending-sync timers and the offset retention check.
    """

    def tick(self) -> None:
        """Fire every timer that is due at the clock's current time."""
        now = self.now()
        for group in self._live_groups():
            if self.groups.get(group.group_id) is group:
                if group.consumer is not None:
                    self._expire_consumer_members(group, now)
                else:
                    self._expire_group_timers(group, now)
        self._expire_share_members(now)
        if self._next_expiry_check is None:
            self._next_expiry_check = now + self.config.offsets_retention_check_interval_ms
        elif now >= self._next_expiry_check:
            self._next_expiry_check = now + self.config.offsets_retention_check_interval_ms
            self.expire_offsets()

    def next_deadline(self) -> int | None:
        """The earliest time `tick` has something to do, or None when nothing is scheduled."""
        deadlines = [
            d
            for g in self._live_groups()
            for d in (self._consumer_deadlines(g) if g.consumer else self._group_deadlines(g))
        ]
        deadlines += self._share_deadlines()
        if self._next_expiry_check is not None:
            deadlines.append(self._next_expiry_check)
        return min(deadlines, default=None)
