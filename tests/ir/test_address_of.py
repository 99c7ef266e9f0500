"""loom.address_of (TVM's address_of / v0.6's tvm_address_of): a handle to one buffer element, passed to a call."""

import numpy as np
import pytest

import loom
from loom.errors import LoomTypeError
from loom.runtime.arguments import ArgumentValueError

KINDS = ["llvm", "c"]  # a C function (memcpy) is called; the interpreter runs no C


def _memcpy_program(name="copy4", two_d=False):
    """B[2:6] = A[5:9] through memcpy(address_of(B[2]), address_of(A[5]), 16 bytes)."""
    shape = (3, 4) if two_d else (12,)

    def body(ins, outs):
        a, b = ins[0], outs[0]
        ib = loom.ir_builder.create()
        src = loom.address_of(a[1, 1] if two_d else a[5])
        dst = loom.call_pure_intrin("handle", "tvm_address_of", b[0, 2] if two_d else b[2])
        ib.emit(loom.call_extern("handle", "memcpy", dst, src, loom.const(16, "int64")))
        return ib.get()

    A = loom.placeholder(shape, "float32", name="A")
    B = loom.extern(shape, [A], body, name=name, dtype="float32")
    return A, B, loom.create_schedule(B.op)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("two_d", [False, True], ids=["1d", "2d"])
def test_the_address_of_an_element_reaches_a_c_function(kind, two_d):
    A, B, s = _memcpy_program(two_d=two_d)
    f = loom.build(s, [A, B], kind)
    a = np.arange(12, dtype="float32").reshape(A.shape)
    b = np.zeros_like(a)
    f(a, b)
    flat_a, want = a.ravel(), np.zeros(12, "float32")
    first = 5 if not two_d else 5  # A[1, 1] of a 3x4 array is flat element 5
    start = 2
    want[start:start + 4] = flat_a[first:first + 4]
    np.testing.assert_array_equal(b.ravel(), want)


def test_it_lowers_to_an_access_pointer_with_the_elements_offset():
    A = loom.decl_buffer((4, 8), "float32", name="A", offset_factor=1)
    lowered = loom.ir.op.lowering_rule("tir.address_of", "llvm")(loom.address_of(A[2, 3]))
    assert lowered.op.name == "tir.tvm_access_ptr"
    assert str(lowered.args[2]) == "A_elem_offset + 19" and lowered.args[4].value == 3  # read and write
    vec = A.vload([1, 0], "float32x4")
    assert str(loom.ir.op.lowering_rule("tir.address_of", "c")(loom.address_of(vec)).args[2]) == "A_elem_offset + 8"


@pytest.mark.parametrize("kind", KINDS)
def test_a_buffer_whose_address_is_taken_counts_as_written(kind):
    """The callee may write through the pointer, so a read-only array is refused for A as well."""
    A, B, s = _memcpy_program()
    f = loom.build(s, [A, B], kind)
    a = np.arange(12, dtype="float32")
    a.flags.writeable = False
    with pytest.raises(ArgumentValueError, match=r"argument 0 \(A.*is read-only"):
        f(a, np.zeros(12, "float32"))


def test_bad_arguments_are_type_errors():
    x = loom.var("x")
    with pytest.raises(LoomTypeError, match="address_of takes a buffer element"):
        loom.address_of(x)
    with pytest.raises(LoomTypeError, match="1 argument"):
        loom.call_intrin("handle", "tvm_address_of")
    bad = loom.call_intrin("handle", "address_of", x)  # by name the check waits for lowering
    with pytest.raises(LoomTypeError, match="address_of takes a buffer element"):
        loom.ir.op.lowering_rule("tir.address_of", "llvm")(bad)
