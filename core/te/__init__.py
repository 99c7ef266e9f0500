"""Tensor expressions and schedules (``loom.placeholder``, ``loom.compute``, ``loom.create_schedule``)."""
