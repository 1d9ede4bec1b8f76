"""TopicStorageError: a partition's log could not be made (EMFILE, ENOSPC...) and the request's
half-made topic or partitions were rolled back; CreateTopics / CreatePartitions answer KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations


class TopicStorageError(Exception):
    """A partition's log could not be made (an OSError); what the request had made was rolled
    back. Handlers answer KAFKA_STORAGE_ERROR with str(self)."""

    def __init__(self, topic: str, partition: int, cause: OSError) -> None:
        super().__init__(
            f"cannot create the log of partition {topic}-{partition}: "
            f"{cause.strerror or cause} (errno {cause.errno}); nothing was kept"
        )
        self.topic = topic
        self.partition = partition
        self.cause = cause
