"""The driver: lower() and build()."""
