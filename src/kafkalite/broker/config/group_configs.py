"""Per-group configs (ConfigResource GROUP = 32): each group's overrides over the broker's group settings,
checked as Kafka checks them, kept in `<first log dir>/group-configs/` (one node) or /config/groups (ZooKeeper).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote

from kafkalite.broker.config.config_types import (
    SOURCE_DEFAULT,
    SOURCE_GROUP,
    SOURCE_STATIC_BROKER,
    T_INT,
)
from kafkalite.broker.config.dynamic_config import read_properties, write_properties_atomically
from kafkalite.broker.config.group_config_defs import (
    AUTO_OFFSET_RESET,
    BY_DURATION,
    DLQ_TOPIC,
    GROUP_CONFIG_DEFS,
    ISOLATION_LEVEL,
    group_config_defaults,
    group_configs_error,
    parse_iso_duration_ms,
)
from kafkalite.broker.config.topic_configs import ConfigEntry
from kafkalite.cluster.zk import KafkaZkClient
from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.broker.group_configs")

GROUP_CONFIG_DIR = "group-configs"
_SUFFIX = ".properties"
_MAX_FILE_STEM = 200  # bytes; longer escaped group ids get a hashed file name
_GROUP_ID_KEY = "kafkalite.group.id"  # in a hashed file only: the group id it belongs to

Edit = Callable[[dict[str, str]], tuple[dict[str, str] | None, str | None]]


@dataclass(frozen=True)
class ShareGroupConfig:
    """What a share group runs with: its overrides over the broker's group.share.* settings."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    auto_offset_reset: str  # latest | earliest | by_duration:<ISO-8601 duration>
    isolation_level: str  # read_uncommitted | read_committed
    session_timeout_ms: int
    heartbeat_interval_ms: int
    dlq_topic: str | None

    @property
    def auto_offset_reset_duration_ms(self) -> int | None:
        """The look-back of by_duration:<duration> in ms; None for latest / earliest."""
        if not self.auto_offset_reset.startswith(BY_DURATION):
            return None
        return parse_iso_duration_ms(self.auto_offset_reset[len(BY_DURATION) :])

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


# -- where overrides are kept ------------------------------------------------------------------------


class GroupConfigStore(Protocol):
    """Group overrides by group id; `write` is a compare-and-set on the version `read` gave."""

    def load_all(self) -> dict[str, dict[str, str]]: ...
    def read(self, group_id: str) -> tuple[dict[str, str], int]: ...
    def write(self, group_id: str, config: dict[str, str], version: int) -> bool: ...


def group_file_stem(group_id: str) -> str:
    """A group id as a file name: percent-escaped (no '/', no '.' or '..'); hashed when too long."""
    stem = quote(group_id, safe="").replace(".", "%2E")
    if stem == "" or len(stem.encode()) > _MAX_FILE_STEM:
        return "sha256-" + hashlib.sha256(group_id.encode()).hexdigest()
    return stem


class LocalGroupConfigStore:
    """One properties file per group with overrides: `<directory>/<escaped group id>.properties`,
    written atomically; a group without overrides has no file. One writer (this broker)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, group_id: str) -> Path:
        return self.directory / (group_file_stem(group_id) + _SUFFIX)

    def load_all(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if not self.directory.is_dir():
            return out
        for path in sorted(self.directory.glob("*" + _SUFFIX)):
            try:
                props = read_properties(path)
            except (OSError, UnicodeDecodeError) as exc:
                log.error("cannot read group configs %s: %s; ignoring it", path, exc)
                continue
            stem = path.name[: -len(_SUFFIX)]
            group_id = props.pop(_GROUP_ID_KEY, None)
            if group_id is None:
                group_id = unquote(stem)
            out[group_id] = props
        return out

    def read(self, group_id: str) -> tuple[dict[str, str], int]:
        path = self.path(group_id)
        if not path.is_file():
            return {}, -1
        props = read_properties(path)
        props.pop(_GROUP_ID_KEY, None)
        return props, 0

    def write(self, group_id: str, config: dict[str, str], version: int) -> bool:
        path = self.path(group_id)
        if not config:
            path.unlink(missing_ok=True)
            return True
        props = dict(config)
        if path.name.startswith("sha256-"):
            props[_GROUP_ID_KEY] = group_id
        write_properties_atomically(path, props)
        return True


class ZkGroupConfigStore:
    """/config/groups/<group id> as `{"version":1,"config":{...}}`, each write announced under
    /config/changes so every broker reloads that group."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    def load_all(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for group_id in self.zk.configs.group_config_ids():
            out[group_id], _ = self.zk.configs.group_config(group_id)
        return out

    def read(self, group_id: str) -> tuple[dict[str, str], int]:
        return self.zk.configs.group_config(group_id)

    def write(self, group_id: str, config: dict[str, str], version: int) -> bool:
        return self.zk.configs.write_group_config(group_id, config, version)


# -- the broker's view -------------------------------------------------------------------------------


def _usable(group_id: str, props: Mapping[str, str]) -> dict[str, str]:
    """Stored overrides minus names kafkalite does not know and ints that do not parse (logged)."""
    kept: dict[str, str] = {}
    for name, value in props.items():
        d = GROUP_CONFIG_DEFS.get(name)
        if d is None:
            log.error("group %r: ignoring unknown stored group config %s=%s", group_id, name, value)
            continue
        if d.type == T_INT:
            try:
                int(value.strip())
            except ValueError:
                log.error("group %r: ignoring stored group config %s=%r", group_id, name, value)
                continue
        kept[name] = value
    return kept


_SHARE_CACHE_MAX = 10_000


class GroupConfigManager:
    """Group overrides in memory (reads are dict lookups on the event loop); changes go to the
    store off the loop, one at a time on this broker and compare-and-set across brokers."""

    def __init__(self, broker_props: Mapping[str, str], store: GroupConfigStore) -> None:
        self.broker_props = dict(broker_props)
        self.store = store
        self._overrides: dict[str, dict[str, str]] = {}
        self._defaults = group_config_defaults(self.broker_props)
        self._lock = asyncio.Lock()
        # share_config() by group id, dropped whenever overrides change (every ShareFetch reads it)
        self._share: dict[str, ShareGroupConfig] = {}

    # -- loading
    def _install(self, group_id: str, props: Mapping[str, str]) -> None:
        self._share.pop(group_id, None)
        kept = _usable(group_id, props)
        why = group_configs_error(kept, self.broker_props)
        if why is not None:  # e.g. a broker max lowered since: kept, as Kafka keeps it
            log.warning("group %r: stored configs %s no longer validate: %s", group_id, kept, why)
        if kept:
            self._overrides[group_id] = kept
        else:
            self._overrides.pop(group_id, None)

    async def load(self) -> None:
        """Read every group's overrides from the store."""
        stored = await asyncio.to_thread(self.store.load_all)
        self._overrides.clear()
        self._share.clear()
        for group_id, props in stored.items():
            self._install(group_id, props)
        if self._overrides:
            log.info("loaded the configs of %d group(s)", len(self._overrides))

    async def reload(self, group_ids: Iterable[str]) -> None:
        """Another broker changed these groups' configs (a /config/changes notification)."""
        for group_id in dict.fromkeys(group_ids):
            try:
                props, _ = await asyncio.to_thread(self.store.read, group_id)
            except Exception as exc:
                log.warning("cannot reload the configs of group %r: %r", group_id, exc)
                continue
            self._install(group_id, props)
            log.info("configs of group %r reloaded: %s", group_id, props)

    # -- reading
    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._overrides.get(group_id, {}))

    def groups(self) -> list[str]:
        """The groups that have overrides."""
        return sorted(self._overrides)

    def defaults(self) -> dict[str, str]:
        return dict(self._defaults)

    def effective(self, group_id: str) -> dict[str, str]:
        """Every group config of the group: its overrides over the broker's settings."""
        out = dict(self._defaults)
        out.update(self._overrides.get(group_id, {}))
        return out

    def _int(self, values: Mapping[str, str], name: str) -> int:
        try:
            return int(values[name].strip())
        except ValueError:  # only a stored value the checks no longer cover gets here
            return int(self._defaults[name])

    def share_config(self, group_id: str) -> ShareGroupConfig:
        found = self._share.get(group_id)
        if found is not None:
            return found
        if len(self._share) >= _SHARE_CACHE_MAX:
            self._share.clear()
        found = self._share[group_id] = self._share_config(group_id)
        return found

    def _share_config(self, group_id: str) -> ShareGroupConfig:
        v = self.effective(group_id)
        reset = v[AUTO_OFFSET_RESET].strip()
        lowered = reset.lower()
        if lowered.startswith(BY_DURATION):
            reset = BY_DURATION + reset[len(BY_DURATION) :].upper()
        else:
            reset = lowered
        return ShareGroupConfig(
            record_lock_duration_ms=self._int(v, "share.record.lock.duration.ms"),
            delivery_count_limit=self._int(v, "share.delivery.count.limit"),
            auto_offset_reset=reset,
            isolation_level=v[ISOLATION_LEVEL],
            session_timeout_ms=self._int(v, "share.session.timeout.ms"),
            heartbeat_interval_ms=self._int(v, "share.heartbeat.interval.ms"),
            dlq_topic=v[DLQ_TOPIC] or None,
        )

    def describe(self, group_id: str) -> list[ConfigEntry]:
        """DescribeConfigs entries of a GROUP resource: every group config, DYNAMIC_GROUP_CONFIG (8)
        when the group overrides it, else DEFAULT_CONFIG (5); synonyms name the broker setting."""
        overrides = self._overrides.get(group_id, {})
        out: list[ConfigEntry] = []
        for name in sorted(GROUP_CONFIG_DEFS):
            d = GROUP_CONFIG_DEFS[name]
            synonyms: list[tuple[str, str | None, int]] = []
            if name in overrides:
                synonyms.append((name, overrides[name], SOURCE_GROUP))
            if d.broker_default is not None:
                static = d.broker_default in self.broker_props
                source = SOURCE_STATIC_BROKER if static else SOURCE_DEFAULT
                synonyms.append((d.broker_default, self._defaults[name], source))
            else:
                synonyms.append((name, d.default, SOURCE_DEFAULT))
            value = overrides.get(name, self._defaults[name])
            source = SOURCE_GROUP if name in overrides else SOURCE_DEFAULT
            out.append(ConfigEntry(name, value, source, False, d.type, d.doc, synonyms))
        return out

    # -- changing
    def check(self, new: Mapping[str, str]) -> str | None:
        """Why `new` cannot be a group's whole set of overrides, or None."""
        return group_configs_error(new, self.broker_props)

    async def alter(
        self, group_id: str, edit: Edit, validate_only: bool = False
    ) -> tuple[int, str | None]:
        """Apply `edit` (current overrides -> new overrides, or an error) to the group's stored
        overrides, check the result as a whole and store it: (error code, message)."""
        if group_id == "":
            return int(ErrorCode.INVALID_REQUEST), "Default group resources are not allowed."
        async with self._lock:
            while True:  # another broker may write between read and write: read again
                current, version = await asyncio.to_thread(self.store.read, group_id)
                new, err = edit(dict(current))
                if new is None:
                    return int(ErrorCode.INVALID_CONFIG), err
                why = self.check(new)
                if why is not None:
                    log.info("configs of group %r refused: %s", group_id, why)
                    return int(ErrorCode.INVALID_CONFIG), why
                if validate_only:
                    return 0, None
                if await asyncio.to_thread(self.store.write, group_id, new, version):
                    self._install(group_id, new)
                    log.info("configs of group %r now %s", group_id, new)
                    return 0, None
