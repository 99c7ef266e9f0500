"""Target kinds with explicit schemas, so target tests never depend on installed backends."""

from loom.target import AttrSpec, TargetKind

LLVM = TargetKind(
    "llvm", "cpu",
    {"mtriple": AttrSpec(str), "mcpu": AttrSpec(str), "mattr": AttrSpec(list),
     "opt_level": AttrSpec(int, 3), "num_cores": AttrSpec(int)},
    default_keys=("cpu",),
)
CUDA = TargetKind(
    "cuda", "cuda",
    {"arch": AttrSpec(str), "max_num_threads": AttrSpec(int, 1024), "thread_warp_size": AttrSpec(int, 32)},
    default_keys=("cuda", "gpu"),
)
C = TargetKind(
    "c", "cpu",
    {"compiler": AttrSpec(str, "cc"), "flags": AttrSpec(str), "openmp": AttrSpec(bool),
     "fast_math": AttrSpec(bool, False)},
    default_keys=("cpu",),
)
INTERP = TargetKind("interp", "cpu", {}, default_keys=("cpu", "interp"))
#: External codegen kinds: they compile some operators for a device whose general kind is another.
EXT_CPU = TargetKind("ext_cpu", "cpu", {"scale": AttrSpec(float, 1.0)}, is_external_codegen=True)
EXT_GPU = TargetKind("ext_gpu", "cuda", {}, is_external_codegen=True)

ALL = (LLVM, CUDA, C, INTERP, EXT_CPU, EXT_GPU)
