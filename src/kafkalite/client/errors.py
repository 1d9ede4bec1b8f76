"""Client-side exceptions: timeouts, connection failures, and broker error codes raised as KafkaError.

Every exception the producer, consumer and admin client raise derives from KafkaClientError or KafkaError.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode, KafkaError


class KafkaClientError(Exception):
    """Base of the client's own errors (not a broker error code)."""

    retriable = False


class KafkaTimeoutError(KafkaClientError):
    """An operation did not finish within its timeout (request.timeout.ms, max.block.ms, ...)."""

    retriable = True


class KafkaConnectionError(KafkaClientError):
    """The connection to a broker failed or was closed with requests in flight."""

    retriable = True


class NoBrokersAvailable(KafkaClientError):
    """None of the bootstrap servers could be reached."""

    retriable = True


class IllegalStateError(KafkaClientError):
    """The client was used in a way its current state does not allow (closed, not subscribed, ...)."""


class CommitFailedError(KafkaClientError):
    """An offset commit failed because the group rebalanced; the partitions may now belong to another member."""


class NoOffsetForPartitionError(KafkaClientError):
    """auto.offset.reset=none and the partition has no committed offset."""


class UnsupportedFeatureError(KafkaClientError):
    """The broker does not offer an API (or version) a requested feature needs."""


class InvalidConfigurationError(KafkaClientError, ValueError):
    """A setting the client cannot work with (a JKS truststore, an unknown SASL mechanism, ...)."""


class AuthenticationError(KafkaClientError):
    """The broker refused who the client is, or the client refused the broker (TLS): not retried,
    as in Kafka's clients, since only a configuration change can fix it."""


class SaslAuthenticationError(AuthenticationError):
    """SaslHandshake or SaslAuthenticate failed; `code` is the broker's error code
    (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE)."""

    def __init__(self, code: int, message: str) -> None:
        self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else code
        self.error_message = message
        super().__init__(f"{ErrorCode.name_of(code)} ({code}): {message}")


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: the broker's certificate did not verify (CA, host name) or the
    broker refused the client's."""


class FatalProducerError(KafkaError):
    """The transactional producer can do nothing more but close: every later call raises this again."""


class ProducerFencedError(FatalProducerError):
    """Another producer with the same transactional.id (a newer epoch) took over: this one is fenced."""


ProducerFenced = ProducerFencedError


class TransactionalIdAuthorizationError(FatalProducerError):
    """The principal may not use this transactional.id."""


class TransactionAbortableError(KafkaClientError):
    """The current transaction cannot commit (a send or offset commit in it failed); abort it, then go on.

    The failure that caused it is `__cause__` (and `cause`)."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.__cause__ = cause


class TransactionAbortedError(KafkaClientError):
    """A record was not sent because its transaction was aborted first."""


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise KafkaError for a non-zero error code."""
    if code:
        raise KafkaError(code, message)


def is_retriable(exc: BaseException) -> bool:
    if isinstance(exc, KafkaError):
        return exc.retriable
    return bool(getattr(exc, "retriable", False))


__all__ = [
    "CommitFailedError",
    "ErrorCode",
    "FatalProducerError",
    "IllegalStateError",
    "KafkaClientError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailable",
    "NoOffsetForPartitionError",
    "ProducerFenced",
    "ProducerFencedError",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "TransactionalIdAuthorizationError",
    "UnsupportedFeatureError",
    "is_retriable",
    "raise_for_code",
]
