"""The cluster layer: ReplicaManager and Partition (the one door to logs), follower fetchers, the broker-to-broker
channel, the metadata cache and store (a local file or ZooKeeper), and the controller with its state tables.
"""
