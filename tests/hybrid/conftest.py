"""Hybrid tests build on every installed CPU target kind, as the end-to-end suite does."""

from hybrid_targets import target  # noqa: F401  (the e2e fixture: one run per buildable CPU kind)
