"""Cache stages of a TensorComputeOp (TVM v0.6's test_schedule_tensor_compute2): inputs read through
``cache_read``, the output computed into a ``cache_write`` stage, with values on every CPU kind."""

import numpy as np
import pytest

import loom
from loom.te import TensorComputeOp
from loom.testing.conformance.harness import buildable_cpu_kinds
from tensor_compute_programs import gemm_program, gemm_ref, run, vadd_program

KINDS = buildable_cpu_kinds()


@pytest.mark.parametrize("kind", KINDS)
def test_cache_read_of_an_input(kind):
    """TVM's test_schedule_tensor_compute2 first half: inputs read through cache stages."""
    A, B, C = vadd_program()
    s = loom.create_schedule(C.op)
    AL = s.cache_read(A, "local", C)
    BL = s.cache_read(B, "local", [C])
    assert list(C.op.inputs) == [A, B] and list(s[C].op.inputs) == [AL, BL]
    (a, b), c = run(s, [A, B, C], kind)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_cache_read_names_a_reader_that_does_not_read_the_tensor():
    A, B, C = vadd_program()
    A2 = loom.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="A2")
    D = loom.compute(A.shape, lambda i, j: A2[i, j] + C[i, j], name="D")
    with pytest.raises(loom.LoomValueError, match="C does not read A2"):
        loom.create_schedule(D.op).cache_read(A2, "local", C)


@pytest.mark.parametrize("kind", KINDS)
def test_cache_write_of_the_output(kind):
    """TVM's test_schedule_tensor_compute2: the intrinsic writes a local cache, the stage copies it out."""
    A, B, C = vadd_program()
    s = loom.create_schedule(C.op)
    AL = s.cache_read(A, "local", C)
    BL = s.cache_read(B, "local", C)
    CL = s.cache_write(C, "local")
    assert isinstance(CL.op, TensorComputeOp) and list(CL.op.inputs) == [AL, BL]
    assert [st.op.name for st in s.stages] == ["A", "A.local", "B", "B.local", "C.local", "C"]
    # C is now a compute over all of its dimensions, the intrinsic's block too
    assert [iv.iter_type for iv in s[C].op.axis] == ["data_par", "data_par"]
    (a, b), c = run(s, [A, B, C], kind)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_cache_write_of_a_reduction_after_a_split(kind):
    """The reduction moves to the cache; the stage keeps its split outer loop and copies block by block."""
    A, B, C = gemm_program()
    s = loom.create_schedule(C.op)
    io, ii = s[C].split(C.op.schedulable_axis[0], factor=2)
    CL = s.cache_write(C, "local")
    assert len(CL.op.reduce_axis) == 1 and not s[C].op.reduce_axis
    s[CL].compute_at(s[C], io)
    (a, b), c = run(s, [A, B, C], kind)
    np.testing.assert_allclose(c, gemm_ref(a, b), rtol=1e-5)


def test_cache_write_after_the_reduction_was_split_is_refused():
    A, B, C = gemm_program()
    s = loom.create_schedule(C.op)
    s[C].split(C.op.reduce_axis[0], factor=2)
    with pytest.raises(loom.LoomValueError, match="reduction axis k was split or fused; cache the tensor compute"):
        s.cache_write(C, "local")


def test_opaque_axes_cannot_be_scheduled():
    A, B, C = vadd_program()
    s = loom.create_schedule(C.op)
    with pytest.raises(loom.LoomError, match="ax0"):
        s[C].split(C.op.axis[1], factor=4)
