"""The share-group APIs of KIP-932: ShareGroupHeartbeat / ShareGroupDescribe, ShareFetch / ShareAcknowledge, the
share-group offsets admin APIs, and the share-state RPCs the share coordinator answers for the share partitions.
"""
