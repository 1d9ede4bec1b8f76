"""The broker's KIP-405 tiered-storage properties under Kafka's names: the system switch, the remote log
manager's interval, the local part's retention defaults and the remote storage / metadata manager classes.

broker.config_defs assembles them into the one table; `rsm.config.*` / `rlmm.config.*` go to the managers.
"""

from __future__ import annotations

from kafkalite.broker.config.config_types import T_BOOLEAN, T_INT, T_LONG, T_STRING, ConfigDef
from kafkalite.broker.config.config_types import define as _d

# the managers' own properties start with these (Kafka's remote.log.*.impl.prefix defaults)
RSM_PREFIX = "rsm.config."
RLMM_PREFIX = "rlmm.config."

REMOTE_LOG_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _d(
        "remote.log.storage.system.enable",
        T_BOOLEAN,
        "false",
        "Enable tiered storage (KIP-405) on this broker: topics may then set remote.storage.enable.",
    ),
    _d(
        "remote.log.manager.task.interval.ms",
        T_LONG,
        "30000",
        "How often the remote log manager copies rolled segments and applies remote retention.",
        at_least=1,
    ),
    _d(
        "remote.log.manager.copier.thread.pool.size",
        T_INT,
        "10",
        "Kafka's copier threads. kafkalite copies one segment at a time per broker on a worker "
        "thread; the value is accepted and not used.",
        at_least=-1,
    ),
    _d(
        "remote.fetch.max.wait.ms",
        T_INT,
        "500",
        "KIP-1018: how long a Fetch waits for a read from the remote tier; past it the partition "
        "is answered with no records and no error (the client fetches again), as Kafka's "
        "DelayedRemoteFetch expires, and DelayedRemoteFetchMetrics ExpiresPerSec counts it.",
        at_least=1,
    ),
    _d(
        "remote.list.offsets.request.timeout.ms",
        T_LONG,
        "30000",
        "KIP-1075: how long a ListOffsets by timestamp waits for the remote tier's answer; past "
        "it the partition answers REQUEST_TIMED_OUT.",
        at_least=1,
    ),
    _d(
        "remote.log.storage.manager.class.name",
        T_STRING,
        None,
        "The RemoteStorageManager: org.apache.kafka.server.log.remote.storage.LocalTieredStorage "
        "(a directory, rsm.config.dir) or io.aiven.kafka.tieredstorage.RemoteStorageManager with "
        "its filesystem (rsm.config.storage.root) or S3 backend (rsm.config.storage.s3.bucket.name, "
        ".endpoint.url, .region, .path.style.access.enabled, storage.aws.*).",
    ),
    _d(
        "remote.log.storage.manager.impl.prefix",
        T_STRING,
        RSM_PREFIX,
        "Prefix of the properties passed to the RemoteStorageManager.",
    ),
    _d(
        "remote.log.metadata.manager.class.name",
        T_STRING,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        "The remote log metadata manager: the one built keeps it in __remote_log_metadata.",
        valid=(
            "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        ),
    ),
    _d(
        "remote.log.metadata.manager.impl.prefix",
        T_STRING,
        RLMM_PREFIX,
        "Prefix of the properties passed to the remote log metadata manager.",
    ),
    _d(
        "log.local.retention.ms",
        T_LONG,
        "-2",
        "Default local.retention.ms: how long copied segments stay local (-2: log.retention.ms).",
        at_least=-2,
    ),
    _d(
        "log.local.retention.bytes",
        T_LONG,
        "-2",
        "Default local.retention.bytes (-2: log.retention.bytes).",
        at_least=-2,
    ),
)
