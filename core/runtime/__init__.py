"""The runtime: built modules and device arrays."""
