"""The topic-metadata APIs: Metadata, DescribeTopicPartitions and FindCoordinator (where things are served),
and CreateTopics, DeleteTopics and CreatePartitions (how the set of topics and partitions changes).
"""
