"""The broker's security properties: ssl.* and sasl.* (overridable per listener), SASL, quotas, ACLs.

Also which settings DescribeConfigs hides; broker.config_defs assembles them into the one table.
"""

from __future__ import annotations

from kafkalite.broker.config.config_types import (
    T_BOOLEAN,
    T_INT,
    T_LIST,
    T_LONG,
    T_STRING,
    ConfigDef,
)
from kafkalite.broker.config.config_types import define as _d

# ssl.* settings (Kafka's names, PEM only); `listener.name.<listener>.ssl.*` overrides one listener
SSL_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _d("ssl.keystore.type", T_STRING, "PEM", "Key store format; only PEM is supported."),
    _d(
        "ssl.keystore.location",
        T_STRING,
        None,
        "PEM file holding the private key and the certificate chain.",
    ),
    _d("ssl.keystore.key", T_STRING, None, "The private key in PEM, inline."),
    _d(
        "ssl.keystore.certificate.chain",
        T_STRING,
        None,
        "The certificate chain in PEM, inline (with ssl.keystore.key).",
    ),
    _d("ssl.key.password", T_STRING, None, "Password of an encrypted private key."),
    _d("ssl.keystore.password", T_STRING, None, "Not used with PEM key stores (ssl.key.password)."),
    _d("ssl.truststore.type", T_STRING, "PEM", "Trust store format; only PEM is supported."),
    _d("ssl.truststore.location", T_STRING, None, "PEM file of trusted CA certificates."),
    _d("ssl.truststore.certificates", T_STRING, None, "Trusted CA certificates in PEM, inline."),
    _d("ssl.truststore.password", T_STRING, None, "Not used with PEM trust stores."),
    _d("ssl.client.auth", T_STRING, "none", "Client certificates: required, requested or none."),
    _d("ssl.enabled.protocols", T_LIST, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    _d(
        "ssl.principal.mapping.rules",
        T_STRING,
        "DEFAULT",
        "Rules mapping a client certificate's subject to a user name (KIP-371): "
        "RULE:pattern/replacement/[LU], ..., DEFAULT (the whole distinguished name).",
    ),
    _d(
        "ssl.protocol",
        T_STRING,
        "TLSv1.3",
        "Accepted for compatibility (ssl.enabled.protocols rules).",
    ),
    _d(
        "ssl.cipher.suites",
        T_LIST,
        None,
        "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's defaults.",
    ),
    _d(
        "ssl.endpoint.identification.algorithm",
        T_STRING,
        "https",
        "https: brokers check the host name of the broker they connect to; empty: no check.",
    ),
)

# sasl.* settings; `listener.name.<listener>.` overrides them for one listener, and the JAAS config
# is looked up as `listener.name.<listener>.<mechanism>.sasl.jaas.config` first (names in lower case)
SASL_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _d(
        "sasl.enabled.mechanisms",
        T_LIST,
        "PLAIN",
        "SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
        "(Kafka's default is GSSAPI, which kafkalite does not offer).",
    ),
    _d(
        "sasl.jaas.config",
        T_STRING,
        None,
        "JAAS login module config: PlainLoginModule's user_<name> options are the PLAIN users; "
        "username/password are what this broker logs in with to others.",
    ),
    _d(
        "connections.max.reauth.ms",
        T_LONG,
        "0",
        "KIP-368: lifetime of a SASL session; past it the client must re-authenticate or is "
        "disconnected (0: sessions never expire).",
        at_least=0,
    ),
)


# settings whose values DescribeConfigs never shows (Kafka's PASSWORD type)
SENSITIVE_SUFFIXES: tuple[str, ...] = (
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "sasl.jaas.config",
    "secret.access.key",  # rsm.config.storage.aws.secret.access.key (tiered storage on S3)
)


def is_sensitive_config(name: str) -> bool:
    return name.endswith(SENSITIVE_SUFFIXES)


# SASL authentication, client quotas and authorization, in the table's order
SECURITY_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    # -- SASL authentication (listener.name.<listener>. overrides these per listener)
    *SASL_CONFIG_DEFS,
    _d(
        "sasl.mechanism.inter.broker.protocol",
        T_STRING,
        "PLAIN",
        "SASL mechanism brokers use to log in to each other on a SASL inter-broker listener.",
    ),
    _d(
        "connection.failed.authentication.delay.ms",
        T_INT,
        "100",
        "How long a failed SASL authentication waits before its connection closes.",
        at_least=0,
    ),
    # -- client quotas (the quotas themselves are set with AlterClientQuotas)
    _d(
        "quota.window.num",
        T_INT,
        "11",
        "Samples kept to measure a client's rate against its quota.",
        at_least=1,
    ),
    _d("quota.window.size.seconds", T_INT, "1", "Span of each quota sample.", at_least=1),
    # -- authorization (ACLs)
    _d(
        "authorizer.class.name",
        T_STRING,
        "",
        "Kafka's ACL authorizer (kafka.security.authorizer.AclAuthorizer, "
        "kafka.security.auth.SimpleAclAuthorizer or "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer) turns ACL checks on; "
        "empty: every request is allowed and the ACL APIs answer SECURITY_DISABLED.",
    ),
    _d(
        "super.users",
        T_STRING,
        "",
        "Principals allowed everything, separated by ';' (User:admin;User:broker).",
    ),
    _d(
        "allow.everyone.if.no.acl.found",
        T_BOOLEAN,
        "false",
        "Allow an action on a resource that has no ACL at all.",
    ),
)
