"""Per-topic config overrides of a broker's logs: kept in `topic-configs/<topic>.properties` under
the first log dir, and the LogConfig of each topic built from them over the default, once per change.

Used by LogManager, under its lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import InvalidConfig

log = logging.getLogger("kafkalite.storage.manager")

TOPIC_CONFIG_DIR = "topic-configs"


class TopicOverrides:
    """The overrides of every topic that has some, and the default config beneath them."""

    def __init__(self, config_dir: Path, default_config: LogConfig) -> None:
        self.dir = config_dir
        self.default_config = default_config
        self._overrides: dict[str, dict[str, str]] = {}
        # topic -> (its overrides dict, the default config, the LogConfig built from both): valid
        # while both are the same objects (overrides are replaced on change, never edited in place)
        self._cache: dict[str, tuple[dict[str, str] | None, LogConfig, LogConfig]] = {}

    def load(self) -> None:
        """Read the stored overrides (a topic whose overrides are invalid is skipped, warned)."""
        if not self.dir.is_dir():
            return
        for p in self.dir.glob("*.properties"):
            props: dict[str, str] = {}
            for line in p.read_text().splitlines():
                line = line.strip()
                if not line or line.startswith("#") or "=" not in line:
                    continue
                k, _, v = line.partition("=")
                props[k.strip()] = v.strip()
            try:
                LogConfig.from_properties(props, self.default_config)
            except InvalidConfig as e:
                log.warning("ignoring invalid overrides for topic %s: %s", p.stem, e)
                continue
            self._overrides[p.stem] = props

    def get(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def config(self, topic: str) -> LogConfig:
        """The topic's LogConfig (its overrides over the default), built once per change: creating
        thousands of partitions of a topic must not parse its properties for each."""
        overrides = self._overrides.get(topic)
        cached = self._cache.get(topic)
        if cached is not None and cached[0] is overrides and cached[1] is self.default_config:
            return cached[2]
        cfg = LogConfig.from_properties(overrides or {}, self.default_config)
        self._cache[topic] = (overrides, self.default_config, cfg)
        return cfg

    def set(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Replace the topic's overrides and persist them."""
        self._overrides[topic] = {k: str(v) for k, v in overrides.items()}
        self._persist(topic)

    def remove(self, topic: str) -> None:
        """Forget the topic's overrides (its file goes)."""
        if self._overrides.pop(topic, None) is not None:
            self._persist(topic)

    def _persist(self, topic: str) -> None:
        """Write (or remove) the topic's file crash-safely: temporary file, fsync, rename, fsync of
        the directory (and of the log dir when the directory is new), so that a power cut cannot
        take a topic's overrides (its flush.messages, min.insync.replicas) back to the defaults."""
        created = not self.dir.is_dir()
        self.dir.mkdir(parents=True, exist_ok=True)
        if created:
            _fsync_dir(self.dir.parent)
        path = self.dir / f"{topic}.properties"
        props = self._overrides.get(topic)
        if not props:
            path.unlink(missing_ok=True)
            _fsync_dir(self.dir)
            return
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(self.dir)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
