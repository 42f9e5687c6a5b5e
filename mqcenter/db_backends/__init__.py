"""Database backends: Django's own, each with the broker's one change (see the module)."""
