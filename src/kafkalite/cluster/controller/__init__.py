"""The controller of a ZooKeeper-mode cluster: a pure event machine (machine.py) over partition and
replica state tables (states.py), elections and replica placement, driven by KafkaController (I/O).
"""
