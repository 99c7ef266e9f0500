"""Tensor expressions and schedules (``loom.placeholder``, ``loom.compute``, ``loom.create_schedule``)."""

from .tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, Tensor
from .operation import HybridOp, compute, extern, placeholder, thread_axis
from .reduction import Reducer, comm_reducer, max, min, reduce_axis, sum  # noqa: A004
from .schedule import Schedule, Stage, create_schedule
from .scan import ScanOp, scan
from .tensor_intrin import TensorIntrin, decl_tensor_intrin
from .tag import current_tag, tag_scope
from .tensor_compute import TensorComputeOp
from .data_layout import BijectiveLayout, Layout, bijective_layout, layout
from . import tensor_ops  # noqa: F401  (attaches the arithmetic operators to Tensor)

__all__ = [
    "Tensor", "Operation", "PlaceholderOp", "ComputeOp", "ExternOp", "HybridOp",
    "placeholder", "compute", "extern", "thread_axis", "reduce_axis", "comm_reducer", "Reducer",
    "sum", "max", "min", "create_schedule", "Schedule", "Stage", "scan", "ScanOp", "decl_tensor_intrin", "TensorIntrin",
    "TensorComputeOp", "tag_scope", "current_tag", "Layout", "BijectiveLayout", "layout", "bijective_layout",
]
