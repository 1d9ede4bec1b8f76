"""The broker's remote tier (KIP-405): the RemoteStorageManager named by remote.log.storage.manager.class.name
and its rsm.config.* properties (Kafka's LocalTieredStorage and Aiven's plugin names where they map), and the
RemoteLogManager started with it on a single node.

Bad settings (or an unreachable bucket) fail startup with one line (ConfigError).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalite.broker.config.broker_config import BrokerConfig, ConfigError
from kafkalite.cluster.remote_log_manager import REMOTE_LOG_METADATA_TOPIC, RemoteLogManager
from kafkalite.storage.remote import LocalTieredStorage, RemoteStorageError, RemoteStorageManager
from kafkalite.storage.remote.s3_storage import S3RemoteStorageManager, S3Settings

if TYPE_CHECKING:
    from kafkalite.broker.server import BrokerServer

log = logging.getLogger("kafkalite.broker.remote_storage")

KAFKA_LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
KAFKALITE_LOCAL_TIERED_STORAGE = "kafkalite.storage.remote.LocalTieredStorage"
AIVEN_RSM = "io.aiven.kafka.tieredstorage.RemoteStorageManager"
AIVEN_FILESYSTEM = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
AIVEN_S3 = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"
# the remote log metadata topic's partition count (Kafka's rlmm.config.remote.log.metadata.topic...)
METADATA_PARTITIONS = "remote.log.metadata.topic.num.partitions"


def rsm_properties(config: BrokerConfig) -> dict[str, str]:
    """The properties under remote.log.storage.manager.impl.prefix, the prefix taken off."""
    prefix = str(config.get("remote.log.storage.manager.impl.prefix") or "rsm.config.")
    return {k[len(prefix) :]: v for k, v in config.props.items() if k.startswith(prefix)}


def build_remote_storage_manager(config: BrokerConfig) -> RemoteStorageManager:
    """The configured manager; ConfigError (one line) when it is missing, unknown, not built, or
    its directory cannot be used."""
    cls = config.get("remote.log.storage.manager.class.name")
    props = rsm_properties(config)
    if not cls:
        raise ConfigError(
            "remote.log.storage.system.enable=true needs remote.log.storage.manager.class.name "
            f"({KAFKA_LOCAL_TIERED_STORAGE} with rsm.config.dir, or {AIVEN_RSM})"
        )
    if cls in (KAFKA_LOCAL_TIERED_STORAGE, KAFKALITE_LOCAL_TIERED_STORAGE):
        root = props.get("dir")
        name = "rsm.config.dir"
    elif cls == AIVEN_RSM:
        backend = props.get("storage.backend.class", "")
        if backend == AIVEN_S3:
            return _s3_manager(props)
        if backend != AIVEN_FILESYSTEM:
            raise ConfigError(
                f"rsm.config.storage.backend.class={backend!r}: kafkalite builds "
                f"{AIVEN_FILESYSTEM} and {AIVEN_S3}"
            )
        root = props.get("storage.root")
        name = "rsm.config.storage.root"
    else:
        raise ConfigError(
            f"remote.log.storage.manager.class.name={cls}: not a manager kafkalite has (it has "
            f"{KAFKA_LOCAL_TIERED_STORAGE} and {AIVEN_RSM} with the filesystem backend)"
        )
    if not root:
        raise ConfigError(f"{cls} needs {name} (the remote storage directory)")
    try:
        return LocalTieredStorage(root)
    except RemoteStorageError as exc:
        raise ConfigError(f"{name}={root}: {exc}") from None


def _s3_manager(props: dict[str, str]) -> RemoteStorageManager:
    """Aiven's S3 backend settings (rsm.config.storage.s3.*, storage.aws.*, key.prefix)."""
    bucket = props.get("storage.s3.bucket.name")
    if not bucket:
        raise ConfigError(f"{AIVEN_S3} needs rsm.config.storage.s3.bucket.name")
    raw_part = props.get("storage.s3.multipart.upload.part.size", str(25 * 1024 * 1024))
    try:
        part = int(raw_part)
    except ValueError:
        raise ConfigError(
            f"rsm.config.storage.s3.multipart.upload.part.size={raw_part}: not a whole number"
        ) from None
    raw_timeout = props.get("storage.s3.api.call.attempt.timeout", "30000")
    try:
        attempt_timeout_s = int(raw_timeout) / 1000
    except ValueError:
        raise ConfigError(
            f"rsm.config.storage.s3.api.call.attempt.timeout={raw_timeout}: not a whole number"
        ) from None
    settings = S3Settings(
        bucket=bucket,
        endpoint_url=props.get("storage.s3.endpoint.url") or None,
        region=props.get("storage.s3.region") or None,
        access_key_id=props.get("storage.aws.access.key.id") or None,
        secret_access_key=props.get("storage.aws.secret.access.key") or None,
        path_style=props.get("storage.s3.path.style.access.enabled", "false").lower() == "true",
        prefix=props.get("key.prefix", ""),
        part_size=part,
        connect_timeout_s=min(5.0, attempt_timeout_s),
        read_timeout_s=attempt_timeout_s,
    )
    try:
        return S3RemoteStorageManager(settings)
    except RemoteStorageError as exc:
        raise ConfigError(f"rsm.config.storage.s3.*: {exc}") from None


def _metadata_partitions(config: BrokerConfig) -> int:
    prefix = str(config.get("remote.log.metadata.manager.impl.prefix") or "rlmm.config.")
    raw = config.props.get(prefix + METADATA_PARTITIONS, "50")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{prefix}{METADATA_PARTITIONS}={raw}: must be a whole number >= 1")
    return n


async def start_remote_log_manager(broker: BrokerServer) -> RemoteLogManager:
    """Build the manager and the RemoteLogManager and start it (metadata replayed first)."""
    config = broker.config
    if broker.zk_broker is not None:
        raise ConfigError(
            "remote.log.storage.system.enable=true: tiered storage is built for a single-node "
            "broker only so far (zookeeper.connect is set; a leader cannot yet write "
            "__remote_log_metadata partitions another broker leads)"
        )
    rsm = build_remote_storage_manager(config)
    partitions = _metadata_partitions(config)
    if isinstance(rsm, S3RemoteStorageManager):
        where = f"{rsm.settings.bucket}/{rsm.settings.prefix}".rstrip("/")
    elif isinstance(rsm, LocalTieredStorage):
        where = str(rsm.root)
    else:
        where = type(rsm).__name__

    def ensure_topic() -> None:
        if broker.metadata_store.get(REMOTE_LOG_METADATA_TOPIC) is None:
            broker.create_topic(
                REMOTE_LOG_METADATA_TOPIC,
                partitions,
                {"cleanup.policy": "delete", "retention.ms": "-1"},
            )

    rlm = RemoteLogManager(
        broker.broker_id,
        broker.replica_manager,
        rsm,
        task_interval_ms=int(config.get("remote.log.manager.task.interval.ms")),
        metadata_partitions=partitions,
        ensure_metadata_topic=ensure_topic,
        topic_exists=lambda t: broker.metadata_store.get(t) is not None,
        remote_log_dir=f"remote://{where}",
        remote_fetch_max_wait_ms=int(config.get("remote.fetch.max.wait.ms")),
        remote_list_offsets_timeout_ms=int(config.get("remote.list.offsets.request.timeout.ms")),
    )
    await rlm.start()
    broker.replica_manager.remote_log_manager = rlm
    log.info("tiered storage on: remote storage %s", type(rsm).__name__)
    return rlm
