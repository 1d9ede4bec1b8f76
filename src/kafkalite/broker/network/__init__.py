"""The broker's network layer: listeners and their accept loops, one Connection per client over
protocol's server-side sans-IO connection, connection quotas, the TLS transport, request throttling.
"""
