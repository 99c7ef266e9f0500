"""Passes over the IR and the infrastructure that runs them.

The classic lowering pipeline lists these passes phase by phase in
``loom.driver.pipeline``; each is also usable on its own, on an IRModule or a
PrimFunc, under a :class:`PassContext` that carries its options.
"""

from .pass_base import (
    ConfigOption, ModulePass, Pass, PassContext, PassInfo, PassInstrument, PrimFuncPass, Sequential,
    list_config_options, module_pass, prim_func_pass, register_config_option,
)
from .instrument import DumpIR, PassTimingInstrument, PrintAfter, VerifyAfter
from .inject_prefetch import InjectPrefetch, inject_prefetch
from .storage_flatten import StorageFlatten, storage_flatten
from .simplify import CanonicalSimplify, Simplify
from .loop_partition import LoopPartition, loop_partition
from .vectorize import SkipVectorize, VectorizeLoop, skip_vectorize, vectorize_loop
from .unroll import UnrollLoop, unroll_loop
from .remove_no_op import RemoveNoOp, remove_no_op
from .rewrite_unsafe_select import RewriteUnsafeSelect, rewrite_unsafe_select
from .inject_virtual_thread import InjectVirtualThread, inject_virtual_thread
from .double_buffer import InjectDoubleBuffer, inject_double_buffer
from .storage_rewrite import StorageRewrite, storage_rewrite
from .make_api import MakeAPI, make_api
from .split_host_device import SplitHostDevice, split_host_device
from .thread_sync import ThreadSync, thread_sync
from .lower_thread_allreduce import LowerThreadAllreduce
from .lower_intrin import LowerIntrin, lower_intrin
from .legalize_narrow_floats import LegalizeNarrowFloats, legalize_narrow_floats
from .ssa import convert_ssa, uses_var, verify_ssa
from .inline import inline

__all__ = [
    "ConfigOption", "ModulePass", "Pass", "PassContext", "PassInfo", "PassInstrument", "PrimFuncPass",
    "Sequential", "list_config_options", "module_pass", "prim_func_pass", "register_config_option",
    "DumpIR", "PassTimingInstrument", "PrintAfter", "VerifyAfter",
    "InjectPrefetch", "inject_prefetch", "StorageFlatten", "storage_flatten", "Simplify", "CanonicalSimplify", "LoopPartition", "loop_partition",
    "VectorizeLoop", "SkipVectorize", "vectorize_loop", "skip_vectorize", "UnrollLoop", "unroll_loop",
    "RemoveNoOp", "remove_no_op", "RewriteUnsafeSelect", "rewrite_unsafe_select",
    "InjectVirtualThread", "inject_virtual_thread", "InjectDoubleBuffer", "inject_double_buffer",
    "StorageRewrite", "storage_rewrite", "MakeAPI", "make_api", "SplitHostDevice", "split_host_device",
    "ThreadSync", "thread_sync", "LowerIntrin", "lower_intrin", "LowerThreadAllreduce",
    "LegalizeNarrowFloats", "legalize_narrow_floats",
    "verify_ssa", "convert_ssa", "uses_var", "inline",
]
