"""KafkaZkClient: kazoo against a real ZooKeeper in Kafka's layout — cluster id, ephemeral broker
registration (its czxid is the broker epoch), controller election with a bumped controller epoch,
topics, partition states updated by compare-and-set on the znode version, deletions, watches; the
/config znodes (zk_configs.ZkConfigs) and ACLs (zk_acls.ZkAcls) through its `configs` and `acls`.

Synchronous (kazoo's API): the broker calls it through asyncio.to_thread; watch callbacks run on
kazoo's thread and are hopped onto the event loop with `asyncio_callback`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.metadata import new_cluster_id
from kafkalite.cluster.metadata_cache import ListenerEndpoint
from kafkalite.cluster.zk_acls import ZkAcls
from kafkalite.cluster.zk_configs import ZkConfigs, znode_children

log = logging.getLogger("kafkalite.cluster.zk")

TopicPartition = tuple[str, int]


class ZkError(Exception):
    """A ZooKeeper operation failed in a way a person must act on (the message says how)."""


class ControllerMovedError(ZkError):
    """A controller write was fenced: /controller_epoch changed since this broker was elected."""


def asyncio_callback(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap `fn` so that calling it from kazoo's thread runs it on `loop`."""

    def hop(*args: Any) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    return hop


def split_chroot(connect: str) -> tuple[str, str]:
    """`host:port,host:port/chroot` -> ("host:port,host:port", "/chroot" or "")."""
    hosts, sep, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if sep and chroot.strip("/") else ""


class KafkaZkClient:
    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int = 18_000,
    ) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_chroot(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.zk = KazooClient(
            hosts=self.hosts + self.chroot,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
        )

    # -- connection ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect (creating the chroot if missing, as Kafka does) and make Kafka's persistent paths."""
        timeout = self.connection_timeout_ms / 1000
        if self.chroot:
            root = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000)
            try:
                root.start(timeout)
                root.ensure_path(self.chroot)
            except KazooTimeoutError:
                raise ZkError(
                    f"cannot reach ZooKeeper at {self.hosts} within "
                    f"zookeeper.connection.timeout.ms={self.connection_timeout_ms}"
                ) from None
            finally:
                root.stop()
                root.close()
        try:
            self.zk.start(timeout)
        except KazooTimeoutError:
            self.zk.stop()
            raise ZkError(
                f"cannot reach ZooKeeper at {self.connect} within "
                f"zookeeper.connection.timeout.ms={self.connection_timeout_ms}"
            ) from None
        for path in zd.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def close(self) -> None:
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    @property
    def connected(self) -> bool:
        return bool(self.zk.connected)

    @property
    def configs(self) -> ZkConfigs:
        """The /config znodes (topic, user, client, ip and group configs) and their notifications."""
        return ZkConfigs(self.zk)

    @property
    def acls(self) -> ZkAcls:
        """The ACL znodes and their change notifications."""
        return ZkAcls(self.zk)

    def add_session_listener(self, fn: Callable[[str], None]) -> None:
        """`fn("connected" | "suspended" | "lost")` on every session state change (kazoo's thread);
        after "lost" the session's ephemeral znodes are gone and must be created again."""

        def listener(state: str) -> None:
            name = {
                KazooState.CONNECTED: "connected",
                KazooState.SUSPENDED: "suspended",
                KazooState.LOST: "lost",
            }.get(state, str(state))
            fn(name)

        self.zk.add_listener(listener)

    # -- cluster id ---------------------------------------------------------------------------------
    def get_or_create_cluster_id(self) -> str:
        try:
            data, _ = self.zk.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)
        except NoNodeError:
            pass
        proposed = new_cluster_id()
        try:
            self.zk.create(zd.CLUSTER_ID, zd.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:  # another broker was first
            data, _ = self.zk.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)

    # -- brokers --------------------------------------------------------------------------------------
    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None,
        listeners: tuple[ListenerEndpoint, ...] = (),
    ) -> int:
        """Create the ephemeral registration; returns the broker epoch (the znode's czxid)."""
        path = zd.broker_path(broker_id)
        deadline = time.monotonic() + self.session_timeout_ms / 1000 + 5
        while True:
            try:
                self.zk.create(
                    path,
                    zd.encode_broker(host, port, rack, listeners),
                    ephemeral=True,
                    makepath=True,
                )
                break
            except NodeExistsError:
                try:
                    data, stat = self.zk.get(path)
                except NoNodeError:
                    continue  # its session just ended
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    return int(stat.czxid)  # ours already (a retried create)
                old = zd.decode_broker(broker_id, data)
                if (old.host, old.port) == (host, port) and time.monotonic() < deadline:
                    # our own previous process, killed: its session expires within the timeout
                    log.info(
                        "broker.id=%d is still registered by this broker's previous session; "
                        "waiting for it to expire", broker_id,
                    )  # fmt: skip
                    time.sleep(0.5)
                    continue
                raise ZkError(
                    f"broker.id={broker_id} is already registered in ZooKeeper by a live broker "
                    f"at {old.host}:{old.port}; give this broker another id"
                ) from None
        _, stat = self.zk.get(path)
        return int(stat.czxid)

    def live_brokers(self) -> dict[int, zd.BrokerRegistration]:
        out: dict[int, zd.BrokerRegistration] = {}
        for child in self.zk.get_children(zd.BROKER_IDS):
            if not child.isdigit():
                continue
            bid = int(child)
            try:
                data, stat = self.zk.get(zd.broker_path(bid))
            except NoNodeError:
                continue  # gone meanwhile
            try:
                out[bid] = zd.decode_broker(bid, data, int(stat.czxid))
            except zd.ZkDataError as exc:
                log.warning("ignoring broker registration: %s", exc)
        return out

    def broker_endpoint(
        self, broker_id: int, listener: str | None = None
    ) -> tuple[str, int] | None:
        """host and port of a registered broker's `listener` (its first endpoint by default)."""
        try:
            data, _ = self.zk.get(zd.broker_path(broker_id))
        except NoNodeError:
            return None
        return zd.decode_broker(broker_id, data).endpoint(listener)

    # -- producer ids ------------------------------------------------------------------------------------
    def claim_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """The next block of producer ids for this broker, [start, end], claimed by compare-and-set on
        /latest_producer_id_block so no two brokers ever hand out the same id (as Kafka's)."""
        size = zd.PRODUCER_ID_BLOCK_SIZE
        while True:
            try:
                data, stat = self.zk.get(zd.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    self.zk.create(
                        zd.LATEST_PRODUCER_ID_BLOCK,
                        zd.encode_producer_id_block(broker_id, 0, size - 1),
                    )
                    return 0, size - 1
                except NodeExistsError:
                    continue
            _, last_end = zd.decode_producer_id_block(data)
            start, end = last_end + 1, last_end + size
            try:
                self.zk.set(
                    zd.LATEST_PRODUCER_ID_BLOCK,
                    zd.encode_producer_id_block(broker_id, start, end),
                    version=stat.version,
                )
                return start, end
            except BadVersionError:
                continue  # another broker claimed one meanwhile

    # -- controller -------------------------------------------------------------------------------------
    def read_controller(self) -> tuple[int, int] | None:
        """(controller id, controller epoch), or None while no controller is elected."""
        try:
            data, _ = self.zk.get(zd.CONTROLLER)
            epoch_data, _ = self.zk.get(zd.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return zd.decode_controller(data), zd.decode_controller_epoch(epoch_data)

    def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Become controller if nobody is: in one ZooKeeper transaction, create the ephemeral
        /controller and bump /controller_epoch by compare-and-set (so no two controllers ever hold
        the same epoch). Returns (epoch, epoch znode version) or None when another broker leads."""
        while True:
            try:
                data, stat = self.zk.get(zd.CONTROLLER_EPOCH)
                epoch, version = zd.decode_controller_epoch(data) + 1, int(stat.version)
            except NoNodeError:
                try:
                    self.zk.create(zd.CONTROLLER_EPOCH, b"0")
                except NodeExistsError:
                    pass
                continue
            tx = self.zk.transaction()
            tx.create(zd.CONTROLLER, zd.encode_controller(broker_id), ephemeral=True)
            tx.set_data(zd.CONTROLLER_EPOCH, str(epoch).encode(), version=version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                return epoch, version + 1
            if isinstance(results[0], NodeExistsError):
                return None  # someone else is the controller
            if isinstance(results[1], BadVersionError):
                continue  # another election bumped the epoch in between: read it again
            raise ZkError(f"controller election failed: {results}")

    def resign_controller(self, broker_id: int) -> None:
        try:
            data, stat = self.zk.get(zd.CONTROLLER)
            if zd.decode_controller(data) == broker_id:
                self.zk.delete(zd.CONTROLLER, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    # -- topics ------------------------------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self.zk.get_children(zd.BROKER_TOPICS))

    def topics(self) -> dict[str, zd.TopicAssignment]:
        out: dict[str, zd.TopicAssignment] = {}
        for name in self.topic_names():
            a = self.topic(name)
            if a is not None:
                out[name] = a
        return out

    def topic(self, name: str) -> zd.TopicAssignment | None:
        try:
            data, stat = self.zk.get(zd.topic_path(name))
        except NoNodeError:
            return None
        return zd.decode_topic(name, data, int(stat.version))

    def create_topic(
        self,
        name: str,
        topic_id: uuid.UUID,
        assignment: dict[int, tuple[int, ...]],
        config: dict[str, str],
    ) -> None:
        """Config first, then the assignment (whose creation the controller watches), as Kafka."""
        if self.zk.exists(zd.topic_path(name)):
            raise ZkError(f"Topic '{name}' already exists.")
        self.zk.ensure_path(zd.CONFIG_TOPICS)
        cfg_path = zd.topic_config_path(name)
        try:
            self.zk.create(cfg_path, zd.encode_config(config))
        except NodeExistsError:
            self.zk.set(cfg_path, zd.encode_config(config))
        try:
            self.zk.create(zd.topic_path(name), zd.encode_topic(topic_id, assignment))
        except NodeExistsError:
            raise ZkError(f"Topic '{name}' already exists.") from None

    def set_topic_assignment(
        self,
        name: str,
        topic_id: uuid.UUID,
        assignment: dict[int, tuple[int, ...]],
        version: int = -1,
    ) -> None:
        """Rewrite a topic's replicas; with `version`, only if the znode is still at it (the
        controller may have started a move meanwhile): ZkError otherwise."""
        try:
            self.zk.set(zd.topic_path(name), zd.encode_topic(topic_id, assignment), version=version)
        except BadVersionError:
            raise ZkError(f"topic {name} changed meanwhile; try again") from None

    def write_topic_assignment_as_controller(
        self, topic: zd.TopicAssignment, controller_epoch_version: int
    ) -> None:
        """The controller rewrites a topic's replicas (and moves in flight), fenced like its
        partition-state writes: a controller that lost its office gets ControllerMovedError."""
        tx = self.zk.transaction()
        tx.check(zd.CONTROLLER_EPOCH, controller_epoch_version)
        tx.set_data(
            zd.topic_path(topic.topic),
            zd.encode_topic(topic.topic_id, topic.partitions, topic.adding, topic.removing),
        )
        res = tx.commit()
        if isinstance(res[0], BadVersionError):
            raise ControllerMovedError(
                f"/controller_epoch moved past version {controller_epoch_version}: another broker "
                "became controller; this one steps down"
            )
        if isinstance(res[1], Exception):
            raise ZkError(f"cannot write the assignment of topic {topic.topic}: {res[1]!r}")

    def reassignment_request(self) -> bytes | None:
        """/admin/reassign_partitions as it is (None: absent)."""
        try:
            data, _ = self.zk.get(zd.REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return bytes(data)

    def write_reassignment_request(
        self, targets: dict[TopicPartition, tuple[int, ...]], controller_epoch_version: int
    ) -> None:
        """The controller rewrites /admin/reassign_partitions with the moves still running, or
        deletes it when none are (fenced by the controller epoch like its other writes)."""
        exists = self.zk.exists(zd.REASSIGN_PARTITIONS) is not None
        if not exists and not targets:
            return
        tx = self.zk.transaction()
        tx.check(zd.CONTROLLER_EPOCH, controller_epoch_version)
        if not targets:
            tx.delete(zd.REASSIGN_PARTITIONS)
        elif exists:
            tx.set_data(zd.REASSIGN_PARTITIONS, zd.encode_reassignment_request(targets))
        else:
            tx.create(zd.REASSIGN_PARTITIONS, zd.encode_reassignment_request(targets))
        res = tx.commit()
        if isinstance(res[0], BadVersionError):
            raise ControllerMovedError(
                f"/controller_epoch moved past version {controller_epoch_version}: another broker "
                "became controller; this one steps down"
            )
        if isinstance(res[1], NoNodeError) and not targets:
            return  # someone deleted it first
        if isinstance(res[1], Exception):
            raise ZkError(f"cannot write {zd.REASSIGN_PARTITIONS}: {res[1]!r}")

    def preferred_replica_election(self) -> bytes | None:
        """/admin/preferred_replica_election as it is (None: absent)."""
        try:
            data, _ = self.zk.get(zd.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return None
        return bytes(data)

    def delete_preferred_replica_election(self, controller_epoch_version: int) -> None:
        """The controller deletes the request once it has run the election (epoch-fenced)."""
        tx = self.zk.transaction()
        tx.check(zd.CONTROLLER_EPOCH, controller_epoch_version)
        tx.delete(zd.PREFERRED_REPLICA_ELECTION)
        res = tx.commit()
        if isinstance(res[0], BadVersionError):
            raise ControllerMovedError(
                f"/controller_epoch moved past version {controller_epoch_version}: another broker "
                "became controller; this one steps down"
            )
        if isinstance(res[1], Exception) and not isinstance(res[1], NoNodeError):
            raise ZkError(f"cannot delete {zd.PREFERRED_REPLICA_ELECTION}: {res[1]!r}")

    # -- log dir failures ------------------------------------------------------------------------------
    def write_log_dir_event(self, broker_id: int) -> None:
        """A log dir of this broker failed: tell the controller (a sequential notification)."""
        self.zk.create(
            f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{zd.LOG_DIR_EVENT_PREFIX}",
            zd.encode_log_dir_event(broker_id),
            sequence=True,
            makepath=True,
        )

    def take_log_dir_events(self) -> set[int]:
        """Read and delete every log dir event notification: the brokers they name (the
        controller's, as Kafka's handles them)."""
        brokers: set[int] = set()
        for name in znode_children(self.zk, zd.LOG_DIR_EVENT_NOTIFICATION):
            path = f"{zd.LOG_DIR_EVENT_NOTIFICATION}/{name}"
            try:
                data, _ = self.zk.get(path)
                brokers.add(zd.decode_log_dir_event(data))
            except NoNodeError:
                continue
            except zd.ZkDataError as exc:
                log.error("ignoring %s: %s", path, exc)
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass
        return brokers

    def mark_topic_for_deletion(self, name: str) -> None:
        try:
            self.zk.create(zd.delete_topic_path(name), b"", makepath=True)
        except NodeExistsError:
            pass

    def topics_to_delete(self) -> list[str]:
        return sorted(self.zk.get_children(zd.DELETE_TOPICS))

    def delete_topic_znodes(self, name: str) -> None:
        for path in (zd.topic_path(name), zd.topic_config_path(name), zd.delete_topic_path(name)):
            try:
                self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass

    # -- partition states ----------------------------------------------------------------------------------
    def partition_states(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, zd.PartitionStateZNode]:
        out: dict[TopicPartition, zd.PartitionStateZNode] = {}
        for t, p in partitions:
            try:
                data, stat = self.zk.get(zd.partition_state_path(t, p))
            except NoNodeError:
                continue
            out[(t, p)] = zd.decode_partition_state(t, p, data, int(stat.version))
        return out

    def write_partition_states(
        self,
        states: dict[TopicPartition, tuple[int, int, tuple[int, ...], int]],
        controller_epoch: int,
        controller_epoch_version: int,
    ) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
        """Write (leader, leader epoch, isr, expected version) per partition: version -1 creates the
        znode, otherwise a compare-and-set on the znode version. Each write is one transaction with a
        check that /controller_epoch is still at `controller_epoch_version`, so a controller that
        lost its office (a zombie) cannot write: ControllerMovedError. Pipelined; returns (new
        versions of those written, partitions whose version did not match or that
        exist/vanished unexpectedly)."""
        pending = []
        for (t, p), (leader, epoch, isr, version) in states.items():
            path = zd.partition_state_path(t, p)
            data = zd.encode_partition_state(leader, epoch, isr, controller_epoch)
            tx = self.zk.transaction()
            tx.check(zd.CONTROLLER_EPOCH, controller_epoch_version)
            if version < 0:
                parent = path.rsplit("/", 1)[0]
                if self.zk.exists(parent) is None:
                    self.zk.ensure_path(parent)
                tx.create(path, data)
            else:
                tx.set_data(path, data, version=version)
            pending.append(((t, p), version, tx.commit_async()))
        done: dict[TopicPartition, int] = {}
        failed: list[TopicPartition] = []
        moved = False
        for tp, version, result in pending:
            res = result.get()
            if isinstance(res[0], BadVersionError):
                moved = True
            elif isinstance(res[1], (BadVersionError, NodeExistsError, NoNodeError)):
                failed.append(tp)
            elif isinstance(res[1], Exception):
                raise res[1]
            else:
                done[tp] = 0 if version < 0 else int(res[1].version)
        if moved:
            raise ControllerMovedError(
                f"/controller_epoch moved past version {controller_epoch_version}: another broker "
                "became controller; this one steps down"
            )
        return done, failed

    # -- watches ---------------------------------------------------------------------------------------------
    def watch_children(self, path: str, fn: Callable[[list[str]], None]) -> None:
        """`fn(children)` now and on every change of `path`'s children (kazoo's thread)."""
        self.zk.ensure_path(path)

        def on_change(children: list[str]) -> bool:
            try:
                fn(list(children))
            except Exception:
                log.exception("watch callback on %s failed", path)
            return True

        self.zk.ChildrenWatch(path, on_change)

    def watch_data(self, path: str, fn: Callable[[bytes | None], None]) -> None:
        """`fn(data or None when absent)` now and on every change of `path` (kazoo's thread)."""

        def on_change(data: bytes | None, stat: Any) -> bool:
            try:
                fn(data)
            except Exception:
                log.exception("watch callback on %s failed", path)
            return True

        self.zk.DataWatch(path, on_change)


__all__ = ["KafkaZkClient", "KazooException", "ZkError", "asyncio_callback", "split_chroot"]
