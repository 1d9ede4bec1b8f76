"""The request dispatch table: API key -> handler module under broker/apis and its family subpackages
(data/, metadata/, groups/, ...), discovered at startup (a module that fails to import, or defines no
handler, fails the broker's start; so does an API key two modules claim).

ApiVersions answers are generated from this table; modules may narrow versions (MIN_VERSION / MAX_VERSION).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import kafkalite.protocol.messages  # noqa: F401  (registers every API)
from kafkalite.broker.context import RequestContext
from kafkalite.protocol.messages.api_versions import ApiVersionsResponse
from kafkalite.protocol.schema import APIS, Api

log = logging.getLogger("kafkalite.broker.dispatch")

Handler = Callable[[RequestContext, Any], Awaitable[Any]]  # the codec boundary (below)
"""A module's `handle` as the table holds it, at the codec boundary: each module types its request and
answer (`handle(ctx, request: ProduceRequest) -> ...`); here the request is whatever the API's decoder
made and the answer whatever its encoder takes (a Response, or a hot path's own result), a
DeferredResponse / SlicedResponse, or None."""


@dataclass(frozen=True)
class HandlerEntry:
    api: Api
    min_version: int
    max_version: int
    handle: Handler
    module: ModuleType
    # optional hand-written codecs of a hot API: decode_request(buf, pos, version) -> request | None
    # (None: use the schema) and encode_response(out, response, version)
    decode_request: Callable[[bytes | bytearray, int, int], Any] | None = None  # codec boundary
    encode_response: Callable[[bytearray, Any, int], None] | None = None  # codec boundary

    @property
    def key(self) -> int:
        return self.api.key

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _entry_of(module: ModuleType) -> HandlerEntry | None:
    handle = getattr(module, "handle", None)
    api = getattr(module, "API", None)
    if api is None and hasattr(module, "API_KEY"):
        api = APIS.get(module.API_KEY)
    if handle is None or api is None:
        return None
    if not isinstance(api, Api):
        raise TypeError(f"{module.__name__}.API is not a schema Api")
    lo = max(api.min_version, getattr(module, "MIN_VERSION", api.min_version))
    hi = min(api.max_version, getattr(module, "MAX_VERSION", api.max_version))
    return HandlerEntry(
        api,
        lo,
        hi,
        handle,
        module,
        getattr(module, "decode_request", None),
        getattr(module, "encode_response", None),
    )


def _module_names(pkg: ModuleType) -> list[str]:
    """The dotted names of the handler modules under `pkg`, its family subpackages included, sorted.
    A subpackage's `__init__`, and modules or subpackages whose name starts with '_' (shared helpers),
    hold no handler. A subpackage that fails to import fails discovery with its own error (without
    `onerror`, walk_packages would skip it silently)."""

    def fail(name: str) -> None:
        raise  # called by walk_packages inside its `except`: re-raises that error

    names = []
    for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{pkg.__name__}.", onerror=fail):
        parts = info.name[len(pkg.__name__) + 1 :].split(".")
        if info.ispkg or any(part.startswith("_") for part in parts):
            continue
        names.append(info.name)
    return sorted(names)


class DispatchTable:
    def __init__(self, entries: list[HandlerEntry]) -> None:
        self.entries: dict[int, HandlerEntry] = {}
        for e in entries:
            if e.key in self.entries:
                raise ValueError(
                    f"API {e.api.name} handled by both {self.entries[e.key].module.__name__} "
                    f"and {e.module.__name__}"
                )
            self.entries[e.key] = e

    @classmethod
    def discover(
        cls, package: str = "kafkalite.broker.apis", *, cluster_mode: bool = False
    ) -> DispatchTable:
        """Every handler module of `package` and its subpackages. Modules marked `CLUSTER_ONLY = True`
        (the inter-broker APIs: LeaderAndIsr, UpdateMetadata, ...) are left out of a single-node broker, whose
        ApiVersions then does not offer them and which closes a connection that sends them."""
        pkg = importlib.import_module(package)
        entries: list[HandlerEntry] = []
        for name in _module_names(pkg):
            # a handler module that cannot be imported is a broken build: startup fails loudly
            # rather than silently leaving that API out of ApiVersions
            module = importlib.import_module(name)
            entry = _entry_of(module)
            if entry is None:
                raise TypeError(
                    f"{module.__name__} is in {package} but defines no API and handle(); "
                    "helpers belong in modules whose name starts with '_'"
                )
            if getattr(module, "CLUSTER_ONLY", False) and not cluster_mode:
                continue
            entries.append(entry)
        return cls(entries)

    def get(self, key: int) -> HandlerEntry | None:
        return self.entries.get(key)

    def version_ranges(self) -> list[tuple[int, int, int]]:
        return sorted((e.key, e.min_version, e.max_version) for e in self.entries.values())

    def api_versions_response(self, error_code: int = 0) -> ApiVersionsResponse:
        """An ApiVersionsResponse listing every handled API (also used for the KIP-511 downgrade)."""
        resp_cls = ApiVersionsResponse
        key_cls = resp_cls.ApiVersion
        ranges = self.version_ranges()
        keys = {k for k, _, _ in ranges}
        supported, finalized = [], []
        if 68 in keys:  # KIP-848 groups are served: group.version 1, as Kafka 4 reports it
            supported.append(
                resp_cls.SupportedFeatureKey(name="group.version", min_version=0, max_version=1)
            )
            finalized.append(
                resp_cls.FinalizedFeatureKey(
                    name="group.version", max_version_level=1, min_version_level=1
                )
            )
        if 24 in keys:
            # Kafka 4's transaction.version: 1 is the flexible __transaction_state records (written
            # here) with KIP-890 part 1 (the leaders' verification); 2 (part 2: an epoch bump per
            # transaction, partitions added implicitly by Produce v12, EndTxn v5) is not built
            supported.append(
                resp_cls.SupportedFeatureKey(
                    name="transaction.version", min_version=0, max_version=1
                )
            )
            finalized.append(
                resp_cls.FinalizedFeatureKey(
                    name="transaction.version", max_version_level=1, min_version_level=1
                )
            )
        if 76 in keys:  # KIP-932 share groups are served: share.version 1 (Kafka 4.1+)
            supported.append(
                resp_cls.SupportedFeatureKey(name="share.version", min_version=0, max_version=1)
            )
            finalized.append(
                resp_cls.FinalizedFeatureKey(
                    name="share.version", max_version_level=1, min_version_level=1
                )
            )
        return resp_cls(
            error_code=error_code,
            api_keys=[key_cls(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges],
            throttle_time_ms=0,
            supported_features=supported,
            finalized_features_epoch=0 if finalized else -1,
            finalized_features=finalized,
        )
