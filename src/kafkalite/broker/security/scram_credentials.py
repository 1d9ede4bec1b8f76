"""The broker's SCRAM credentials in memory: loaded from the metadata store at start, written through
it (AlterUserScramCredentials), reloaded per user on ZooKeeper change notifications in cluster mode.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterable, Mapping

from kafkalite.cluster.metadata import MetadataStore
from kafkalite.security.scram import ScramCredential

log = logging.getLogger("kafkalite.broker.scram")


class ScramCredentialCache:
    """user -> mechanism -> credential. Lookups are synchronous dict reads on the event loop (the
    SASL exchange); writes and reloads go to the store off the loop."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._users: dict[str, dict[str, ScramCredential]] = {}

    async def load(self) -> None:
        self._users = await asyncio.to_thread(self.store.scram_credentials)
        if self._users:
            log.info("loaded SCRAM credentials of %d user(s)", len(self._users))

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(c) for u, c in self._users.items()}

    def _set(self, user: str, creds: Mapping[str, ScramCredential]) -> None:
        if creds:
            self._users[user] = dict(creds)
        else:
            self._users.pop(user, None)

    async def alter(
        self, user: str, upsert: Mapping[str, ScramCredential], delete: Collection[str]
    ) -> None:
        creds = await asyncio.to_thread(self.store.alter_scram_credentials, user, upsert, delete)
        self._set(user, creds)
        log.info(
            "SCRAM credentials of user %s altered: now %s",
            user,
            ", ".join(sorted(creds)) or "none",
        )

    async def reload(self, users: Iterable[str]) -> None:
        """Another broker changed these users' credentials (a /config/changes notification)."""
        for user in dict.fromkeys(users):
            try:
                creds = await asyncio.to_thread(self.store.user_scram_credentials, user)
            except Exception as exc:
                log.warning("cannot reload the SCRAM credentials of user %s: %r", user, exc)
                continue
            self._set(user, creds)
            log.info("SCRAM credentials of user %s reloaded: %s", user, sorted(creds) or "none")
