"""The `kafkalite` command line: serve, topics, produce, consume (entry point kafkalite.cli.main:main).

Client-side subcommands speak the Kafka protocol through cli.wire, so they work against any broker.
"""
