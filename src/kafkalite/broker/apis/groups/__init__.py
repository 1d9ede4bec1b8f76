"""The consumer-group APIs: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), KIP-848's
ConsumerGroupHeartbeat / ConsumerGroupDescribe, committed offsets, and listing, describing and deleting groups.
"""
