"""The coordinators' I/O inside a broker: the internal-topic partitions they load and write
(__consumer_offsets, __transaction_state, __share_group_state), share partitions, transaction markers.
"""
