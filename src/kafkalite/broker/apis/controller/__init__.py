"""The inter-broker APIs of the ZooKeeper-mode controller: LeaderAndIsr, UpdateMetadata, StopReplica,
ControlledShutdown and AlterPartition (cluster-only: a single-node broker does not offer them).
"""
