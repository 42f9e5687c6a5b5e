"""Example app for the MQ Center Python SDK (see examples/README.md)."""
