"""Descriptor budget at broker startup: raise the soft RLIMIT_NOFILE to the hard limit, log both,
and size the storage FileCache (kafkalite.log.open.files.max) from them.
"""

from __future__ import annotations

import logging

from kafkalite.broker.config.broker_config import BrokerConfig
from kafkalite.storage.file_cache import default_capacity, raise_nofile_limit

log = logging.getLogger(__name__)


def prepare_open_files(config: BrokerConfig) -> int:
    """Raise the soft open-files limit to the hard one and return the number of segment/index
    files the log manager may keep open: kafkalite.log.open.files.max, or (at -1) half of the
    raised soft limit less a reserve for connections and everything else."""
    before, soft, hard = raise_nofile_limit()
    configured = int(config.get("kafkalite.log.open.files.max"))
    size = configured if configured > 0 else default_capacity(soft)
    log.info(
        "open files: soft limit %d (was %d), hard limit %d; up to %d segment/index files kept open "
        "(kafkalite.log.open.files.max=%d)",
        soft,
        before,
        hard,
        size,
        configured,
    )
    if size >= soft:
        log.warning(
            "kafkalite.log.open.files.max=%d is not below the open-files limit %d: connections may "
            "fail to open once the log files take every descriptor",
            size,
            soft,
        )
    return size
