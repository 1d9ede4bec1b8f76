"""Placeholder package; see ARCHITECTURE.md for what it owns.

Filled in by its own issue."""
