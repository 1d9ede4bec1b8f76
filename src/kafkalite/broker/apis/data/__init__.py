"""The data-plane APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords,
the requests that write, read, locate and trim a partition's records.
"""
