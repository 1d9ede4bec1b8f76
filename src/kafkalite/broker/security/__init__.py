"""The broker's security glue over kafkalite.security: the authorizer's ACL index, SASL on a listener,
SCRAM credentials in memory, and client quotas (byte rates and request time).
"""
