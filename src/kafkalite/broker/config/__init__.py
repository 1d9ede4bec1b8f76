"""Broker configuration under Kafka's names: the property tables and their docs, server.properties
parsing, dynamic broker configs (KIP-226), topic and group config views, logging settings.
"""
