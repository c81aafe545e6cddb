"""The scenarios, their registry and the bug catalogue."""
