"""The cluster-administration APIs: configs, ACLs, client quotas, SCRAM credentials, log dirs, partition
reassignments, leader elections, DescribeCluster and DescribeProducers.
"""
