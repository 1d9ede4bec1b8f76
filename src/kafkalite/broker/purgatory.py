"""Re-export of cluster.delayed_operations for the broker modules that still import it from here.

The purgatory itself belongs to the ReplicaManager (kafkalite.cluster.delayed_operations).
"""

from kafkalite.cluster.delayed_operations import DelayedOperations

__all__ = ["DelayedOperations"]
