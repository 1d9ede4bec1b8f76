"""Security logic: principals, SASL exchanges (PLAIN, SCRAM), SCRAM credentials, ACLs, quotas.

Pure, sans-IO functions and state machines; the broker feeds bytes and events in, storage lives elsewhere.
"""
