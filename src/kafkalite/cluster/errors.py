"""Errors of the replication layer, each carrying the Kafka error code a client or follower is sent.

Raised by Partition and ReplicaManager; handlers turn `error_code` into the partition's answer.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode


class ReplicaError(Exception):
    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class NotLeaderOrFollower(ReplicaError):
    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class UnknownTopicOrPartition(ReplicaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class FencedLeaderEpoch(ReplicaError):
    error_code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpoch(ReplicaError):
    error_code = ErrorCode.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicas(ReplicaError):
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppend(ReplicaError):
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class StaleControllerEpoch(ReplicaError):
    error_code = ErrorCode.STALE_CONTROLLER_EPOCH
