"""Optional helpers around the core, as classic TVM's ``tvm.contrib`` (``cblas``: matmul by BLAS...).

Each submodule is imported on its own, as in TVM:

>>> from loom.contrib import cblas
>>> cblas.matmul.__name__
'matmul'
"""
