"""The broker process: asyncio network layer, request dispatch, one handler module per API, delayed operations.

Entry points: `BrokerServer` (broker/server.py) and `BrokerConfig` (broker/config/broker_config.py); embedded use via kafkalite.Broker.
"""
