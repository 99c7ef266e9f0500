"""loom-c: the C-source backend of Loom (target kind ``c``).

The plugin module :mod:`loom_c.plugin` is found through the ``loom`` entry point.
"""

__version__ = "0.1.0"
