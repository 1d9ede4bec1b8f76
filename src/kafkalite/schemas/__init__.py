"""Schemas: the formats a Schema Registry keeps (Avro, JSON Schema, Protobuf) and the registry's state.

Pure logic: parsing, canonical forms, fingerprints, compatibility rules, the `_schemas` record layout and
the registry's state rebuilt by replaying those records. I/O lives in broker/ (the topic) and web/ (HTTP).
"""
