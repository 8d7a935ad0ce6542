"""The `freeact-sub` terminal front end."""
