"""loom-cuda: the CUDA GPU backend of Loom (target kind ``cuda``).

The plugin module :mod:`loom_cuda.plugin` is found through the ``loom`` entry
point.  pycuda (the ``gpu`` extra) is needed only to run kernels.
"""

__version__ = "0.1.0"
