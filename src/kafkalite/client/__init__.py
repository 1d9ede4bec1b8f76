"""The kafkalite Python client: KafkaProducer, KafkaConsumer, ShareConsumer and KafkaAdminClient over asyncio.

Works against kafkalite and any Kafka broker; config takes Kafka's names (`linger.ms` or `linger_ms`).
"""

from kafkalite.client.admin import KafkaAdminClient, NewTopic
from kafkalite.client.consumer import KafkaConsumer
from kafkalite.client.errors import (
    AuthenticationError,
    CommitFailedError,
    FatalProducerError,
    InvalidConfigurationError,
    KafkaClientError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    ProducerFenced,
    ProducerFencedError,
    SaslAuthenticationError,
    SslAuthenticationError,
    TransactionAbortableError,
    TransactionAbortedError,
    UnsupportedFeatureError,
)
from kafkalite.client.futures import FutureRecordMetadata, RecordMetadata
from kafkalite.client.producer import KafkaProducer
from kafkalite.client.share_consumer import ShareConsumer
from kafkalite.client.share_requests import AcknowledgeType, ShareConsumerRecord
from kafkalite.client.structs import (
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

__all__ = [
    "AcknowledgeType",
    "AuthenticationError",
    "CommitFailedError",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FatalProducerError",
    "FutureRecordMetadata",
    "InvalidConfigurationError",
    "KafkaAdminClient",
    "KafkaClientError",
    "KafkaConnectionError",
    "KafkaConsumer",
    "KafkaError",
    "KafkaProducer",
    "KafkaTimeoutError",
    "NewTopic",
    "NoBrokersAvailable",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "ProducerFenced",
    "ProducerFencedError",
    "RecordMetadata",
    "SaslAuthenticationError",
    "ShareConsumer",
    "ShareConsumerRecord",
    "SslAuthenticationError",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "UnsupportedFeatureError",
]
