"""Helpers shared by the loom.jit tests: kernels made once per target."""

import loom

_KERNELS: dict = {}


def jitted(fn, target):
    """``loom.jit(fn, target=target)``, made once per target (kernels compile once per key)."""
    if (fn, target) not in _KERNELS:
        _KERNELS[fn, target] = loom.jit(fn, target=target, disk_cache=False)
    return _KERNELS[fn, target]
