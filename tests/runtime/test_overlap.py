"""Overlapping arguments where one is written: refused on every backend and on the fast path; reads may alias."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import loom
from loom.backend import signature_of
from loom.ir import BufferStore, Evaluate, For, PrimFunc
from loom.runtime import nd
from loom.runtime._values import HOST_MEMORY, first_overlap, reaches_twice
from loom.runtime.arguments import ArgumentChecker, ArgumentValueError
from loom.transform.make_api import WRITTEN_PARAMS_ATTR, declared_writes, make_api, written_params

from aliasing_programs import add_program, mirror_program, on_device_twice, twice_program
import fake_device
from fake_device import DEV

ext_dev = fake_device.ext_dev  # the fixture, for the device tests below

KINDS = ["interp", "llvm", "c"]
MIRROR_ALIAS = (r"mirror: argument 0 \(A\) and argument 1 \(B\) overlap in memory, and mirror writes argument 1 "
                r"\(B\)")


@pytest.fixture(scope="module")
def mirror() -> dict[str, object]:
    return {kind: mirror_program(kind, parallel=kind != "interp") for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_same_array_in_and_out_is_refused_on_every_backend(mirror, kind):
    f = mirror[kind]
    x = np.arange(8, dtype="float32")
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        f(x, x)
    np.testing.assert_array_equal(x, np.arange(8, dtype="float32"))  # nothing ran


@pytest.mark.parametrize("kind", KINDS)
def test_overlapping_views_are_refused_and_disjoint_views_run(mirror, kind):
    f = mirror[kind]
    base = np.arange(16, dtype="float32")
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        f(base[:8], base[7:15])
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        f(base[4:12], nd.from_dlpack(base[:8]))  # a loom.nd view of the same memory
    f(base[:8], base[8:])  # adjacent, not overlapping
    np.testing.assert_array_equal(base[8:], np.full(8, 7.0, "float32"))


@pytest.mark.parametrize("kind", KINDS)
def test_inputs_may_alias_each_other(kind):
    f = add_program(kind)
    a, c = np.arange(6, dtype="float32"), np.zeros(6, "float32")
    f(a, a, c)
    np.testing.assert_array_equal(c, a * 2)
    with pytest.raises(ArgumentValueError, match=r"add: argument 0 \(A\) and argument 2 \(C\) overlap"):
        f(a, np.ones(6, "float32"), a)


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_the_fast_path_compares_the_pointers_too(mirror, kind):
    f = mirror[kind]
    x, y = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    f(x, y)  # learned
    f(x, y)  # fast
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        f(x, x)
    big = np.arange(16, dtype="float32")
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        f(big[8:], big[1:9])  # same layout key, partial overlap
    f(big[:8], big[8:])
    np.testing.assert_array_equal(big[8:], np.full(8, 7.0, "float32"))
    xs, ys = nd.array(x), nd.empty((8,), "float32")
    f(xs, ys)
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        f(xs, xs)


@pytest.mark.parametrize("kind", KINDS)
def test_a_written_array_reaching_an_element_twice_is_refused(kind):
    f = twice_program(kind, strided=True)
    a = np.arange(4, dtype="float32")
    out = np.zeros(4, "float32")
    with pytest.raises(ArgumentValueError, match=r"strides \(0,\) \(elements\) reach some element from two indices"):
        f(a, as_strided(out, shape=(4,), strides=(0,)))
    f(a, out[::-1][::-1])  # a plain view
    np.testing.assert_array_equal(out, a * 2)


def test_device_arrays_overlap_within_their_device(ext_dev):
    checker = ArgumentChecker(on_device_twice())
    a = nd.array(np.arange(4, dtype="float32"), DEV)
    with pytest.raises(ArgumentValueError, match=r"twice: argument 0 \(A\) and argument 1 \(B\) overlap"):
        checker.bind((a, a))
    checker.bind((a, nd.empty((4,), "float32", DEV)))


# -- which parameters are written ---------------------------------------------------------------------------


def test_make_api_records_the_written_parameters_and_signatures_keep_them():
    n = loom.var("n")
    A, B, C = (loom.decl_buffer((n,), "float32", name=x) for x in "ABC")
    i = loom.var("i")
    f = PrimFunc([A.data, B.data, C.data, n], For(i, 0, n, "serial", BufferStore(C, A[i] + B[i], [i])),
                 buffer_map={A.data: A, B.data: B, C.data: C})
    made = make_api(f, "add")
    assert made.attrs[WRITTEN_PARAMS_ATTR] == (2,)
    assert signature_of(made).attrs[WRITTEN_PARAMS_ATTR] == (2,)
    assert declared_writes(signature_of(made)) == (2,)
    # A handle passed to an extern function may be written through: assumed written.
    ext = PrimFunc([A.data, B.data], Evaluate(loom.call_extern("int32", "fill", A.data, B.data)))
    assert written_params(ext) == (0, 1)
    # A made signature without the attribute (an older Loom's) has lost its body: everything may be written.
    old = signature_of(made).with_(attrs={k: v for k, v in made.attrs.items() if k != WRITTEN_PARAMS_ATTR})
    assert declared_writes(old) == (0, 1, 2)
    with pytest.raises(loom.LoomError, match="expected indices of its handle parameters"):
        declared_writes(made.with_attr(WRITTEN_PARAMS_ATTR, [3]))


@pytest.mark.parametrize("kind", ["interp", "llvm", "c"])
def test_written_parameters_survive_export_and_load(mirror, kind, tmp_path):
    path = os.path.join(tmp_path, "mirror.so" if kind != "interp" else "mirror.loom")
    mirror[kind].export_library(path)
    g = loom.runtime.load_module(path)
    x = np.arange(8, dtype="float32")
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        g(x, x)
    y = np.zeros(8, "float32")
    g(x, y)
    np.testing.assert_array_equal(y, np.full(8, 7.0, "float32"))


def test_written_parameters_come_back_from_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path))
    first = mirror_program("c")
    before = loom.backend.stats()["cache_hits"]
    second = mirror_program("c")
    assert loom.backend.stats()["cache_hits"] == before + 1
    for f in (first, second):
        assert f.info.functions["mirror"].attrs[WRITTEN_PARAMS_ATTR] == (1,)
    x = np.arange(8, dtype="float32")
    with pytest.raises(ArgumentValueError, match=MIRROR_ALIAS):
        second(x, x)


# -- the helpers -----------------------------------------------------------------------------------------------


def _brute_force(ranges, written):
    for i in written:
        for j, rj in enumerate(ranges):
            ri = ranges[i]
            if j != i and ri and rj and ri[0] == rj[0] and ri[1] < rj[2] and rj[1] < ri[2]:
                return True
    return False


@pytest.mark.parametrize("count", [2, 5, 8, 9, 20])
def test_first_overlap_agrees_with_brute_force(count):
    rng = random.Random(count)
    spaces = [HOST_MEMORY, (12, 0)]
    for _ in range(400):
        ranges = []
        for _ in range(count):
            if rng.random() < 0.1:
                ranges.append(None)
            else:
                lo = rng.randrange(0, 200)
                ranges.append((rng.choice(spaces), lo, lo + rng.randrange(1, 30)))
        written = tuple(sorted(rng.sample(range(count), rng.randrange(0, 3))))
        pair = first_overlap(ranges, written)
        assert (pair is not None) == _brute_force(ranges, written), (ranges, written)
        if pair is not None:
            i, j = pair
            assert i != j and (i in written or j in written)
            assert ranges[i][0] == ranges[j][0] and ranges[i][1] < ranges[j][2] and ranges[j][1] < ranges[i][2]


def test_reaches_twice_agrees_with_enumeration():
    rng = random.Random(7)
    for _ in range(300):
        ndim = rng.randrange(1, 4)
        shape = tuple(rng.randrange(1, 5) for _ in range(ndim))
        strides = tuple(rng.randrange(0, 7) for _ in range(ndim))
        offsets = {sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*shape)}
        assert reaches_twice(shape, strides) == (len(offsets) != int(np.prod(shape))), (shape, strides)
